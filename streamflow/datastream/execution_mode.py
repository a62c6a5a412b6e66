"""PyFlink's ``pyflink.datastream.execution_mode``."""

from streamflow.execution_mode import RuntimeExecutionMode as RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
