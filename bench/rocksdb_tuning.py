"""RocksDB options for the keyed running sum, on the backend alone (no job around it).

The backend of one subtask (``RocksDBKeyedStateBackend``) as ``reduce``/``sum`` drive it: per
record batch (1,024) one multi-get of the uncached keys, a get and a put per record with the
current key set (the safe point of the write-back cache), and every ``E`` records a checkpoint
(``prepare`` + the RocksDB checkpoint + ``snapshot``; no checkpoint storage). K keys, every key
seen twice. Prints CPU time of the process (all threads) and per thread: the event loop's
(``main``), RocksDB's compactions (``rocksdb:low``) and memtable flushes (``rocksdb:high``).

Variants, each on top of the backend's own options (``state/rocksdb_backend.py``):
``current`` (as shipped); ``+full-filters`` (whole-file bloom filters, as before 698888a);
``+leveled`` (leveled compaction, as before 0a3749b); ``+l0t4`` (compaction at 4 level-0
files / sorted runs, RocksDB's default).

Usage: python bench/rocksdb_tuning.py VARIANT KEYS EVERY   (EVERY 0: no checkpoints)
       e.g. current 3000000 81000 against current 3000000 0, run alternately or together.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import rocksdict  # noqa: E402
from benchutil import ThreadCPU, machine  # noqa: E402

from streamflow.state import codec as _codec  # noqa: E402
from streamflow.state import rocksdb_backend as rb  # noqa: E402
from streamflow.state.rocksdb_table import RocksTable  # noqa: E402


def use_variant(name: str) -> None:
    base = rb._options

    def options() -> rocksdict.Options:
        o = base()
        if "+full-filters" in name:
            t = rocksdict.BlockBasedOptions()
            t.set_bloom_filter(10, False)
            t.set_block_cache(rb._shared_block_cache())
            t.set_cache_index_and_filter_blocks(True)
            t.set_pin_l0_filter_and_index_blocks_in_cache(True)
            o.set_block_based_table_factory(t)
        if "+leveled" in name:
            o.set_compaction_style(rocksdict.DBCompactionStyle.level())
        if "+l0t4" in name:
            o.set_level_zero_file_num_compaction_trigger(4)
        return o

    rb._options = options


def main() -> None:
    name, keys, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    batch = 1024
    use_variant(name)
    root = tempfile.mkdtemp(prefix="sf-rocks-tuning-")
    be = rb.RocksDBKeyedStateBackend(
        128, range(128), operator_id="sum", subtask=0, codec=_codec.MsgpackCodec(), local_dir=root
    )
    table = cast(RocksTable, be.table("sum", "internal"))
    threads = ThreadCPU()
    t0, c0 = time.perf_counter(), time.process_time()
    n, nxt, ck, ck_cpu = 0, every, 0, 0.0
    for start in range(0, 2 * keys, batch):
        ks = [i % keys for i in range(start, min(2 * keys, start + batch))]
        table.prefetch(ks)
        for k in ks:
            be.current_key = k
            acc = table.get(k)
            table[k] = (k, 1 if acc is None else acc[1] + 1)
        n += len(ks)
        if every and n >= nxt:
            nxt += every
            ck += 1
            c = time.process_time()
            be.prepare(ck)()
            be.snapshot(ck)
            be.take_shared(ck)
            be.checkpoint_complete(ck)
            ck_cpu += time.process_time() - c
    be.flush()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    per_thread = threads.stop()
    be.close()
    shutil.rmtree(root, ignore_errors=True)
    out = {
        "variant": name,
        "keys": keys,
        "every": every,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "checkpoints": ck,
        "checkpoint_sync_cpu_s": round(ck_cpu, 2),
        "threads": per_thread,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "machine": machine("at the end"),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
