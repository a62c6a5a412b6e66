"""A pipeline script for the CLI tests: a keyed running sum, slow enough to take checkpoints.

Usage: cli_pipeline.py OUT_JSON [RECORDS]; writes the settings it saw and its results to OUT_JSON.
"""

import json
import sys
import time

import streamflow as sf

out_path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 600
env = sf.StreamExecutionEnvironment()
env.enable_checkpointing(20)
env.set_batch_size(20)
sink = sf.CollectSink()


def slow(x: int) -> tuple[int, int]:
    time.sleep(0.0005)
    return (x % 3, x)


(
    env.from_collection(list(range(n))).uid("numbers")
    .map(slow).uid("slow")
    .key_by(lambda p: p[0])
    .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("sums")
    .sink_to(sink)
)
result = env.execute("cli pipeline")
ck = env.get_checkpoint_config()
with open(out_path, "w") as f:
    json.dump(
        {
            "parallelism": env.get_parallelism(),
            "checkpoint_dir": None if ck.storage_dir is None else str(ck.storage_dir),
            "savepoint_path": env.runtime.savepoint_path,
            "status": result.status.value,
            "finals": sorted(r for r in sink.results if r[1] >= 0)[-3:],
            "count": len(sink.results),
        },
        f,
    )
