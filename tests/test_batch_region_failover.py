"""Batch mode's blocking exchanges and pipelined-region failover (``runtime/regions.py``,
``runtime/blocking_result.py``), through the public API: Flink's ``RuntimeExecutionMode.BATCH``
with its default ``execution.batch-shuffle-mode`` ``ALL_EXCHANGES_BLOCKING`` and the
``RestartPipelinedRegionFailoverStrategy`` (the rules of Flink's
``DataStreamBatchExecutionITCase.batchFailoverWith*Barrier``, ported in
``test_batch_execution_flink.py``, on larger inputs, other shapes and the failure paths)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest

from streamflow.common.restart_strategy import RestartStrategies
from streamflow.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from streamflow.datastream.functions import CoProcessFunction, MapFunction
from streamflow.runtime.job import RestartsExhaustedError

N = 2000  # several batches (512 records) per subtask: partial output exists when a task fails


def _env(parallelism: int = 1, restarts: int = 10) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(restarts, 0))
    return env


class Tag(MapFunction):
    """``(value, tags)`` -> ``(value, tags + name + attempt)``; counts its records per attempt."""

    seen: Counter[tuple[str, int]] = Counter()

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self, runtime_context: Any) -> None:
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value: tuple[int, str]) -> tuple[int, str]:
        Tag.seen[(self.name, self.attempt)] += 1
        return value[0], f"{value[1]}{self.name}{self.attempt}"


class FailOnce(Tag):
    """A ``Tag`` that fails in attempt 0 of every subtask after ``after`` records."""

    def __init__(self, name: str, after: int) -> None:
        super().__init__(name)
        self.after = after

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.count = 0

    def map(self, value: tuple[int, str]) -> tuple[int, str]:
        self.count += 1
        if self.attempt == 0 and self.count > self.after:
            raise RuntimeError(f"FAILING after {self.after}")
        return super().map(value)


class AlwaysFail(MapFunction):
    def map(self, value: Any) -> Any:
        raise RuntimeError("always FAILING")


@pytest.fixture(autouse=True)
def _reset() -> None:
    Tag.seen = Counter()


def _records(n: int = N) -> list[tuple[int, str]]:
    return [(i, "") for i in range(n)]


def test_a_failure_upstream_of_the_exchange_restarts_only_its_region_and_each_record_arrives_once() -> None:
    """The failing map runs before the key_by, in the source's region: that region runs again
    (attempt 1) and its failed attempt's partial result is dropped; the region after the
    exchange starts only once the result is complete, so it runs once (attempt 0) and sees
    every record once."""
    env = _env()
    out = list(
        env.from_collection(_records())
        .map(FailOnce("a", after=1000))
        .key_by(lambda v: v[0] % 7)
        .map(Tag("c"))
        .execute_and_collect()
    )
    assert sorted(out) == [(i, "a1c0") for i in range(N)]
    assert Tag.seen == {("a", 0): 1000, ("a", 1): N, ("c", 0): N}


@pytest.mark.parametrize("memory", [None, "2 kb"])
def test_a_sink_region_failing_after_emitting_records_collects_each_record_once(
    caplog: pytest.LogCaptureFixture, memory: str | None
) -> None:
    """The failing map is chained to the collect sink and fails after some of its batches
    reached the sink: those were held for the attempt and are dropped with it (Flink's collect
    iterator discards a restarted sink's earlier results), so the consumer sees each record
    once; the region before the exchange keeps attempt 0. With a small
    streamflow.blocking-results.memory the held records spill to disk and come back in order."""
    env = _env()
    if memory is not None:
        env.configure({"streamflow.blocking-results.memory": memory})
    stream = env.from_collection(_records()).map(Tag("a")).rebalance().map(FailOnce("d", after=1500))
    with caplog.at_level(logging.INFO):
        out = list(stream.execute_and_collect())
    assert out == [(i, "a0d1") for i in range(N)]  # at parallelism 1, in order
    assert Tag.seen == {("a", 0): N, ("d", 0): 1500, ("d", 1): N}
    assert any("records of its failed attempt were held" in r.getMessage() for r in caplog.records)
    assert any("spilling to" in r.getMessage() for r in caplog.records) is (memory is not None)


class FailingCoProcess(CoProcessFunction):
    """Tags the inputs ``x``/``y`` with its attempt; fails in attempt 0 after 1500 records."""

    def open(self, runtime_context: Any) -> None:
        self.attempt = runtime_context.get_attempt_number()
        self.count = 0

    def _tag(self, value: tuple[int, str], name: str) -> Any:
        self.count += 1
        if self.attempt == 0 and self.count > 1500:
            raise RuntimeError("co-process FAILING")
        yield value[0], f"{value[1]}{name}{self.attempt}"

    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield from self._tag(value, "x")

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield from self._tag(value, "y")


def test_a_two_input_region_fails_over_alone_and_reads_both_inputs_again() -> None:
    """connect(): the two-input operator's region fails after reading part of both inputs;
    it restarts alone and reads both complete upstream results again."""
    env = _env(parallelism=2)
    left = env.from_collection(_records()).map(Tag("l"))
    right = env.from_collection([(i + N, "") for i in range(N)]).map(Tag("r"))
    co = left.key_by(lambda v: v[0]).connect(right.key_by(lambda v: v[0])).process(FailingCoProcess())
    out = sorted(co.execute_and_collect())
    assert out == [(i, "l0x1") for i in range(N)] + [(i + N, "r0y1") for i in range(N)]
    assert Tag.seen == {("l", 0): N, ("r", 0): N}


def test_a_region_after_a_union_fails_over_alone() -> None:
    """union() feeding a keyed exchange: the failing region after it restarts and reads the
    results of both branches again; neither branch runs again."""
    env = _env(parallelism=2)
    left = env.from_collection(_records()).map(Tag("l"))
    right = env.from_collection([(i + N, "") for i in range(N)]).map(Tag("r"))
    out = sorted(
        left.union(right).key_by(lambda v: v[0] % 5).map(FailOnce("u", after=700)).execute_and_collect()
    )
    assert out == [(i, "l0u1") for i in range(N)] + [(i + N, "r0u1") for i in range(N)]
    assert Tag.seen == {("l", 0): N, ("r", 0): N, ("u", 0): 2 * 700, ("u", 1): 2 * N}


def _pipeline(parallelism: int) -> list[Any]:
    env = _env(parallelism)
    sums = (
        env.from_collection(_records())
        .map(FailOnce("a", after=300))
        .key_by(lambda v: v[0] % 13)
        .reduce(lambda x, y: (x[0] + y[0], x[1]))
        .rebalance()
        .map(FailOnce("b", after=0))  # every subtask given a record fails once
    )
    return sorted(sums.execute_and_collect())


def test_parallelism_one_and_four_give_the_same_output() -> None:
    """The same job at parallelism 1 and 4, failing once in every subtask of two regions."""
    one = _pipeline(1)
    assert one == sorted((sum(i for i in range(N) if i % 13 == k), "a1b1") for k in range(13))
    assert _pipeline(4) == one


def test_the_restart_strategy_limit_ends_the_job_with_the_cause(caplog: pytest.LogCaptureFixture) -> None:
    """Every attempt of the region fails: after the strategy's two restarts the job fails with
    RestartsExhaustedError caused by the last failure; each restart was logged with its cause."""
    env = _env(restarts=2)
    env.from_collection(_records(10)).key_by(lambda v: v[0]).map(AlwaysFail()).add_sink(lambda v: None)
    with caplog.at_level(logging.WARNING, logger="streamflow"), pytest.raises(RestartsExhaustedError) as info:
        env.execute("exhausted")
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value.__cause__) == "always FAILING"
    restarts = [
        r.getMessage() for r in caplog.records if "only its pipelined region restarts" in r.getMessage()
    ]
    assert len(restarts) == 2
    assert all("RuntimeError: always FAILING" in m for m in restarts)
    assert ["attempt 0;" in restarts[0], "attempt 1;" in restarts[1]] == [True, True]


def test_without_restarts_the_failure_itself_ends_the_job() -> None:
    env = _env()
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.from_collection(_records(10)).key_by(lambda v: v[0]).map(AlwaysFail()).add_sink(lambda v: None)
    with pytest.raises(RuntimeError, match="always FAILING"):
        env.execute("no restart")


def test_each_region_restart_is_logged_with_its_cause_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    """Two subtasks of the region after the exchange fail once each: two restarts, each logged
    at WARNING naming the subtask, the cause and the attempt, and counted in numRestarts."""
    env = _env(parallelism=2)
    stream = env.from_collection(_records()).rebalance().map(FailOnce("m", after=10))
    with caplog.at_level(logging.INFO, logger="streamflow"):
        out = list(stream.execute_and_collect())
    assert len(out) == N
    warnings = [r for r in caplog.records if "only its pipelined region restarts" in r.getMessage()]
    assert len(warnings) == 2 and all(r.levelno == logging.WARNING for r in warnings)
    assert {("(1/2)" in r.getMessage(), "(2/2)" in r.getMessage()) for r in warnings} == {
        (True, False),
        (False, True),
    }
    assert all("RuntimeError: FAILING after 10" in r.getMessage() for r in warnings)
    restarted = [r for r in caplog.records if "restarting its pipelined region (attempt 1)" in r.getMessage()]
    assert len(restarted) == 2


def test_results_spilled_to_disk_are_read_again_after_a_failover(caplog: pytest.LogCaptureFixture) -> None:
    """With a tiny streamflow.blocking-results.memory the results spill to temporary files (the
    records codec, tuples kept tuples); the restarted region reads them from the start."""
    env = _env()
    env.configure({"streamflow.blocking-results.memory": "4 kb"})
    with caplog.at_level(logging.INFO, logger="streamflow"):
        out = list(
            env.from_collection(_records())
            .map(Tag("a"))
            .key_by(lambda v: v[0] % 3)
            .map(FailOnce("b", after=1200))
            .execute_and_collect()
        )
    assert any("spilling to" in r.getMessage() for r in caplog.records)
    assert sorted(out) == [(i, "a0b1") for i in range(N)]
    assert all(type(v) is tuple for v in out)


class Opaque:
    def __init__(self, v: int) -> None:
        self.v = v


def test_a_record_the_spill_codec_refuses_fails_naming_the_memory_setting() -> None:
    """(A restart strategy with no attempt left: without one the exchanges run pipelined.)"""
    env = _env(restarts=0)
    env.configure({"streamflow.blocking-results.memory": "1 kb"})
    env.from_collection(list(range(500))).map(Opaque).rebalance().map(lambda o: o.v).add_sink(lambda v: None)
    with pytest.raises(RestartsExhaustedError) as info:
        env.execute("opaque")
    cause = info.value.__cause__
    assert isinstance(cause, TypeError) and "streamflow.blocking-results.memory" in str(cause)
    assert "test_batch_region_failover.Opaque" in str(cause)
    assert any("while spilling the blocking result 'Map[0] -> Map[0]'" in n for n in cause.__notes__)


def test_without_a_restart_strategy_a_batch_job_runs_pipelined() -> None:
    """No restart strategy (the default): a failure ends the job, so there is no region to fail
    over and the exchanges run pipelined, unmaterialised (the same records, the old cost): the
    codec is never asked to spill, and the p=1 key_by chains (one task)."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.configure({"streamflow.blocking-results.memory": "1 kb"})
    out: list[int] = []
    env.from_collection(list(range(500))).map(Opaque).rebalance().map(lambda o: o.v).add_sink(out.append)
    env.execute("pipelined")
    assert sorted(out) == list(range(500))


def test_a_stream_declared_pickled_spills_its_refused_records_pickled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The pickle opt-in is per stream, as for the sorted runs: the exchange after a map
    declared ``Types.PICKLED_BYTE_ARRAY()`` pickles the records the codec refuses (logged once),
    and a restart reads them back."""
    from streamflow.common import Types

    env = _env()
    env.configure({"streamflow.blocking-results.memory": "1 kb"})
    out = (
        env.from_collection(list(range(500)))
        .map(Opaque, output_type=Types.PICKLED_BYTE_ARRAY())
        .rebalance()
        .map(lambda o: (o.v, ""))
        .map(FailOnce("p", after=100))
    )
    with caplog.at_level(logging.WARNING):
        assert sorted(out.execute_and_collect()) == [(i, "p1") for i in range(500)]
    assert any("Types.PICKLED_BYTE_ARRAY()" in r.getMessage() for r in caplog.records)


def test_the_pickle_opt_in_of_one_stream_does_not_cover_another_exchange() -> None:
    """One stream declared pickled opts in only its own exchange: Opaque records on another,
    undeclared exchange still fail naming the setting (the same rule as the sorted runs)."""
    from streamflow.common import Types

    env = _env(restarts=0)
    env.configure({"streamflow.blocking-results.memory": "1 kb"})
    declared = env.from_collection(list(range(300))).map(Opaque, output_type=Types.PICKLED_BYTE_ARRAY())
    declared.rebalance().map(lambda o: o.v).add_sink(lambda v: None)
    env.from_collection(list(range(300))).map(Opaque).rebalance().map(lambda o: o.v).add_sink(lambda v: None)
    with pytest.raises(RestartsExhaustedError) as info:
        env.execute("one opted in")
    assert "streamflow.blocking-results.memory" in str(info.value.__cause__)


def test_pipelined_shuffle_mode_restarts_the_whole_job() -> None:
    """execution.batch-shuffle-mode ALL_EXCHANGES_PIPELINED: every task runs at once, and a
    failure restarts the whole job (the former behaviour; attempt 1 before the exchange too)."""
    env = _env()
    env.configure({"execution.batch-shuffle-mode": "ALL_EXCHANGES_PIPELINED"})
    out = list(
        env.from_collection(_records(10))
        .map(Tag("a"))
        .key_by(lambda v: v[0])
        .map(FailOnce("b", 0))
        .execute_and_collect()
    )
    assert sorted(out) == [(i, "a1b1") for i in range(10)]


class MarkClosed(MapFunction):
    """Passes records on; attempt 0 marks its subtask's normal end (``closed``)."""

    closed: set[str] = set()

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self, runtime_context: Any) -> None:
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value: Any) -> Any:
        return value

    def close(self) -> None:
        if self.attempt == 0:
            MarkClosed.closed.add(self.name)


