"""PyFlink's ``pyflink.common.time``: re-exports of ``streamflow.types.time``."""

from streamflow.types.time import Duration as Duration
from streamflow.types.time import Instant as Instant
from streamflow.types.time import Time as Time

__all__ = ["Duration", "Instant", "Time"]
