"""Opening a subtask's RocksDB: the tuned options, the block cache every DB of the process
shares, and the working directories' lifecycle.

A working directory is named ``streamflow-rdb-<operator>-<subtask>-pid<pid>-<random>``; one
whose process is gone (SIGKILL, a crash) holds nothing a checkpoint does not, and the next
backend that starts in the same local directory removes it (logged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import rocksdict

from . import abandoned_dirs

_OWNER = "owner.pid"  # where versions before the pid in the name kept the owner
PID_MARK = "pid"


# Tuned for checkpoints every second or so (bench/rocksdb_scale.py, docs/performance.md): each
# checkpoint flushes the memtable into a small sorted run spanning every key group (keys are
# spread by hash). With universal compaction (below) a compaction starts at 12 sorted runs
# (RocksDB's default is 4): fewer merges, and reads probe at most about that many bloom filters.
L0_COMPACTION_TRIGGER = 12
BLOCK_CACHE_BYTES = 128 * 2**20  # one LRU cache for every DB of the process (Flink's managed memory)
_block_cache: rocksdict.Cache | None = None


def _shared_block_cache() -> rocksdict.Cache:
    global _block_cache
    if _block_cache is None:
        _block_cache = rocksdict.Cache(BLOCK_CACHE_BYTES)
    return _block_cache


def options() -> rocksdict.Options:
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.set_write_buffer_size(32 * 2**20)
    opts.set_max_write_buffer_number(3)
    opts.set_target_file_size_base(32 * 2**20)
    # universal compaction: each checkpoint's flush leaves a small sorted run spanning every key
    # group; leveled compaction merged every 12 of them into level 1, rewriting the whole state
    # each time (its cost grew with the state: 10.8 s of 18 s overhead at 3M keys); universal
    # merges runs of similar size (write amplification ~log of the run count) and the whole
    # state only when the newer runs outgrow it (size amplification 200 %). Reads probe more
    # runs, each behind a bloom filter.
    opts.set_compaction_style(rocksdict.DBCompactionStyle.universal())
    opts.set_level_zero_file_num_compaction_trigger(L0_COMPACTION_TRIGGER)
    opts.set_level_zero_slowdown_writes_trigger(3 * L0_COMPACTION_TRIGGER)
    opts.set_level_zero_stop_writes_trigger(4 * L0_COMPACTION_TRIGGER)
    table = rocksdict.BlockBasedOptions()
    table.set_bloom_filter(10, False)  # a read of an absent key (a new key) skips most files
    # partitioned filters and index (Flink's state.backend.rocksdb.memory.partitioned-index-filters):
    # a whole-file filter is 10 bits a key (3.6 MB for 3M keys in one file), larger than a shard
    # of the LRU cache (2 MB: rocksdict gives no shard-count control), so it was evicted as soon
    # as it was used and every multi-get re-read and re-checksummed it from the file (pread and
    # XXH3 were 43 % of the job's CPU at 3M keys); in 4 KB partitions under a small top-level
    # index (pinned) only the partitions a read needs are loaded, and they stay cached
    table.set_index_type(rocksdict.BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_pin_top_level_index_and_filter(True)
    # the state's blocks stay cached across checkpoints: a checkpoint's memtable flush sends
    # reads of recent keys to the files, and compactions replace the files (their blocks leave
    # the cache); with 32 MB, reads paid for file reads and block checksums (docs/performance.md)
    table.set_block_cache(_shared_block_cache())
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    opts.set_block_based_table_factory(table)
    return opts


def write_options() -> rocksdict.WriteOptions:
    wo = rocksdict.WriteOptions()
    # a property at run time (the stubs say method): checkpoints make state durable, not the WAL
    cast(Any, wo).disable_wal = True
    return wo



def remove_abandoned(root: Path, mine: Path) -> None:
    """Working directories of processes that died without closing (SIGKILL, a crash) are removed
    by the next backend that starts in the same local directory: they hold no state a
    checkpoint does not."""
    abandoned_dirs.remove_abandoned(root, "streamflow-rdb-*", _owner, "RocksDB working directory", mine)


def _owner(working_dir: Path) -> int | None:
    """The pid in a working directory's name (``streamflow-rdb-<op>-<subtask>-pid<pid>-<random>``),
    or in the owner file of one an older version made; None if it is not one of ours."""
    _, mark, rest = working_dir.name.partition(f"-{PID_MARK}")
    if mark:
        pid, _, _ = rest.partition("-")
        return int(pid) if pid.isdigit() else None
    try:
        return int((working_dir / _OWNER).read_text())
    except (OSError, ValueError):
        return None
