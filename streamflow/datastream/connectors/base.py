"""PyFlink's ``pyflink.datastream.connectors.base``."""

from ...connectors.base import Sink as Sink
from ...connectors.base import Source as Source
from ...connectors.kafka_common import DeliveryGuarantee as DeliveryGuarantee

__all__ = ["DeliveryGuarantee", "Sink", "Source"]
