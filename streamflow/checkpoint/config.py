"""Checkpoint and restart configuration, with PyFlink's names."""

from __future__ import annotations

import datetime
import enum
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..state.codec import Codec, MsgpackCodec
from .restart_strategy import (  # noqa: F401  (re-exported: their home before)
    ExponentialDelayRestart,
    FailureRateRestart,
    FallbackRestart,
    FixedDelayRestart,
    NoRestart,
    RestartStrategies,
    RestartStrategy,
    _ms,
)
from .storages import (
    CheckpointStorage,
    ExternalizedCheckpointRetention,
    JobManagerCheckpointStorage,
    local_path,
)

if TYPE_CHECKING:
    from ..types.time import Duration
    from .storage import FileSystemCheckpointStorage

log = logging.getLogger(__name__)


class CheckpointingMode(enum.Enum):
    EXACTLY_ONCE = "exactly_once"
    AT_LEAST_ONCE = "at_least_once"


def _at_least_minimal(ms: int, what: str) -> int:
    """Flink's CheckpointConfig refuses an interval or a timeout under 10 ms (its message)."""
    minimal = CheckpointConfig.MINIMAL_CHECKPOINT_TIME
    if ms < minimal:
        raise ValueError(f"{what} must be larger than or equal to {minimal} ms, got {ms}")
    return ms


