"""State backends, with PyFlink's names: ``HashMapStateBackend`` (the default) and
``EmbeddedRocksDBStateBackend``.

``env.set_state_backend(EmbeddedRocksDBStateBackend())`` or the configuration key
``state.backend.type: rocksdb`` (Flink's key; ``hashmap`` is the default). A backend
object is configuration only: the runtime asks it for one keyed state backend per
keyed operator subtask (:meth:`StateBackend.create_keyed_backend`). See
docs/state-backends.md.
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import os
import urllib.parse
from typing import Any

from .keyed import KeyedStateBackend

__all__ = [
    "EmbeddedRocksDBStateBackend",
    "HashMapStateBackend",
    "PredefinedOptions",
    "StateBackend",
    "state_backend_from_config",
]

log = logging.getLogger(__name__)


class StateBackend:
    """Where keyed state lives while the job runs (checkpoints go to checkpoint storage)."""

    name = "abstract"

    def create_keyed_backend(
        self, max_parallelism: int, key_groups: range, operator_id: str, subtask: int, codec: Any
    ) -> KeyedStateBackend:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """Keyed state as Python objects in dicts (the default): the fastest access, bounded by memory."""

    name = "hashmap"

    def create_keyed_backend(
        self, max_parallelism: int, key_groups: range, operator_id: str, subtask: int, codec: Any
    ) -> KeyedStateBackend:
        return KeyedStateBackend(max_parallelism, codec=codec, key_groups=key_groups)


class PredefinedOptions(enum.Enum):
    """Accepted for PyFlink compatibility; streamflow tunes RocksDB itself (see the docs)."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3


