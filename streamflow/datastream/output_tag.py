"""PyFlink's ``pyflink.datastream.output_tag``."""

from streamflow.functions import OutputTag as OutputTag

__all__ = ["OutputTag"]