class FailWhenClosed(MapFunction):
    """Attempt 0 fails once ``MarkClosed`` has seen ``name`` end (waiting up to 10 s)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self, runtime_context: Any) -> None:
        self.attempt = runtime_context.get_attempt_number()

    async def map(self, value: Any) -> Any:
        import asyncio

        if self.attempt == 0:
            for _ in range(2000):
                if self.name in MarkClosed.closed:
                    raise RuntimeError("FAILING after the collect subtask finished")
                await asyncio.sleep(0.005)
            raise AssertionError("the collect subtask did not finish within 10 s")
        return value


@pytest.mark.parametrize("mode", ["ALL_EXCHANGES_BLOCKING", "ALL_EXCHANGES_PIPELINED"])
def test_a_finished_collect_subtask_hands_its_records_out_once_whatever_restarts_after(mode: str) -> None:
    """The collect subtask finishes, then another branch of the job fails. With blocking
    exchanges only that branch's region restarts; with pipelined ones the whole job does, and
    the collect subtask runs again. Either way the consumer sees each record once: the held
    records go out at the job's end (Flink's collect iterator shows a batch job's results when
    it ends), a failed execution's never. (Handed out at the subtask's end, the pipelined case
    hung: the consumer's view had closed with the first execution's end of the subtask, and the
    second execution's collect subtask waited forever for room in the channel.)"""
    MarkClosed.closed = set()
    env = _env()
    env.configure({"execution.batch-shuffle-mode": mode})
    env.from_collection(list(range(50))).rebalance().map(FailWhenClosed("collect")).add_sink(lambda v: None)
    collected = env.from_collection(list(range(N))).rebalance().map(MarkClosed("collect"))
    assert sorted(collected.execute_and_collect()) == list(range(N))  # more than its channel holds


