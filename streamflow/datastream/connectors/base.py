"""PyFlink's ``pyflink.datastream.connectors.base``."""

from streamflow.api.pyflink_names import StreamTransformer as StreamTransformer
from streamflow.api.pyflink_names import SupportsPreprocessing as SupportsPreprocessing

from ...connectors.base import Sink as Sink
from ...connectors.base import Source as Source
from ...connectors.kafka_common import DeliveryGuarantee as DeliveryGuarantee

__all__ = [
    "DeliveryGuarantee",
    "Sink",
    "Source",
    "StreamTransformer",
    "SupportsPreprocessing",
]
