"""What a FileSink writes and when it rolls part files: encoders, naming, rolling policies.

Rolling policies are Flink's (apache/flink flink-connector-files
``.../sink/filesystem/rollingpolicies/DefaultRollingPolicy.java`` and
``OnCheckpointRollingPolicy.java``) with PyFlink's names
(``RollingPolicy.default_rolling_policy(...)``, ``RollingPolicy.on_checkpoint_rolling_policy()``).
A policy answers three questions about the in-progress part file:

* ``should_roll_on_checkpoint``: close it at this checkpoint's barrier? If not, the
  file stays in progress across the checkpoint, which records its committed length;
* ``should_roll_on_event``: close it before writing the next record (asked per batch, and
  per record in a batch that would take the file past its size)?
* ``should_roll_on_processing_time``: close it now (checked every ``bucket_check_interval``
  by a processing-time timer, and before each batch)?

:class:`DefaultRollingPolicy` rolls when the file is larger than ``part_size`` bytes
(Flink: ``size > partSize``), older than ``rollover_interval`` ms, or has seen no
write for ``inactivity_interval`` ms. :class:`OnCheckpointRollingPolicy` rolls at
every checkpoint and only then (one file per checkpoint per subtask).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "BulkEncoder",
    "DefaultRollingPolicy",
    "Encoder",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "OutputFileConfigBuilder",
    "PartFileInfo",
    "RollingPolicy",
]


class Encoder:
    """Turns a batch of records into the bytes of its lines (one call per batch)."""

    def __init__(
        self,
        encode_batch: Callable[[list], bytes],
        name: str,
        for_type: Callable[[Any], Encoder] | None = None,
    ) -> None:
        self.encode_batch = encode_batch
        self.name = name
        self._for_type = for_type

    def for_type(self, type_info: Any) -> Encoder:
        """This encoder for a stream declared with ``type_info``: the string encoder writes what
        the JVM's ``toString`` gives for the typed record (``(a,1)``, ``+I[a, 1]``), as PyFlink's
        ``SimpleStringEncoder`` does on the converted Java object; other encoders are unchanged."""
        return self if self._for_type is None or type_info is None else self._for_type(type_info)

    @staticmethod
    def simple_string_encoder(charset_name: str = "utf-8", *, charset: str | None = None) -> Encoder:
        """``str(record)`` and a newline per record (``charset`` is an alias of ``charset_name``)."""
        cs = charset or charset_name

        def encode(records: list) -> bytes:
            return ("\n".join(map(str, records)) + "\n").encode(cs)

        def for_type(type_info: Any) -> Encoder:
            fmt = type_info.format

            def encode_typed(records: list) -> bytes:
                return ("\n".join(map(fmt, records)) + "\n").encode(cs)

            return Encoder(encode_typed, f"simple_string({cs}, {type_info})")

        return Encoder(encode, f"simple_string({cs})", for_type)

    @staticmethod
    def json_lines_encoder() -> Encoder:
        """One JSON document per line (orjson)."""

        def encode(records: list) -> bytes:
            return b"\n".join(map(orjson.dumps, records)) + b"\n"

        return Encoder(encode, "json_lines")


class BulkEncoder(Encoder):
    """A bulk writer factory for ``FileSink.for_bulk_format`` (``CsvBulkWriters.for_schema``): an
    encoder whose files roll on checkpoints only, as Flink's bulk formats.

    ``header``: bytes the sink writes at the start of every part file it opens (Flink's bulk
    writer is made per part file, so a writer's preamble, such as the CSV header of
    ``CsvBulkWriter``, starts each file), before the file's first records; empty: none."""

    def __init__(
        self,
        encode_batch: Callable[[list], bytes],
        name: str,
        for_type: Callable[[Any], Encoder] | None = None,
        header: bytes = b"",
    ) -> None:
        super().__init__(encode_batch, name, for_type)
        self.header = header


@dataclass(frozen=True)
class OutputFileConfig:
    """Part file naming: ``{part_prefix}-{uid}-{subtask}-{n}{part_suffix}``."""

    part_prefix: str = "part"
    part_suffix: str = ""

    def __post_init__(self) -> None:
        for label, value in (("part_prefix", self.part_prefix), ("part_suffix", self.part_suffix)):
            if "/" in value or os.sep in value or "\x00" in value:
                raise ValueError(f"OutputFileConfig {label} {value!r} must not contain a path separator")
        if self.part_prefix.startswith("."):
            raise ValueError(f"OutputFileConfig part_prefix {self.part_prefix!r} must not start with '.'")

    @staticmethod
    def builder() -> OutputFileConfigBuilder:
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self._prefix, self._suffix = "part", ""

    def with_part_prefix(self, prefix: str) -> OutputFileConfigBuilder:
        self._prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> OutputFileConfigBuilder:
        self._suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self._prefix, self._suffix)


OutputFileConfig.OutputFileConfigBuilder = OutputFileConfigBuilder  # type: ignore[attr-defined]  # PyFlink's


@dataclass(frozen=True)
class PartFileInfo:
    """What a policy sees of the in-progress file (Flink's ``PartFileInfo``); times in ms."""

    size: int
    creation_time: int
    last_update_time: int


class RollingPolicy:
    """Base of the rolling policies; build them with the factories (PyFlink's names)."""

    def should_roll_on_checkpoint(self, part: PartFileInfo) -> bool:
        raise NotImplementedError

    def should_roll_on_event(self, part: PartFileInfo) -> bool:
        raise NotImplementedError

    def should_roll_on_processing_time(self, part: PartFileInfo, now_ms: int) -> bool:
        raise NotImplementedError

    @staticmethod
    def default_rolling_policy(
        part_size: int = 128 * 1024 * 1024, rollover_interval: int = 60_000, inactivity_interval: int = 60_000
    ) -> DefaultRollingPolicy:
        return DefaultRollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> OnCheckpointRollingPolicy:
        return OnCheckpointRollingPolicy()


@dataclass(frozen=True)
class DefaultRollingPolicy(RollingPolicy):
    """Roll by size, age and inactivity; files stay in progress across checkpoints."""

    part_size: int = 128 * 1024 * 1024
    rollover_interval: int = 60_000
    inactivity_interval: int = 60_000

    def __post_init__(self) -> None:
        for label in ("part_size", "rollover_interval", "inactivity_interval"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DefaultRollingPolicy {label} must be a positive int, got {value!r}")

    def should_roll_on_checkpoint(self, part: PartFileInfo) -> bool:
        return part.size > self.part_size

    def should_roll_on_event(self, part: PartFileInfo) -> bool:
        return part.size > self.part_size

    def should_roll_on_processing_time(self, part: PartFileInfo, now_ms: int) -> bool:
        return (
            now_ms - part.creation_time >= self.rollover_interval
            or now_ms - part.last_update_time >= self.inactivity_interval
        )


@dataclass(frozen=True)
class OnCheckpointRollingPolicy(RollingPolicy):
    """Roll at every checkpoint, and only then."""

    def should_roll_on_checkpoint(self, part: PartFileInfo) -> bool:
        return True

    def should_roll_on_event(self, part: PartFileInfo) -> bool:
        return False

    def should_roll_on_processing_time(self, part: PartFileInfo, now_ms: int) -> bool:
        return False
