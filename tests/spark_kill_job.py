"""A keyed running sum on the Spark engine into an exactly-once FileSink (the driver-kill tests):
times a broadcast factor (a broadcast stage), then a second running sum of another key.

Usage: streamflow run --engine spark spark_kill_job.py OUT_DIR CHECKPOINT_DIR N (the script
names no engine and enables checkpoints, as one written for the asyncio engine does: the CLI
chooses Spark, which checkpoints every micro-batch itself; the end writes "job status: ..." to
stderr). The two stateful stages make the first one's
output go through an exchange (streamflow/spark/exchange.py: a query of its own writing Parquet
chunks, one per micro-batch). The environment variable STREAMFLOW_SPARK_KILL_AFTER_BATCH=K makes
the driver SIGKILL itself right after the sink wrote micro-batch K, before Spark commits it;
STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH=K the same after the exchange wrote its chunk K.
"""

import sys

from streamflow import Encoder, FileSink, MapStateDescriptor, StreamExecutionEnvironment, ValueStateDescriptor
from streamflow.common import Types
from streamflow.datastream.functions import KeyedBroadcastProcessFunction

FACTOR = 3

out_dir, checkpoint_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
perm = [(j * 37) % 100 for j in range(100)]
events = [(f"k{i % 10}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class ScaledSum(KeyedBroadcastProcessFunction):
    """The key's running sum times the broadcast factor: keyed state and broadcast state, both
    restored from Spark's state store after the kill (the factor arrives in micro-batch 0 only)."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.INT()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total * ctx.get_broadcast_state(RULES).get("factor")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(*value)


env = StreamExecutionEnvironment()
env.enable_checkpointing(20)  # ignored by Spark (it checkpoints every micro-batch)
env.configure({"execution.spark.records-per-batch": 400})
env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
# a broadcast stage (streamflow/spark/broadcast.py), then (key, scaled running sum) -> per
# (sum % 4): the running sum of the first stage's sums
factor = env.from_collection([("factor", FACTOR)]).broadcast(RULES)
sums = env.from_collection(events).key_by(lambda e: e[0]).connect(factor).process(ScaledSum())
sums = (sums.map(lambda r: (f"m{r[1] % 4}", r[1])).key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1])))
(
    sums.map(lambda r: f"{r[0]},{r[1]}")
    .sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build())
    .uid("sums")
)
result = env.execute("spark kill job")
print(f"job status: {result.status.value}", file=sys.stderr)
