"""Which bucket (sub-directory of the base path) a ``FileSink`` writes to: PyFlink's
``BucketAssigner`` factories, Flink's ``BasePathBucketAssigner`` and ``DateTimeBucketAssigner``.

Theory of operation
-------------------
A bucket id is a path relative to the sink's base path; ``""`` is the base path itself.

* ``BucketAssigner.base_path_bucket_assigner()``: every part file in the base path (``""``).
* ``BucketAssigner.date_time_bucket_assigner(format_str="yyyy-MM-dd--HH", timezone_id=None)``:
  the bucket id is the *processing time* formatted with the Java ``DateTimeFormatter`` pattern
  ``format_str`` in the zone ``timezone_id`` (None: the system's), as Flink's
  ``DateTimeBucketAssigner`` (``dateTimeFormatter.format(Instant.ofEpochMilli(
  context.currentProcessingTime()))``). The time is the sink operator's ``Clock`` (a test's
  ``ManualClock`` moves buckets), read once per batch: a batch goes to one bucket, as if its
  records arrived at that instant. A ``/`` in the pattern makes nested directories, as in Flink.

The pattern is compiled once (:class:`JavaDateTimeFormat`), when the assigner is made, so a bad
pattern or zone is refused when the job is built, naming it. A bucket id is checked before any
file is made in it (:func:`check_bucket_id`: relative, no ``..``, no hidden component), so neither
a pattern nor a restored checkpoint can make the sink write outside its base path.

:func:`make_bucket_directory` creates a bucket's directory durably (each new level fsynced in its
parent) before its first part file; :func:`bucket_directories` lists every bucket directory
under the base path, where a restore looks for its own uncommitted files. The sink's per-bucket
writing (one in-progress part file per bucket, Flink's ``Buckets``) is in ``file_sink_bucket.py``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .file_sink_parts import fsync_dir, io_errors

__all__ = [
    "BucketAssigner",
    "JavaDateTimeFormat",
    "bucket_directories",
    "check_bucket_id",
    "make_bucket_directory",
]


class BucketAssigner:
    """Which sub-directory (bucket) of the base path a ``FileSink`` writes a batch to."""

    def __init__(self, kind: str, format_str: str | None = None, timezone_id: str | None = None) -> None:
        self.kind = kind
        self.format_str, self.timezone_id = format_str, timezone_id
        self._format = None if format_str is None else JavaDateTimeFormat(format_str)
        self._zone = None if kind != "date-time" else zone(timezone_id)

    @staticmethod
    def base_path_bucket_assigner() -> BucketAssigner:
        """Every part file directly in the base path (Flink's ``BasePathBucketAssigner``)."""
        return BucketAssigner("base-path")

    @staticmethod
    def date_time_bucket_assigner(
        format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None
    ) -> BucketAssigner:
        """A bucket per value of the processing time formatted with the Java pattern
        ``format_str`` in zone ``timezone_id`` (None: the system's); Flink's ``DateTimeBucketAssigner``."""
        return BucketAssigner("date-time", format_str, timezone_id)

    def bucket_id(self, now_ms: int) -> str:
        """The bucket of a batch written at processing time ``now_ms``."""
        if self._format is None:
            return ""
        when = dt.datetime.fromtimestamp(now_ms / 1000, tz=self._zone)
        if self._zone is None:
            when = when.astimezone()  # the system's zone, with its offset at that instant
        return self._format.format(when)

    def __repr__(self) -> str:
        if self.kind == "date-time":
            return f"BucketAssigner(date-time, {self.format_str!r}, {self.timezone_id or 'system zone'})"
        return f"BucketAssigner({self.kind})"


def check_bucket_id(bucket_id: object, where: str) -> str:
    """``bucket_id`` if it names a directory inside the base path (``""``: the base path)."""
    if type(bucket_id) is not str:
        raise ValueError(f"{where}: bucket id {bucket_id!r} is not a string")
    if bucket_id == "":
        return bucket_id
    parts = bucket_id.split("/")
    if (
        os.path.isabs(bucket_id)
        or "\x00" in bucket_id
        or (os.sep != "/" and os.sep in bucket_id)
        or any(p in ("", ".", "..") or p.startswith(".") for p in parts)
    ):
        raise ValueError(
            f"{where}: bucket id {bucket_id!r} does not name a sub-directory of the base path "
            "(relative, '/'-separated, no empty, '.', '..' or hidden component)"
        )
    return bucket_id


def zone(timezone_id: str | None) -> dt.tzinfo | None:
    """Java's ``ZoneId.of`` for the ids Python knows: a region (``Europe/Paris``), ``UTC``/``Z``,
    or an offset (``+02:00``, ``UTC+2``, ``GMT-05:30``); None is the system's zone."""
    if timezone_id is None:
        return None
    if timezone_id == "Z":
        return dt.UTC
    m = re.fullmatch(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?", timezone_id)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return dt.timezone(sign * dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0)))
    try:
        return ZoneInfo(timezone_id)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"date_time_bucket_assigner: unknown time zone id {timezone_id!r} ({exc})") from None


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _number(
    get: Callable[[dt.datetime], int], width: int, most: int, letter: str
) -> Callable[[dt.datetime], str]:
    if width > most:
        raise ValueError(f"too many pattern letters: {letter * width!r}")
    return lambda t: str(get(t)).zfill(width)


def _year(width: int) -> Callable[[dt.datetime], str]:
    if width == 2:  # Java's reduced two-digit year
        return lambda t: str(t.year % 100).zfill(2)
    return lambda t: str(t.year).zfill(width)


def _text(names: list[str], get: Callable[[dt.datetime], int], width: int, numeric: bool,
          letter: str) -> Callable[[dt.datetime], str]:  # fmt: skip
    if width <= 2 and numeric:
        return lambda t: str(get(t) + 1).zfill(width)
    if width == 4:
        return lambda t: names[get(t)]
    if width <= 3:
        return lambda t: names[get(t)][:3]
    raise ValueError(f"too many pattern letters: {letter * width!r}")


def _offset(width: int, letter: str) -> Callable[[dt.datetime], str]:
    """``Z`` (+HHMM), ``X`` (Z for zero; +HH, +HHMM, +HH:MM) and ``x`` (no Z) offsets."""
    if width > 3:
        raise ValueError(f"unsupported pattern letters: {letter * width!r}")

    def fmt(t: dt.datetime) -> str:
        off = t.utcoffset() or dt.timedelta(0)
        if letter == "X" and not off:
            return "Z"
        total = int(off.total_seconds()) // 60
        sign, total = ("-" if total < 0 else "+"), abs(total)
        hh, mm = f"{total // 60:02d}", f"{total % 60:02d}"
        if letter == "Z":
            return f"{sign}{hh}{mm}"
        return sign + hh + ("" if width == 1 and mm == "00" else (mm if width < 3 else ":" + mm))

    return fmt


def _field(letter: str, width: int) -> Callable[[dt.datetime], str]:
    if letter in "yu":
        return _year(width)
    if letter in "ML":
        return _text(_MONTHS, lambda t: t.month - 1, width, True, letter)
    if letter == "E":
        return _text(_DAYS, lambda t: t.weekday(), width, False, letter)
    if letter == "a":
        if width > 1:
            raise ValueError(f"too many pattern letters: {letter * width!r}")
        return lambda t: "AM" if t.hour < 12 else "PM"
    if letter == "S":
        return lambda t: f"{t.microsecond:06d}{'0' * max(0, width - 6)}"[:width]
    if letter in "ZXx":
        return _offset(width, letter)
    numbers: dict[str, tuple[Callable[[dt.datetime], int], int]] = {
        "d": (lambda t: t.day, 2),
        "D": (lambda t: t.timetuple().tm_yday, 3),
        "H": (lambda t: t.hour, 2),
        "k": (lambda t: t.hour or 24, 2),
        "K": (lambda t: t.hour % 12, 2),
        "h": (lambda t: t.hour % 12 or 12, 2),
        "m": (lambda t: t.minute, 2),
        "s": (lambda t: t.second, 2),
    }
    if letter in numbers:
        get, most = numbers[letter]
        return _number(get, width, most, letter)
    raise ValueError(f"unsupported pattern letter {letter!r}")


class JavaDateTimeFormat:
    """A Java ``DateTimeFormatter.ofPattern`` pattern (English names), compiled once: years
    ``y``/``u``, months ``M``/``L``, days ``d``/``D``/``E``, hours ``H``/``h``/``k``/``K``/``a``,
    ``m``, ``s``, fractions ``S``, offsets ``Z``/``X``/``x``, ``'quoted text'`` and ``''``; any
    other letter is refused (Java reserves them all), naming it."""

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(
                f"date_time_bucket_assigner: format_str must be a non-empty string, got {pattern!r}"
            )
        self.pattern = pattern
        self._parts: list[str | Callable[[dt.datetime], str]] = []
        try:
            self._compile(pattern)
        except ValueError as exc:
            raise ValueError(
                f"date_time_bucket_assigner: cannot use the pattern {pattern!r}: {exc}"
            ) from None

    def _compile(self, p: str) -> None:
        i = 0
        while i < len(p):
            c = p[i]
            if c == "'":
                end = p.find("'", i + 1)
                if end == i + 1:  # '' is a quote
                    self._parts.append("'")
                    i += 2
                    continue
                if end < 0:
                    raise ValueError("an unterminated quote")
                self._parts.append(p[i + 1 : end].replace("''", "'"))
                i = end + 1
            elif c.isascii() and c.isalpha():
                j = i
                while j < len(p) and p[j] == c:
                    j += 1
                self._parts.append(_field(c, j - i))
                i = j
            elif c in "[]{}#":
                raise ValueError(f"the reserved character {c!r} (quote it)")
            else:
                self._parts.append(c)
                i += 1

    def format(self, when: dt.datetime) -> str:
        return "".join(part if isinstance(part, str) else part(when) for part in self._parts)


def make_bucket_directory(base: str, bucket_id: str) -> None:
    """Create the directory of ``bucket_id`` under ``base`` (blocking: a worker thread runs it),
    each new level made durable in its parent (an fsync), as the part files' renames are."""
    path = base
    for part in bucket_id.split("/"):
        parent, path = path, os.path.join(path, part)
        if os.path.isdir(path):
            continue
        with io_errors(f"create bucket directory {path}"):
            try:
                os.mkdir(path)
            except FileExistsError:
                if not os.path.isdir(path):
                    raise
                continue
        fsync_dir(parent)


def bucket_directories(base: str) -> list[str]:
    """The bucket ids of the directories under ``base`` (``""`` and every non-hidden
    sub-directory, symlinks not followed): where a restore looks for its own uncommitted files."""
    found = []
    with io_errors(f"list directory {base}"):
        for dirpath, dirnames, _files in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rel = os.path.relpath(dirpath, base)
            found.append("" if rel == "." else rel.replace(os.sep, "/"))
    return found