def test_an_unsupported_batch_shuffle_mode_is_refused() -> None:
    env = _env()
    with pytest.raises(ValueError, match=r"ALL_EXCHANGES_HYBRID_FULL.*ALL_EXCHANGES_BLOCKING"):
        env.configure({"execution.batch-shuffle-mode": "ALL_EXCHANGES_HYBRID_FULL"})


def test_a_file_sink_region_failing_after_writing_part_files_publishes_each_record_once(
    tmp_path: Any,
) -> None:
    """The FileSink is chained after the failing map; attempt 0 rolled several part files
    (1 KiB) before it failed. Those were never published (the batch sink publishes at the
    job's end what the last attempt of each subtask deferred), so the finished files hold every
    record once and no hidden in-progress or pending file is left."""
    from streamflow.common.serialization import Encoder
    from streamflow.datastream.connectors.file_system import FileSink, RollingPolicy

    out = tmp_path / "out"
    env = _env(parallelism=2)
    sink = (
        FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=1024))
        .build()
    )
    env.from_collection(_records()).rebalance().map(FailOnce("s", after=600)).map(lambda v: v[0]).sink_to(
        sink
    )
    env.execute("file sink")
    finished = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")]
    counts = Counter(int(line) for f in finished for line in f.read_text().splitlines())
    assert counts == Counter(range(N))
    assert [p.name for p in out.rglob(".*")] == []


