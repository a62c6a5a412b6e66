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
