"""PyFlink 1.x's ``pyflink.datastream.time_characteristic`` (accepted for old programs)."""

from streamflow.execution_mode import TimeCharacteristic as TimeCharacteristic

__all__ = ["TimeCharacteristic"]