async def test_a_region_waiting_for_its_inputs_is_created_and_the_job_cancels_cleanly() -> None:
    """While the source region runs, the region after the exchange is not scheduled (CREATED
    in the metrics, as Flink's execution state); a batch job takes no checkpoint (the request
    fails naming why); cancel() stops it at once. (It took 12-16 s: the source task, fed by its
    reader's pump and writing a blocking result that never blocks, always had its waiter resolved
    before anyio looked, so anyio never delivered the cancellation until the result spilled;
    Task._idle checks for it now.)"""
    import asyncio

    from streamflow.checkpoint.driver import CheckpointTriggerError

    async def endless():  # type: ignore[no-untyped-def]
        i = 0
        while True:
            yield i
            i += 1
            if i % 100 == 0:
                await asyncio.sleep(0)

    env = _env(parallelism=2)
    env.from_async_iterable(endless).rebalance().map(lambda v: v).add_sink(lambda v: None)
    client = await env.execute_async("waiting")
    for _ in range(200):
        await asyncio.sleep(0.005)
        vertices = client.get_metrics_snapshot()["vertices"]
        if vertices[0]["subtasks"][0]["numRecordsOut"]:
            break
    assert [v["status"] for v in vertices] == ["RUNNING", "CREATED"]
    assert {s["status"] for s in vertices[1]["subtasks"]} == {"CREATED"}
    with pytest.raises(CheckpointTriggerError, match="a batch job takes no checkpoints"):
        await client.trigger_checkpoint()
    await asyncio.wait_for(client.cancel(), 5)
    assert client.get_job_status().value == "CANCELED"


