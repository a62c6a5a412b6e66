"""PyFlink's ``pyflink.datastream.connectors.number_seq``."""

from streamflow.connectors.number_seq import NumberSequenceSource as NumberSequenceSource

__all__ = ["NumberSequenceSource"]
