"""A keyed running sum on the Spark engine into an exactly-once FileSink (the driver-kill test).

Usage: spark_kill_job.py OUT_DIR CHECKPOINT_DIR N. The environment variable
STREAMFLOW_SPARK_KILL_AFTER_BATCH=K makes the driver SIGKILL itself right after the sink
wrote micro-batch K, before Spark commits it.
"""

import sys

from streamflow import Encoder, FileSink, StreamExecutionEnvironment

out_dir, checkpoint_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
perm = [(j * 37) % 100 for j in range(100)]
events = [(f"k{i % 10}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]

env = StreamExecutionEnvironment()
env.set_engine("spark")
env.configure({"execution.spark.records-per-batch": 400})
env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
(
    env.from_collection(events)
    .key_by(lambda e: e[0])
    .reduce(lambda a, b: (a[0], a[1] + b[1], b[2]))
    .map(lambda r: f"{r[0]},{r[1]}")
    .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
    .uid("sums")
)
env.execute("spark kill job")
