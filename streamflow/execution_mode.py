"""``RuntimeExecutionMode`` and ``TimeCharacteristic``, PyFlink's execution switches.

``RuntimeExecutionMode.BATCH`` (or ``AUTOMATIC`` with only bounded sources)
runs a bounded job with Flink's batch semantics (see
``streamflow/api/batch.py``). ``TimeCharacteristic`` was removed from Flink
2.x's API; it is accepted for old programs, where event time is always
available once timestamps are assigned (Flink 1.12's default), and, as Flink 1.x's
``set_stream_time_characteristic`` did, it sets the auto-watermark interval (0 for
``ProcessingTime``, 200 ms otherwise).
"""

from __future__ import annotations

import enum

__all__ = ["InputDependencyConstraint", "RuntimeExecutionMode", "TimeCharacteristic"]


class RuntimeExecutionMode(enum.Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


class TimeCharacteristic(enum.Enum):
    ProcessingTime = 0
    IngestionTime = 1
    EventTime = 2


class InputDependencyConstraint(enum.Enum):
    """Accepted for old batch programs; streamflow schedules every task at once."""

    ANY = 0
    ALL = 1
