"""``StateTtlConfig``: time-to-live of keyed state, with PyFlink's builder.

``StateTtlConfig.new_builder(Time.seconds(1)).set_update_type(...)
.set_state_visibility(...).cleanup_full_snapshot().build()`` and
``descriptor.enable_time_to_live(config)``, as in
``flink-python/pyflink/datastream/state.py`` (2.3.0). The settings are kept
on the descriptor; ``ttl_state.py`` enforces the access rules and
``ttl_cleanup.py`` the cleanup strategies.
"""

from __future__ import annotations

import enum
from typing import Any

from ..types.time import Duration, Time

__all__ = ["StateTtlConfig"]


class StateTtlConfig:
    class UpdateType(enum.Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(enum.Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(enum.Enum):
        ProcessingTime = 0

    class CleanupStrategies:
        class Strategies(enum.Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy:
            """Base of the strategy settings (PyFlink's ``CleanupStrategies.CleanupStrategy``)."""

        class EmptyCleanupStrategy(CleanupStrategy):
            """Full-snapshot cleanup has no settings."""

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool) -> None:
                if int(cleanup_size) < 0:
                    raise ValueError(f"incremental cleanup size must be >= 0, got {cleanup_size!r}")
                self._cleanup_size = int(cleanup_size)
                self._run_cleanup_for_every_record = bool(run_cleanup_for_every_record)

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            """PyFlink's: a falsy ``periodic_compaction_time`` (None, 0, False, '') means Flink's
            default, 30 days; a ``Duration`` (0 ms included) is kept as given."""

            def __init__(
                self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
            ) -> None:
                if not isinstance(periodic_compaction_time, Duration) and periodic_compaction_time:
                    raise TypeError(
                        "periodic_compaction_time must be a Duration (or None for Flink's default, "
                        f"30 days), got {periodic_compaction_time!r}"
                    )
                self._query_time_after_num_entries = int(query_time_after_num_entries)
                self._periodic_compaction_time = periodic_compaction_time

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Duration:
                periodic = self._periodic_compaction_time
                return periodic if isinstance(periodic, Duration) else Duration.of_days(30)

        #: Flink's heap default when background cleanup is on and no strategy is set
        DEFAULT_INCREMENTAL_CLEANUP_STRATEGY: Any = None
        EMPTY_STRATEGY: Any = None  # PyFlink's name: the settings of full-snapshot cleanup

        def __init__(self, strategies: dict[Any, Any], is_cleanup_in_background: bool) -> None:
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy | None:
            """The incremental settings; with background cleanup on and none set, Flink's heap
            default (5 entries per state access, not per record)."""
            strategies = StateTtlConfig.CleanupStrategies
            found = self._strategies.get(strategies.Strategies.INCREMENTAL_CLEANUP)
            if found is None and self._is_cleanup_in_background:
                return strategies.DEFAULT_INCREMENTAL_CLEANUP_STRATEGY
            return found

        def in_rocksdb_compact_filter(self) -> bool:
            return self.get_rocksdb_compact_filter_cleanup_strategy() is not None

        def get_rocksdb_compact_filter_cleanup_strategy(
            self,
        ) -> StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy | None:
            strategies = StateTtlConfig.CleanupStrategies
            found = self._strategies.get(strategies.Strategies.ROCKSDB_COMPACTION_FILTER)
            if found is None and self._is_cleanup_in_background:
                return strategies.RocksdbCompactFilterCleanupStrategy(1000)
            return found

    def __init__(
        self,
        update_type: StateTtlConfig.UpdateType,
        state_visibility: StateTtlConfig.StateVisibility,
        ttl_time_characteristic: StateTtlConfig.TtlTimeCharacteristic,
        ttl: int,
        cleanup_strategies: StateTtlConfig.CleanupStrategies,
    ) -> None:
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = int(ttl)
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: int) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> StateTtlConfig.UpdateType:
        return self._update_type

    def get_state_visibility(self) -> StateTtlConfig.StateVisibility:
        return self._state_visibility

    def get_ttl(self) -> Time:
        """The time to live: a ``Time`` (PyFlink's type), an int of milliseconds."""
        return Time(self._ttl)

    def get_ttl_time_characteristic(self) -> StateTtlConfig.TtlTimeCharacteristic:
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type != StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> StateTtlConfig.CleanupStrategies:
        return self._cleanup_strategies

    def __repr__(self) -> str:
        return (
            f"StateTtlConfig(ttl={self._ttl}ms, update={self._update_type.name}, "
            f"visibility={self._state_visibility.name})"
        )

    class Builder:
        def __init__(self, ttl: int) -> None:
            self._ttl_given = ttl  # checked by build(), as Flink's StateTtlConfig constructor does
            self._ttl = int(ttl)
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._strategies: dict[Any, Any] = {}
            self._background = True

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, visibility: StateTtlConfig.StateVisibility) -> StateTtlConfig.Builder:
            self._visibility = visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            self._characteristic = characteristic
            return self

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            strategies = StateTtlConfig.CleanupStrategies
            empty = strategies.EmptyCleanupStrategy()
            self._strategies[strategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = empty
            return self

        def cleanup_incrementally(
            self, cleanup_size: int, run_cleanup_for_every_record: bool
        ) -> StateTtlConfig.Builder:
            strategies = StateTtlConfig.CleanupStrategies
            incremental = strategies.IncrementalCleanupStrategy(cleanup_size, run_cleanup_for_every_record)
            self._strategies[strategies.Strategies.INCREMENTAL_CLEANUP] = incremental
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int, periodic_compaction_time: Any = None
        ) -> StateTtlConfig.Builder:
            strategies = StateTtlConfig.CleanupStrategies
            self._strategies[strategies.Strategies.ROCKSDB_COMPACTION_FILTER] = (
                strategies.RocksdbCompactFilterCleanupStrategy(
                    query_time_after_num_entries, periodic_compaction_time
                )
            )
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            self._background = False
            return self

        def set_ttl(self, ttl: int) -> StateTtlConfig.Builder:
            self._ttl_given, self._ttl = ttl, int(ttl)
            return self

        def build(self) -> StateTtlConfig:
            """The configuration; a TTL that is not positive is refused here, whether it came
            from ``new_builder`` or ``set_ttl`` (Flink: "TTL is expected to be positive")."""
            if self._ttl <= 0:
                raise ValueError(f"a state TTL must be positive, got {self._ttl_given!r}")
            return StateTtlConfig(
                self._update_type,
                self._visibility,
                self._characteristic,
                self._ttl,
                StateTtlConfig.CleanupStrategies(self._strategies, self._background),
            )


StateTtlConfig.CleanupStrategies.DEFAULT_INCREMENTAL_CLEANUP_STRATEGY = (
    StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(5, False)
)
StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()
