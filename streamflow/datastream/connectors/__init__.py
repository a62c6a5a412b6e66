"""PyFlink's ``pyflink.datastream.connectors`` mirror."""

from streamflow.connectors.base import Sink as Sink
from streamflow.connectors.base import Source as Source
from streamflow.connectors.kafka_common import DeliveryGuarantee as DeliveryGuarantee

__all__ = ["DeliveryGuarantee", "Sink", "Source"]
