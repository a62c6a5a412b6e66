"""PyFlink's ``pyflink.common.watermark_strategy``: re-exports of ``streamflow.eventtime``."""

from streamflow.api.pyflink_names import (
    AssignerWithPeriodicWatermarksWrapper as AssignerWithPeriodicWatermarksWrapper,
)
from streamflow.eventtime import TimestampAssigner as TimestampAssigner
from streamflow.eventtime import WatermarkGenerator as WatermarkGenerator
from streamflow.eventtime import WatermarkStrategy as WatermarkStrategy

__all__ = [
    "AssignerWithPeriodicWatermarksWrapper",
    "TimestampAssigner",
    "WatermarkGenerator",
    "WatermarkStrategy",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
