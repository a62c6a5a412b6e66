"""The Python daemon of the local sessions this engine starts: pyspark's daemon, with streamflow's
worker-side modules imported once, before it forks its workers.

Theory of operation
-------------------
Spark starts one Python daemon per executor (``python -m <spark.python.daemon.module>``); the
daemon forks a worker for each Python runner a task needs (a data source read, an Arrow batch
function, a stateful pandas function, ...) and workers are reused while they are busy enough.
Every forked worker then unpickles the job's functions, which import streamflow (its API, runtime,
state and Spark modules: 0.5-1.5 s of imports per worker on a 2-core machine, for each of the
workers of a query's first micro-batch). Imported here, in the daemon, they are in every worker
for free (fork copies the modules).

pyspark's daemon deliberately imports its worker module only after the fork, because pandas and
pyarrow start threads when imported and a fork copies none of them (a lock another thread held
stays locked in the child). The modules below import neither and start no thread
(tests/test_spark_daemon.py checks both), so the daemon forks a single-threaded process as before.
Set by :mod:`.session` for the local sessions it starts (``spark.python.daemon.module``); on a
cluster the executors' daemon stays pyspark's.
"""

from __future__ import annotations

import pyspark.daemon

# the API, runtime and state modules the pickled functions use; the Kafka reader; the Spark
# engine's harness, keyed, windows, broadcast, ... modules (through .plan)
import streamflow
import streamflow.connectors.kafka_source
import streamflow.spark.kafka
import streamflow.spark.plan
import streamflow.spark.sinks  # noqa: F401

if __name__ == "__main__":
    pyspark.daemon.manager()