class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state (all state kinds and window state) in an embedded RocksDB per keyed operator
    subtask, through ``rocksdict``; state may exceed memory. Checkpoints are incremental: a
    checkpoint stores the SST files created since the previous one (``state/rocksdb_backend.py``).

    ``cache_entries``: the write-back cache of decoded values per state (hot keys), flushed
    to RocksDB in one WriteBatch once ``flush_entries`` entries are dirty, at checkpoints,
    and when the cache is full."""

    name = "rocksdb"

    def __init__(
        self,
        enable_incremental_checkpointing: bool | None = None,
        *,
        local_dir: str | None = None,
        cache_entries: int = 100_000,
        flush_entries: int = 4096,
    ) -> None:
        if importlib.util.find_spec("rocksdict") is None:
            raise ImportError(
                "EmbeddedRocksDBStateBackend needs the rocksdict package: "
                "pip install 'aiostreamflow[rocksdb]'"
            )
        if enable_incremental_checkpointing not in (None, True, False):
            raise TypeError(
                "enable_incremental_checkpointing must be None, True or False, "
                f"got {enable_incremental_checkpointing!r}"
            )
        if enable_incremental_checkpointing is False:
            raise ValueError(
                "streamflow's RocksDB checkpoints are always incremental (unchanged SST files are "
                "shared between checkpoints, never rewritten)"
            )
        if cache_entries < 1 or flush_entries < 1:
            raise ValueError(
                f"cache_entries and flush_entries must be >= 1, got {cache_entries}, {flush_entries}"
            )
        self._paths: list[str] = [local_dir] if local_dir else []
        self.cache_entries = int(cache_entries)
        self.flush_entries = int(flush_entries)
        self._predefined = PredefinedOptions.DEFAULT
        self._transfer_threads = 4

    # PyFlink's methods
    def set_db_storage_paths(self, *paths: str) -> None:
        """Where the working DBs live (``state.backend.rocksdb.localdir``); the first path is
        used. Ephemeral: the state survives in checkpoints. As Flink's ``setDbStoragePaths``:
        a ``file:`` URI gives its path (``file://var/db/`` is ``/db``), another scheme is
        refused, so is a relative path; no path resets to the default (the temp dir)."""
        self._paths = [_local_db_path(p) for p in paths]

    def get_db_storage_paths(self) -> list[str]:
        return list(self._paths)

    def is_incremental_checkpoints_enabled(self) -> bool:
        return True

    def set_predefined_options(self, options: PredefinedOptions) -> None:
        """Kept (``get_predefined_options``), without effect: Flink's profiles are RocksDB
        tuning (block cache, compaction threads); logged."""
        if not isinstance(options, PredefinedOptions):
            raise TypeError(f"set_predefined_options needs a PredefinedOptions, got {options!r}")
        if options is not PredefinedOptions.DEFAULT:
            log.info(
                "EmbeddedRocksDBStateBackend: predefined options %s are kept but have no effect "
                "(streamflow tunes its RocksDB with cache_entries/flush_entries)",
                options.name,
            )
        self._predefined = options

    def get_predefined_options(self) -> PredefinedOptions:
        return self._predefined

    def get_number_of_transfer_threads(self) -> int:
        return self._transfer_threads

    def set_number_of_transfer_threads(self, number_of_transfering_threads: int) -> None:
        """Kept (``get_number_of_transfer_threads``), without effect; logged."""
        if int(number_of_transfering_threads) <= 0:
            raise ValueError(
                "The number of threads used to transfer files in EmbeddedRocksDBStateBackend "
                f"should be greater than zero, got {number_of_transfering_threads!r}"
            )
        log.info(
            "EmbeddedRocksDBStateBackend: %s transfer threads are kept but have no effect",
            number_of_transfering_threads,
        )
        self._transfer_threads = int(number_of_transfering_threads)

    def set_options(self, options_factory_class_name: str) -> None:
        """PyFlink names a Java ``RocksDBOptionsFactory`` class here; rocksdict cannot run it,
        so it is refused rather than ignored."""
        raise NotImplementedError(
            f"set_options({options_factory_class_name!r}): a Java RocksDBOptionsFactory cannot "
            "configure streamflow's RocksDB (rocksdict, no JVM); its own settings are "
            "EmbeddedRocksDBStateBackend(cache_entries=..., flush_entries=...)"
        )

    def get_options(self) -> str | None:
        """The options factory's class name: none can be set (see :meth:`set_options`)."""
        return None

    def create_keyed_backend(
        self, max_parallelism: int, key_groups: range, operator_id: str, subtask: int, codec: Any
    ) -> KeyedStateBackend:
        from .rocksdb_backend import RocksDBKeyedStateBackend

        return RocksDBKeyedStateBackend(
            max_parallelism,
            key_groups,
            operator_id=operator_id,
            subtask=subtask,
            codec=codec,
            local_dir=self._paths[0] if self._paths else None,
            cache_entries=self.cache_entries,
            flush_entries=self.flush_entries,
            defer_open=True,  # opened and restored by its task, off the loop (rocksdb_lifecycle.py)
        )

    def __repr__(self) -> str:
        return f"EmbeddedRocksDBStateBackend(local_dir={self._paths[0] if self._paths else None!r})"


def _local_db_path(raw: str) -> str:
    """Flink's ``setDbStoragePaths`` for one path: a ``file:`` URI's path, an absolute
    local path as is (normalised); another scheme or a relative path is refused."""
    if raw is None:
        raise ValueError("set_db_storage_paths: null path")
    text = str(raw)
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme and len(parsed.scheme) > 1:  # (a one-letter scheme is a Windows drive)
        if parsed.scheme.lower() != "file":
            raise ValueError(f"Path {text} has a non-local scheme")
        text = parsed.path
    if not os.path.isabs(text):
        raise ValueError(f"Relative paths are not supported: {raw!r} (RocksDB's local directory)")
    return os.path.normpath(text)


def state_backend_from_config(kind: str) -> StateBackend:
    """``state.backend.type``: ``hashmap`` or ``rocksdb`` (Flink's values)."""
    value = str(kind).strip().lower()
    if value in ("hashmap", "heap", "jobmanager", "filesystem"):
        return HashMapStateBackend()
    if value in ("rocksdb", "embeddedrocksdb"):
        return EmbeddedRocksDBStateBackend()
    raise ValueError(f"unknown state.backend.type {kind!r}: choose hashmap or rocksdb")
