from .clock import ManualClock as ManualClock
