"""Flink's duration values (``TimeUtils.parseDuration``) as configuration keys take them."""

from __future__ import annotations

import datetime
import re
from typing import Any

__all__ = ["duration_ms"]

_DURATION_UNITS = {  # Flink's TimeUtils.parseDuration labels, in milliseconds per unit
    **dict.fromkeys(("", "ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}


def duration_ms(value: Any, key: str) -> int:
    """Milliseconds of a Flink duration value: an int (ms), a ``timedelta`` or ``"200 ms"``, ``"1s"``,
    ``"2 min"`` (an integer and one of Flink's unit labels; a bare number is milliseconds).
    ``key`` names the configuration key in the error a value that is none of these raises."""
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    if match is None or match.group(2) not in _DURATION_UNITS:
        raise ValueError(f"{key}: cannot read the duration {value!r} (e.g. 200, '200 ms', '1 s')")
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]
