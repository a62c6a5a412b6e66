"""Test utilities for users of streamflow: a scripted source, a list sink, a checkpoint
recorder, a manual clock, and fault injection for crash tests (``faults``)."""

from ..connectors.sinks import CollectSink as ListSink
from .clock import ManualClock as ManualClock
from .recorder import CheckpointRecorder as CheckpointRecorder
from .scripted import Fail as Fail
from .scripted import Record as Record
from .scripted import ScriptedSource as ScriptedSource

__all__ = ["CheckpointRecorder", "Fail", "ListSink", "ManualClock", "Record", "ScriptedSource"]
