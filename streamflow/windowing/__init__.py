"""Windowing: windows, assigners, triggers, evictors and the merging window set.

Theory of operation
-------------------
A keyed window operation groups elements by key and by the windows an
assigner gives them; the elements of one key in one window form a *pane*.
A trigger decides when a pane is evaluated (and purged), driven by elements
and by event-time / processing-time timers; an optional evictor trims the
pane around the window function. Session windows merge, tracked per key by
a :class:`MergingWindowSet`. Everything here is pure, synchronous logic:
the window operator owns state and timers (``streamflow.runtime.timers``)
and implements the contexts in ``context.py``.

Modules: ``windows`` (TimeWindow, GlobalWindow), ``assigners``,
``triggers``, ``continuous`` and ``timeout`` (triggers), ``evictors``, ``merging``,
``context`` (what the operator implements). Names follow PyFlink's
``pyflink.datastream.window``; rules follow Flink's ``streaming/api/windowing``.
"""

from streamflow.windowing.assigners import (
    EventTimeSessionWindows as EventTimeSessionWindows,
)
from streamflow.windowing.assigners import GlobalWindows as GlobalWindows
from streamflow.windowing.assigners import MergingWindowAssigner as MergingWindowAssigner
from streamflow.windowing.assigners import (
    ProcessingTimeSessionWindows as ProcessingTimeSessionWindows,
)
from streamflow.windowing.assigners import (
    SlidingEventTimeWindows as SlidingEventTimeWindows,
)
from streamflow.windowing.assigners import (
    SlidingProcessingTimeWindows as SlidingProcessingTimeWindows,
)
from streamflow.windowing.assigners import (
    TumblingEventTimeWindows as TumblingEventTimeWindows,
)
from streamflow.windowing.assigners import (
    TumblingProcessingTimeWindows as TumblingProcessingTimeWindows,
)
from streamflow.windowing.assigners import WindowAssigner as WindowAssigner
from streamflow.windowing.context import DictReducingState as DictReducingState
from streamflow.windowing.context import EvictorContext as EvictorContext
from streamflow.windowing.context import OnMergeContext as OnMergeContext
from streamflow.windowing.context import TriggerContext as TriggerContext
from streamflow.windowing.context import TriggerState as TriggerState
from streamflow.windowing.context import TriggerStateDescriptor as TriggerStateDescriptor
from streamflow.windowing.context import WindowAssignerContext as WindowAssignerContext
from streamflow.windowing.context import merge_reducing_state as merge_reducing_state
from streamflow.windowing.continuous import (
    ContinuousEventTimeTrigger as ContinuousEventTimeTrigger,
)
from streamflow.windowing.continuous import (
    ContinuousProcessingTimeTrigger as ContinuousProcessingTimeTrigger,
)
from streamflow.windowing.evictors import CountEvictor as CountEvictor
from streamflow.windowing.evictors import DeltaEvictor as DeltaEvictor
from streamflow.windowing.evictors import DeltaFunction as DeltaFunction
from streamflow.windowing.evictors import Evictor as Evictor
from streamflow.windowing.evictors import TimeEvictor as TimeEvictor
from streamflow.windowing.evictors import TimestampedValues as TimestampedValues
from streamflow.windowing.merging import MergeFunction as MergeFunction
from streamflow.windowing.merging import MergingWindowSet as MergingWindowSet
from streamflow.windowing.timeout import ProcessingTimeoutTrigger as ProcessingTimeoutTrigger
from streamflow.windowing.triggers import CountTrigger as CountTrigger
from streamflow.windowing.triggers import EndOfStreamTrigger as EndOfStreamTrigger
from streamflow.windowing.triggers import EventTimeTrigger as EventTimeTrigger
from streamflow.windowing.triggers import NeverTrigger as NeverTrigger
from streamflow.windowing.triggers import ProcessingTimeTrigger as ProcessingTimeTrigger
from streamflow.windowing.triggers import PurgingTrigger as PurgingTrigger
from streamflow.windowing.triggers import Trigger as Trigger
from streamflow.windowing.triggers import TriggerResult as TriggerResult
from streamflow.windowing.windows import Duration as Duration
from streamflow.windowing.windows import GlobalWindow as GlobalWindow
from streamflow.windowing.windows import TimeWindow as TimeWindow
from streamflow.windowing.windows import Window as Window
from streamflow.windowing.windows import duration_to_millis as duration_to_millis

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountEvictor",
    "CountTrigger",
    "DeltaEvictor",
    "DeltaFunction",
    "DictReducingState",
    "Duration",
    "EndOfStreamTrigger",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "Evictor",
    "EvictorContext",
    "GlobalWindow",
    "GlobalWindows",
    "MergeFunction",
    "MergingWindowAssigner",
    "MergingWindowSet",
    "NeverTrigger",
    "OnMergeContext",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "ProcessingTimeoutTrigger",
    "PurgingTrigger",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeEvictor",
    "TimeWindow",
    "TimestampedValues",
    "Trigger",
    "TriggerContext",
    "TriggerResult",
    "TriggerState",
    "TriggerStateDescriptor",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
    "WindowAssignerContext",
    "duration_to_millis",
    "merge_reducing_state",
]
