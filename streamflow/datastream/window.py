"""PyFlink's ``pyflink.datastream.window``: re-exports of ``streamflow.windowing``."""

from streamflow.types.serializer import CountWindowSerializer as CountWindowSerializer
from streamflow.types.serializer import GlobalWindowSerializer as GlobalWindowSerializer
from streamflow.types.serializer import TimeWindowSerializer as TimeWindowSerializer
from streamflow.windowing.assigners import EventTimeSessionWindows as EventTimeSessionWindows
from streamflow.windowing.assigners import GlobalWindows as GlobalWindows
from streamflow.windowing.assigners import MergingWindowAssigner as MergingWindowAssigner
from streamflow.windowing.assigners import ProcessingTimeSessionWindows as ProcessingTimeSessionWindows
from streamflow.windowing.assigners import SlidingEventTimeWindows as SlidingEventTimeWindows
from streamflow.windowing.assigners import SlidingProcessingTimeWindows as SlidingProcessingTimeWindows
from streamflow.windowing.assigners import TumblingEventTimeWindows as TumblingEventTimeWindows
from streamflow.windowing.assigners import TumblingProcessingTimeWindows as TumblingProcessingTimeWindows
from streamflow.windowing.assigners import WindowAssigner as WindowAssigner
from streamflow.windowing.continuous import ContinuousEventTimeTrigger as ContinuousEventTimeTrigger
from streamflow.windowing.continuous import ContinuousProcessingTimeTrigger as ContinuousProcessingTimeTrigger
from streamflow.windowing.count import CountSlidingWindowAssigner as CountSlidingWindowAssigner
from streamflow.windowing.count import CountTumblingWindowAssigner as CountTumblingWindowAssigner
from streamflow.windowing.count import CountWindow as CountWindow
from streamflow.windowing.count import DynamicEventTimeSessionWindows as DynamicEventTimeSessionWindows
from streamflow.windowing.count import (
    DynamicProcessingTimeSessionWindows as DynamicProcessingTimeSessionWindows,
)
from streamflow.windowing.count import SessionWindowTimeGapExtractor as SessionWindowTimeGapExtractor
from streamflow.windowing.evictors import CountEvictor as CountEvictor
from streamflow.windowing.evictors import Evictor as Evictor
from streamflow.windowing.evictors import TimeEvictor as TimeEvictor
from streamflow.windowing.triggers import CountTrigger as CountTrigger
from streamflow.windowing.triggers import EventTimeTrigger as EventTimeTrigger
from streamflow.windowing.triggers import NeverTrigger as NeverTrigger
from streamflow.windowing.triggers import ProcessingTimeTrigger as ProcessingTimeTrigger
from streamflow.windowing.triggers import PurgingTrigger as PurgingTrigger
from streamflow.windowing.triggers import Trigger as Trigger
from streamflow.windowing.triggers import TriggerResult as TriggerResult
from streamflow.windowing.windows import GlobalWindow as GlobalWindow
from streamflow.windowing.windows import TimeWindow as TimeWindow
from streamflow.windowing.windows import Window as Window

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountSlidingWindowAssigner",
    "CountTrigger",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "CountWindowSerializer",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "Evictor",
    "GlobalWindow",
    "GlobalWindowSerializer",
    "GlobalWindows",
    "MergingWindowAssigner",
    "NeverTrigger",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeEvictor",
    "TimeWindow",
    "TimeWindowSerializer",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
