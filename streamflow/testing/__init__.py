"""Test utilities for users of streamflow: a manual clock, a list sink, fault injection."""

from ..connectors.sinks import CollectSink as ListSink
from .clock import ManualClock as ManualClock

__all__ = ["ListSink", "ManualClock"]