@dataclass
class CheckpointConfig:
    """``env.get_checkpoint_config()``: how and where checkpoints are taken."""

    # Flink's CheckpointConfig constants (PyFlink 1.x exposes them)
    DEFAULT_MODE: ClassVar[CheckpointingMode] = CheckpointingMode.EXACTLY_ONCE
    DEFAULT_TIMEOUT: ClassVar[int] = 10 * 60 * 1000
    DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS: ClassVar[int] = 0
    DEFAULT_MAX_CONCURRENT_CHECKPOINTS: ClassVar[int] = 1
    MINIMAL_CHECKPOINT_TIME: ClassVar[int] = 10  # the shortest interval and timeout Flink takes

    interval_ms: int | None = None
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    storage_dir: Path | None = None
    unaligned: bool = False
    aligned_timeout_ms: int | None = None
    min_pause_ms: int = 0
    timeout_ms: int = 600_000
    max_concurrent: int = 1
    retained: int = 3
    codec: Codec = field(default_factory=MsgpackCodec)
    tolerable_failures: int = 0
    fallback_to_older_checkpoint: bool = False
    storage: FileSystemCheckpointStorage | None = None
    records_codec: Codec | None = None  # in-flight records; None: the state codec
    incremental: bool = True  # heap keyed state: deltas and bases (state/incremental.py)
    incremental_max_chain: int = 32  # deltas after a base before the next full materialisation
    # heap checkpoints encoded in a forked child: auto, on or off (state/heap_fork.py); with a
    # number, a capture of at least that many entries forks (on) instead of the cost estimate
    snapshot_process: str = "auto"
    snapshot_process_min_entries: int | None = None
    externalized_retention: ExternalizedCheckpointRetention = (
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    storage_surface: CheckpointStorage | None = None  # the PyFlink storage object set, if any
    force_unaligned: bool = False  # recorded (set_force_unaligned_checkpoints)
    retention_set: bool = False  # the program chose a retention (Flink's flag is then its value)
    prefer_checkpoint_for_recovery: bool = False  # recorded (PyFlink 1.x)

    def is_checkpointing_enabled(self) -> bool:
        return self.interval_ms is not None

    def set_checkpoint_interval(self, interval: int | datetime.timedelta) -> CheckpointConfig:
        self.interval_ms = _at_least_minimal(_ms(interval, "checkpoint interval"), "Checkpoint interval")
        return self

    def get_checkpoint_interval(self) -> int:
        return self.interval_ms or -1

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> CheckpointConfig:
        """EXACTLY_ONCE (default) aligns barriers; AT_LEAST_ONCE never blocks a channel: lower
        latency under skew, but records may be processed twice after a restore."""
        self.mode = mode
        self._check_mode()
        return self

    def set_checkpoint_storage_dir(self, path: str | Path) -> CheckpointConfig:
        """Where checkpoints go (one ``chk-<id>`` directory each) and are restored from: a
        local path or a ``file://`` URI."""
        self.storage_dir = local_path(path)
        self.storage = None
        return self

    def set_checkpoint_storage(
        self, storage: CheckpointStorage | FileSystemCheckpointStorage
    ) -> CheckpointConfig:
        """PyFlink's ``JobManagerCheckpointStorage()`` (checkpoints in memory) or
        ``FileSystemCheckpointStorage(path)`` (in that directory), see
        :mod:`streamflow.checkpoint.storages`; or a storage object of
        :mod:`streamflow.checkpoint.storage` (e.g. a subclass wrapping a slow or failing disk
        in tests), whose directory becomes the storage directory."""
        if isinstance(storage, CheckpointStorage):
            directory = storage.directory()
            self.storage = None
            self.storage_dir = directory
            self.storage_surface = storage
            return self
        self.storage = storage
        self.storage_dir = storage.directory
        return self

    def get_checkpoint_storage(self) -> CheckpointStorage:
        """The storage as PyFlink's classes name it."""
        from .storages import FileSystemCheckpointStorage as FsStorage

        surface = self.storage_surface
        if surface is not None and surface.directory() == self.storage_dir:
            return surface
        return JobManagerCheckpointStorage() if self.storage_dir is None else FsStorage(self.storage_dir)

    def set_externalized_checkpoint_retention(
        self, retention: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """Accepted with PyFlink's values; checkpoints in a storage directory are always kept
        when a job is cancelled (they are what a restarted program restores from), so
        ``RETAIN_ON_CANCELLATION`` is what happens and the other values are logged as not applied."""
        if not isinstance(retention, ExternalizedCheckpointRetention):
            raise TypeError(f"expected an ExternalizedCheckpointRetention, got {retention!r}")
        if retention is not ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION:
            log.warning("externalized checkpoint retention %s is not applied: streamflow keeps the newest "
                        "retained checkpoints in the storage directory when a job is cancelled "
                        "(RETAIN_ON_CANCELLATION)", retention.name)
        self.externalized_retention = retention
        self.retention_set = True
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return self.externalized_retention

    def enable_externalized_checkpoints(
        self, cleanup_mode: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """PyFlink 1.x's name of :meth:`set_externalized_checkpoint_retention` (its
        ``ExternalizedCheckpointCleanup`` is this ``ExternalizedCheckpointRetention``)."""
        return self.set_externalized_checkpoint_retention(cleanup_mode)

    def get_externalized_checkpoint_cleanup(self) -> ExternalizedCheckpointRetention | None:
        """PyFlink 1.x: the cleanup mode the program enabled, ``None`` when it enabled none."""
        return self.externalized_retention if self.retention_set else None

    def is_externalized_checkpoints_enabled(self) -> bool:
        """As Flink's once the program chose a retention: whether it is not
        ``NO_EXTERNALIZED_CHECKPOINTS``; before, whether checkpoints go to a storage directory
        (streamflow keeps those when a job is cancelled, see ``ExternalizedCheckpointRetention``)."""
        if self.retention_set:
            none = ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
            return self.externalized_retention is not none
        return self.storage_dir is not None

    def set_prefer_checkpoint_for_recovery(self, prefer_checkpoint_for_recovery: bool) -> CheckpointConfig:
        """PyFlink 1.x: fail over to the latest checkpoint even when a savepoint is newer.
        streamflow's in-process failover always restores the latest completed checkpoint (never
        a savepoint taken since), so ``True`` is what happens; ``False`` is recorded and logged."""
        self.prefer_checkpoint_for_recovery = bool(prefer_checkpoint_for_recovery)
        if not prefer_checkpoint_for_recovery:
            log.info("set_prefer_checkpoint_for_recovery(False) recorded: a failover restores the latest "
                     "completed checkpoint, never a savepoint taken since")  # fmt: skip
        return self

    def is_prefer_checkpoint_for_recovery(self) -> bool:
        return self.prefer_checkpoint_for_recovery

    def get_checkpoint_storage_dir(self) -> Path | None:
        return self.storage_dir

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        self.unaligned = enabled
        self._check_mode()
        return self

    def _check_mode(self) -> None:
        if self.unaligned and self.mode is CheckpointingMode.AT_LEAST_ONCE:
            raise ValueError(
                "unaligned checkpoints need CheckpointingMode.EXACTLY_ONCE (at-least-once "
                "checkpoints never block a channel, so there is nothing to overtake)"
            )

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self.unaligned

    def set_aligned_checkpoint_timeout(self, timeout: int | datetime.timedelta) -> CheckpointConfig:
        """Alternating mode: start aligned, go unaligned once alignment takes longer than this."""
        self.aligned_timeout_ms = _ms(timeout, "aligned checkpoint timeout")
        return self

    def set_min_pause_between_checkpoints(self, pause: int | datetime.timedelta) -> CheckpointConfig:
        self.min_pause_ms = _ms(pause, "min pause between checkpoints")
        return self

    def set_checkpoint_timeout(self, timeout: int | datetime.timedelta) -> CheckpointConfig:
        self.timeout_ms = _at_least_minimal(_ms(timeout, "checkpoint timeout"), "Checkpoint timeout")
        return self

    def set_max_concurrent_checkpoints(self, n: int) -> CheckpointConfig:
        if n < 1:
            raise ValueError(f"max concurrent checkpoints must be >= 1, got {n}")
        self.max_concurrent = n
        return self

    def set_max_retained_checkpoints(self, n: int) -> CheckpointConfig:
        if n < 1:
            raise ValueError(f"retained checkpoints must be >= 1, got {n}")
        self.retained = n
        return self

    def set_tolerable_checkpoint_failure_number(self, n: int) -> CheckpointConfig:
        """How many checkpoints in a row may fail (time out, be declined, fail to be written)
        before the job fails over; default 0: the first failure does. Every failure is logged
        at WARNING with its cause either way."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"tolerable checkpoint failure number must be an int >= 0, got {n!r}")
        self.tolerable_failures = n
        return self

    # -- PyFlink's getters and deprecated names ---------------------------------------
    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.mode

    def get_checkpoint_timeout(self) -> int:
        return self.timeout_ms

    def get_min_pause_between_checkpoints(self) -> int:
        return self.min_pause_ms

    def get_max_concurrent_checkpoints(self) -> int:
        return self.max_concurrent

    def is_fail_on_checkpointing_errors(self) -> bool:
        """Deprecated in PyFlink 2.0: ``get_tolerable_checkpoint_failure_number() == 0``."""
        return self.tolerable_failures == 0

    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool) -> CheckpointConfig:
        """Deprecated in PyFlink 2.0: 0 tolerable failures, or (False) unlimited, as Flink maps it."""
        self.tolerable_failures = 0 if fail_on_checkpointing_errors else 2**31 - 1
        return self

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self.enable_unaligned_checkpoints(False)

    def get_aligned_checkpoint_timeout(self) -> Duration:
        from ..types.time import Duration

        return Duration.of_millis(self.aligned_timeout_ms or 0)

    def set_alignment_timeout(self, alignment_timeout: int | datetime.timedelta) -> CheckpointConfig:
        """Deprecated in PyFlink 2.0: ``set_aligned_checkpoint_timeout``."""
        return self.set_aligned_checkpoint_timeout(alignment_timeout)

    def get_alignment_timeout(self) -> Duration:
        return self.get_aligned_checkpoint_timeout()

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> CheckpointConfig:
        """Recorded: Flink forces unaligned checkpoints past iteration feedback edges and custom
        partitioners; streamflow takes unaligned checkpoints on every edge when they are enabled."""
        self.force_unaligned = bool(force_unaligned_checkpoints)
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        return self.force_unaligned

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self.tolerable_failures

    def enable_fallback_to_older_checkpoint(self, enabled: bool = True) -> CheckpointConfig:
        """When the latest completed checkpoint is damaged (its ``_metadata`` missing or
        corrupt), restore the newest intact older one instead of refusing to start. Off by
        default: an older checkpoint replays output the damaged one had committed, so files
        or topics may see records twice. Every fallback is logged at WARNING."""
        self.fallback_to_older_checkpoint = enabled
        return self

    def set_state_codec(self, codec: Codec) -> CheckpointConfig:
        """``PickleCodec()`` opts in to arbitrary objects in state (read back only from
        the storage directory configured here, never from elsewhere)."""
        self.codec = codec
        return self

    def set_records_codec(self, codec: Codec) -> CheckpointConfig:
        """The codec of in-flight records in unaligned checkpoints (channel state), chosen per
        job; by default the state codec. ``PickleCodec()`` opts in to records of any type
        (read back only from the storage directory configured here)."""
        self.records_codec = codec
        return self

    def get_records_codec(self) -> Codec:
        return self.records_codec or self.codec

    def enable_incremental_checkpoints(
        self, enabled: bool = True, max_chain: int | None = None
    ) -> CheckpointConfig:
        """Keyed state is checkpointed incrementally (on by default; without a storage directory the
        chain is kept in memory with the latest checkpoint): a checkpoint writes the keys changed
        since the last one, and a full base once the chain holds ``max_chain`` deltas (default 32)
        or its deltas add up to twice the base, so a restore reads at most a base and ``max_chain``
        deltas, and at most three bases' worth of data. ``False``: every checkpoint holds all keyed
        state (``state.backend.incremental``; see docs/checkpoints.md)."""
        self.incremental = bool(enabled)
        if max_chain is not None:
            if isinstance(max_chain, bool) or not isinstance(max_chain, int) or max_chain < 0:
                raise ValueError(f"max_chain must be an int >= 0, got {max_chain!r}")
            self.incremental_max_chain = max_chain
        return self

    def is_incremental_checkpoints_enabled(self) -> bool:
        return self.incremental