def test_a_region_whose_next_attempt_cannot_be_built_counts_that_as_a_failure(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building attempt 1 fails (here: patched to raise once): that is attempt 1's failure, the
    strategy restarts the region again, and attempt 2 runs (Flink: a failed deployment is a
    failure of the attempt)."""
    from streamflow.runtime.execution import Execution

    build, failed = Execution.build_task, []

    def build_task(self: Execution, *args: Any, attempt: int | None = None) -> Any:
        if attempt == 1 and not failed:
            failed.append(attempt)
            raise RuntimeError("cannot build attempt 1")
        return build(self, *args, attempt=attempt)

    monkeypatch.setattr(Execution, "build_task", build_task)
    env = _env()
    stream = env.from_collection(_records(20)).rebalance().map(FailOnce("m", after=5))
    with caplog.at_level(logging.WARNING, logger="streamflow"):
        out = sorted(stream.execute_and_collect())
    assert out == [(i, "m2") for i in range(20)]
    restarts = [
        r.getMessage() for r in caplog.records if "only its pipelined region restarts" in r.getMessage()
    ]
    assert len(restarts) == 2 and "cannot build attempt 1" in restarts[1] and "attempt 1;" in restarts[1]


async def test_a_batch_job_restored_from_a_savepoint_runs_pipelined_and_says_so(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A restore is per task of the whole job, so a batch job restored from a savepoint runs
    with pipelined exchanges (logged with the savepoint), and its output is complete."""
    import asyncio

    import streamflow as sf

    release = asyncio.Event()

    async def numbers():  # type: ignore[no-untyped-def]
        for i in range(10):
            yield i
        await release.wait()

    env = sf.StreamExecutionEnvironment()
    seen: list[int] = []
    env.from_async_iterable(numbers).uid("src").key_by(lambda v: v % 2).map(lambda v: v).uid("m").add_sink(
        seen.append
    )
    client = await env.execute_async("restore-batch")
    for _ in range(2000):
        if len(seen) == 10:
            break
        await asyncio.sleep(0.005)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await asyncio.wait_for(client.cancel(), 30)

    batch = sf.StreamExecutionEnvironment().set_runtime_mode(RuntimeExecutionMode.BATCH)
    batch.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 0))
    batch.configure({"execution.savepoint.path": path})
    out: list[int] = []
    batch.from_collection(list(range(15))).uid("src").key_by(lambda v: v % 2).map(lambda v: v).uid(
        "m"
    ).add_sink(out.append)
    with caplog.at_level(logging.INFO, logger="streamflow"):
        await (await batch.execute_async("restore-batch")).get_job_execution_result()
    assert sorted(out) == list(range(10, 15))  # the collection source resumes at its position
    assert any("runs with pipelined exchanges" in r.getMessage() for r in caplog.records)


def test_regions_failing_together_are_one_attempt_of_the_exponential_delay() -> None:
    """Flink's ExponentialDelayRestartBackoffTimeStrategy#notifyFailure (FLIP-364) merges the
    failures reported at or before the restart it scheduled into that attempt: the two subtasks
    of the region after the exchange fail at about the same time, within the first backoff
    (1 s), so with one attempt allowed (``attempts-before-reset-backoff`` 1) both regions
    restart and the job completes; counted as two attempts the second would exhaust it."""
    from streamflow.checkpoint.restart_strategy import ExponentialDelayRestart

    env = _env(parallelism=2)
    env.set_restart_strategy(ExponentialDelayRestart(1_000, 10_000, 2.0, 3_600_000, 0.0, attempts=1))
    stream = env.from_collection(_records()).rebalance().map(FailOnce("m", after=10))
    assert sorted(v for v, _ in stream.execute_and_collect()) == list(range(N))
    assert Tag.seen[("m", 1)] == N
