"""A keyed running sum (shape ``stateful``) or a stateless map (shape ``stateless``) with a random
token per call, fanned out to two exactly-once FileSinks, on the Spark engine (the fan-out
driver-kill test, tests/test_spark_fanout.py).

Usage: spark_fanout_kill_job.py OUT_DIR CHECKPOINT_DIR N SHAPE, or :func:`run` (the test resumes
the killed job in its own process). The fan-out makes the stage's output go through an exchange
(streamflow/spark/exchange.py, "Fan-out"): a query of its own writes it once and both sink
queries read it. STREAMFLOW_SPARK_KILL_AFTER_EXCHANGE_BATCH=K makes the driver SIGKILL
itself right after the exchange wrote its chunk K, before Spark committed it;
STREAMFLOW_SPARK_KILL_AFTER_BATCH=K the same after a sink query wrote its micro-batch K.
"""

import os
import sys
import uuid

from streamflow import (
    Encoder,
    FileSink,
    KeyedProcessFunction,
    StreamExecutionEnvironment,
    ValueStateDescriptor,
)
from streamflow.common import Types

PER_BATCH = 200  # records per micro-batch


def events(n):
    perm = [(j * 37) % 100 for j in range(100)]
    return [(f"k{i % 10}", i % 97, (i // 100) * 100 + perm[i % 100]) for i in range(n)]


class TokenSum(KeyedProcessFunction):
    """The key's running sum and a random token: a replayed micro-batch gets other tokens."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.INT()))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield f"{value[0]},{total},{uuid.uuid4().hex}"


def token(e):
    """The stateless shape's map: the record's key and value and a random token."""
    return f"{e[0]},{e[1]},{uuid.uuid4().hex}"


def run(out_dir, checkpoint_dir, n, shape="stateful"):
    env = StreamExecutionEnvironment()
    env.set_engine("spark")
    env.configure({"execution.spark.records-per-batch": PER_BATCH})
    env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    data = env.from_collection(events(n))
    sums = data.key_by(lambda e: e[0]).process(TokenSum()) if shape == "stateful" else data.map(token)
    encoder = Encoder.simple_string_encoder()
    sums.sink_to(FileSink.for_row_format(os.path.join(out_dir, "a"), encoder).build()).uid("a")
    sums.map(lambda line: line.upper()).sink_to(
        FileSink.for_row_format(os.path.join(out_dir, "b"), encoder).build()).uid("b")
    env.execute("spark fan-out kill job")


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
