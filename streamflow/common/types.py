"""PyFlink's ``pyflink.common.types``: re-exports of ``streamflow.types.row``."""

from streamflow.types.row import Row as Row
from streamflow.types.row import RowKind as RowKind

__all__ = ["Row", "RowKind"]
