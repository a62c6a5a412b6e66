"""More Python blocks of Flink's DataStream docs, run on streamflow: the Python tabs of
``operators/windows.md``, ``fault-tolerance/checkpointing.md``, the state backend pages
(``ops/state/state_backends.md`` and ``dev/datastream/fault-tolerance/state_backends.md``),
``execution/parallel.md`` and ``ops/state/task_failure_recovery.md``.

The files are in ``doc_snippets/`` (prefixes ``dswindows_``, ``checkpointing_``,
``state_backends_``, ``parallel_``, ``restart_``), each naming its page, version and section, with
Flink's license header. The helpers (``run``, ``setup``, ``collect``, fixes that must
match) are the ones of ``test_pyflink_doc_snippets.py``; this module adds:

* **placeholders.** The windows page writes its blocks as templates: ``input = ...``,
  ``<key selector>``, ``<window assigner>``, ``<time>`` and
  ``.<windowed transformation>(<window function>)``. They become the harness's names
  (:data:`PLACEHOLDERS`): ``input`` is a stream of ``(key, value)`` tuples whose
  timestamps are ``value`` seconds, the key selector takes the key, the window assigner
  is a 5 s tumbling event-time window, the windowed transformation is a ``reduce`` that
  sums the values. Nothing else of the block changes.
* **every expression statement is kept**, as a REPL shows it: a block of three
  ``input.key_by(...).window(...)...`` statements gives three streams, each collected
  and compared with Flink's semantics for that window.
* **definitions first**: the page uses ``MyProcessWindowFunction()`` above its
  ``class MyProcessWindowFunction`` (a ``NameError`` in PyFlink too); the harness
  runs a block's class definitions before its other statements.

The fixes each block needs beyond that are in :data:`DS_FIXES` with their reasons, and
docs/pyflink.md lists them. Not copied: the pages' API signatures (``class
ProcessWindowFunction(...)``, ``class WindowFunction(...)``, as for the Python windows
page) and the three Python tabs that read "Still not supported in Python API."
(``parallel.md`` client level, ``state_backends.md`` options factory,
``task_failure_recovery.md`` exponential delay).
"""

from __future__ import annotations

import ast
import logging
import re
from collections import namedtuple
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from test_pyflink_doc_snippets import SNIPPETS, collect, setup, source

from streamflow.checkpoint.restart_strategy import FailureRateRestart, FixedDelayRestart, NoRestart
from streamflow.checkpoint.storages import ExternalizedCheckpointRetention, FileSystemCheckpointStorage
from streamflow.common import Configuration, Time, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import (
    AggregateFunction,
    CheckpointingMode,
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    ProcessWindowFunction,
    StreamExecutionEnvironment,
    WindowFunction,
)
from streamflow.datastream.window import (
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from streamflow.eventtime import Watermark, WatermarkGenerator, WatermarkOutput

PREFIXES = ("dswindows_", "checkpointing_", "state_backends_", "parallel_", "restart_")

#: The windows page's template placeholders and what the harness puts in their place.
PLACEHOLDERS: list[tuple[str, str]] = [
    ("input = ...  # type: DataStream\n", ""),
    ("<key selector>", "key_selector"),
    ("<window assigner>", "window_assigner"),
    (".<windowed transformation>(<window function>)", ".reduce(window_function)"),
    ("<time>", "lateness"),
]
#: Fixes beyond the placeholders (each would be needed in PyFlink too).
DS_FIXES: dict[str, list[tuple[str, str, str]]] = {
    "dswindows_session": [
        (
            "        # 决定并返回会话间隔\n",
            "        # 决定并返回会话间隔\n        return 3000\n",
            "the extractor's body is only a comment (`determine and return the gap`): it returns 3 s",
        )
    ],
    "dswindows_reduce_process": [
        (
            "output_type=Types.TUPLE([Types.STRING(), Types.LONG()])",
            "output_type=Types.TUPLE([Types.LONG(), Types.PICKLED_BYTE_ARRAY()])",
            "the declared type does not fit the records `(window start, SensorReading)`: "
            "PyFlink's STRING serializer would refuse the int start",
        )
    ],
    "dswindows_aggregate_process": [
        ("input\n    .key_by(", "input \\\n    .key_by(", "missing `\\` after `input`")
    ],
    "state_backends_changelog": [("(true)", "(True)", "`true` is Java; Python's is `True`")],
    "parallel_operator_level": [
        ("text = [...]\n", "", "`[...]` placeholder: the setup gives `text`, a stream of lines"),
        ("word_counts = text \n", "word_counts = text \\\n", "missing `\\` after `text`"),
    ],
    "parallel_environment_level": [
        ("text = [...]\n", "", "`[...]` placeholder: the setup gives `text`, a stream of lines"),
        ("word_counts = text\n", "word_counts = text \\\n", "missing `\\` after `text`"),
    ],
}


def run_all(
    name: str,
    ns: dict[str, Any],
    fixes: list[tuple[str, str, str]] | None = None,
    values: list[Any] | None = None,
) -> list[Any]:
    """Run a block in ``ns`` with its placeholders filled, class definitions first; the
    values of its top-level expression statements, in order (also in ``values`` as they come)."""
    text = source(name, DS_FIXES.get(name, []) + (fixes or []))
    if name.startswith("dswindows_"):
        for old, new in PLACEHOLDERS:
            text = text.replace(old, new)
    tree = ast.parse(text, filename=f"{name}.py")
    body = [n for n in tree.body if isinstance(n, ast.ClassDef)] + [
        n for n in tree.body if not isinstance(n, ast.ClassDef)
    ]
    values = [] if values is None else values
    for node in body:
        if isinstance(node, ast.Expr):
            values.append(eval(compile(ast.Expression(node.value), f"{name}.py", "eval"), ns))
        else:
            exec(compile(ast.Module([node], type_ignores=[]), f"{name}.py", "exec"), ns)
    return values


class EveryRecord(WatermarkGenerator):
    """A watermark after every record (ts - 1), so lateness is deterministic in the test."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(event_timestamp - 1))


class ValueSeconds(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1]) * 1000


class CountWindowFunction(WindowFunction):
    """The harness's ``MyWindowFunction``: (key, window start, number of elements)."""

    def apply(self, key: str, window: TimeWindow, inputs: Iterable[Any]) -> Iterable[Any]:
        yield key, window.start, len(list(inputs))


DATA = [("a", 1), ("b", 2), ("a", 3), ("a", 7), ("b", 12)]
SensorReading = namedtuple("SensorReading", ["key", "value"])


def window_setup(data: list[Any] = DATA, per_record_watermarks: bool = False, **names: Any) -> dict[str, Any]:
    ns = setup(
        TumblingEventTimeWindows=TumblingEventTimeWindows,
        TumblingProcessingTimeWindows=TumblingProcessingTimeWindows,
        SlidingEventTimeWindows=SlidingEventTimeWindows,
        SlidingProcessingTimeWindows=SlidingProcessingTimeWindows,
        EventTimeSessionWindows=EventTimeSessionWindows,
        ProcessingTimeSessionWindows=ProcessingTimeSessionWindows,
        DynamicProcessingTimeSessionWindows=DynamicProcessingTimeSessionWindows,
        GlobalWindows=GlobalWindows,
        SessionWindowTimeGapExtractor=SessionWindowTimeGapExtractor,
        AggregateFunction=AggregateFunction,
        Tuple=tuple,
        Iterable=Iterable,
        SensorReading=SensorReading,
    )
    env = ns["env"]
    strategy = (
        WatermarkStrategy.for_generator(EveryRecord)
        if per_record_watermarks
        else WatermarkStrategy.for_monotonous_timestamps()
    )
    ns["input"] = env.from_collection(data).assign_timestamps_and_watermarks(
        strategy.with_timestamp_assigner(ValueSeconds())
    )
    ns["key_selector"] = lambda v: v[0]
    ns["window_assigner"] = TumblingEventTimeWindows.of(Time.seconds(5))
    ns["window_function"] = lambda a, b: (a[0], a[1] + b[1])
    ns.update(names)
    return ns


def sorted_collect(stream: Any) -> list[Any]:
    return sorted(collect(stream), key=repr)


TUMBLING_5S = [("a", 4), ("a", 7), ("b", 12), ("b", 2)]


# ---------------------------------------------------------------- datastream/operators/windows.md


def test_tumbling_windows() -> None:
    ns = window_setup()
    event_time, processing_time, daily = run_all("dswindows_tumbling", ns)
    assert sorted_collect(event_time) == TUMBLING_5S
    # one day from -8 h: every record (1 s ... 12 s after the epoch) is in [-8 h, 16 h)
    assert sorted_collect(daily) == [("a", 11), ("b", 14)]
    # a bounded streaming job ends before a processing-time window's timer: in Flink pending
    # processing-time timers are not fired at the end of input (streaming mode), here neither
    assert collect(processing_time) == []


def test_sliding_windows() -> None:
    """The third statement is refused, as by Flink and PyFlink: a -8 h offset is not
    smaller than the 1 h slide (``abs(offset) < slide`` is required)."""
    ns = window_setup()
    values: list[Any] = []
    with pytest.raises(ValueError, match=r"abs\(offset\) < slide"):
        run_all("dswindows_sliding", ns, values=values)
    event_time, processing_time = values
    # 10 s windows every 5 s: [-5, 5) [0, 10) [5, 15) [10, 20)
    assert sorted_collect(event_time) == sorted(
        [("a", 4), ("b", 2), ("a", 11), ("b", 2), ("a", 7), ("b", 12), ("b", 12)], key=repr
    )
    assert collect(processing_time) == []


def test_session_windows() -> None:
    ns = window_setup()
    static, dynamic, processing_static, processing_dynamic = run_all("dswindows_session", ns)
    assert sorted_collect(static) == [("a", 11), ("b", 14)]  # a 10 min gap joins everything
    # a 3 s gap: a at 1 s and 3 s join ([1 s, 6 s)), 7 s is alone; b at 2 s and 12 s are apart
    assert sorted_collect(dynamic) == [("a", 4), ("a", 7), ("b", 12), ("b", 2)]
    assert collect(processing_static) == collect(processing_dynamic) == []  # (processing time: see above)


def test_global_windows() -> None:
    (result,) = run_all("dswindows_global", window_setup())
    assert collect(result) == []  # GlobalWindows' default trigger never fires, as in Flink


def test_window_reduce_and_aggregate() -> None:
    (reduced,) = run_all("dswindows_reduce", window_setup())
    assert sorted_collect(reduced) == TUMBLING_5S
    (averages,) = run_all("dswindows_aggregate", window_setup())
    assert sorted(collect(averages)) == [2.0, 2.0, 7.0, 12.0]


def test_process_window_function() -> None:
    (result,) = run_all("dswindows_process", window_setup())
    assert sorted(collect(result)) == [
        "Window: TimeWindow(start=0, end=300000) count: 2",
        "Window: TimeWindow(start=0, end=300000) count: 3",
    ]


def test_incremental_reduce_with_process_window_function() -> None:
    """The smallest reading per key and window, with the window's start."""
    data = [SensorReading("a", 1), SensorReading("b", 2), SensorReading("a", 3), SensorReading("a", 7)]
    (result,) = run_all("dswindows_reduce_process", window_setup(data))
    assert sorted_collect(result) == [
        (0, SensorReading("a", 1)),
        (0, SensorReading("b", 2)),
        (5000, SensorReading("a", 7)),
    ]


def test_incremental_aggregation_with_process_window_function() -> None:
    (result,) = run_all("dswindows_aggregate_process", window_setup())
    assert sorted_collect(result) == [("a", 2.0), ("a", 7.0), ("b", 12.0), ("b", 2.0)]


def test_apply_window_function() -> None:
    (result,) = run_all("dswindows_apply", window_setup(MyWindowFunction=CountWindowFunction))
    assert sorted_collect(result) == [("a", 0, 2), ("a", 5000, 1), ("b", 0, 1), ("b", 10000, 1)]


LATE = [("a", 1), ("a", 7), ("a", 3), ("a", 12), ("a", 2)]


def test_allowed_lateness() -> None:
    """Watermark after each record; 5 s allowed lateness keeps [0, 5) until the watermark
    passes 9999: 3 (after watermark 6999) fires it again, 2 (after 11999) is dropped."""
    ns = window_setup(LATE, per_record_watermarks=True, lateness=Time.seconds(5))
    (result,) = run_all("dswindows_allowed_lateness", ns)
    assert collect(result) == [("a", 1), ("a", 4), ("a", 7), ("a", 12)]


def test_late_data_side_output() -> None:
    ns = window_setup(
        LATE,
        per_record_watermarks=True,
        lateness=Time.seconds(5),
        type_info=Types.TUPLE([Types.STRING(), Types.LONG()]),
    )
    run_all("dswindows_late_side_output", ns)
    assert collect(ns["result"]) == [("a", 1), ("a", 4), ("a", 7), ("a", 12)]
    assert collect(ns["late_stream"]) == [("a", 2)]


def test_consecutive_windowed_operations() -> None:
    """Per key and 5 s window a sum (``Summer``); then all keys' sums in a processing-time
    window (``TopKWindowFunction``: the largest). The Python tab uses a processing-time
    window where the Java tab has an event-time one; in a bounded streaming job it never
    fires (see ``test_tumbling_windows``), so the harness also runs the page's second
    operator with the Java tab's event-time window."""

    class TopKWindowFunction(ProcessWindowFunction):
        def process(self, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
            yield max(elements, key=lambda e: e[1])

    ns = window_setup(Summer=lambda: lambda a, b: (a[0], a[1] + b[1]), TopKWindowFunction=TopKWindowFunction)
    run_all("dswindows_consecutive", ns)
    assert sorted_collect(ns["results_per_key"]) == TUMBLING_5S
    assert collect(ns["global_results"]) == []
    java_tab = (
        ns["results_per_key"]
        .window_all(TumblingEventTimeWindows.of(Time.seconds(5)))
        .process(TopKWindowFunction())
    )
    assert collect(java_tab) == [("a", 4), ("a", 7), ("b", 12)]  # per 5 s window: [0, 5) [5, 10) [10, 15)


# ---------------------------------------------------------------- fault-tolerance/checkpointing.md


def test_checkpointing_enable(caplog: pytest.LogCaptureFixture) -> None:
    ns = setup(
        StreamExecutionEnvironment=StreamExecutionEnvironment,
        CheckpointingMode=CheckpointingMode,
        ExternalizedCheckpointRetention=ExternalizedCheckpointRetention,
    )
    run_all("checkpointing_enable", ns)
    cfg = ns["env"].get_checkpoint_config()
    assert (cfg.get_checkpoint_interval(), cfg.mode, cfg.min_pause_ms, cfg.timeout_ms) == (
        1000,
        CheckpointingMode.EXACTLY_ONCE,
        500,
        60000,
    )
    assert (cfg.get_tolerable_checkpoint_failure_number(), cfg.max_concurrent) == (2, 1)
    assert (
        cfg.get_externalized_checkpoint_retention() is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    )
    assert cfg.is_unaligned_checkpoints_enabled()
    with caplog.at_level(logging.WARNING):
        cfg.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION)
    assert "not applied" in caplog.text


# ---------------------------------------------------------------- ops/state/task_failure_recovery.md


@pytest.mark.parametrize(
    "name, strategy",
    [
        ("restart_fixed_delay", FixedDelayRestart(3, 10_000)),
        ("restart_failure_rate", FailureRateRestart(3, 300_000, 10_000)),
        ("restart_none", NoRestart()),
    ],
)
def test_restart_strategies(name: str, strategy: Any) -> None:
    """The page's Python tabs configure the strategy a job of ``env`` then runs with, with or
    without checkpointing (``checkpoint/restart_config.py``)."""
    ns = setup(Configuration=Configuration, StreamExecutionEnvironment=StreamExecutionEnvironment)
    run_all(name, ns)
    env = ns["env"]
    assert env.get_restart_strategy() == strategy
    assert env.runtime.resolved_restart_strategy() == strategy
    env.enable_checkpointing(1000)
    assert env.runtime.resolved_restart_strategy() == strategy


# ---------------------------------------------------------------- state backends


@pytest.mark.parametrize("name", ["state_backends_per_job", "state_backends_dev_per_job"])
def test_state_backend_per_job(name: str) -> None:
    ns = setup(Configuration=Configuration, StreamExecutionEnvironment=StreamExecutionEnvironment)
    run_all(name, ns)
    assert isinstance(ns["env"].get_state_backend(), HashMapStateBackend)


def test_state_backend_changelog() -> None:
    ns = setup(StreamExecutionEnvironment=StreamExecutionEnvironment)
    run_all("state_backends_changelog", ns)
    assert ns["env"].is_changelog_state_backend_enabled()
    assert ns["env"].get_checkpoint_config().is_incremental_checkpoints_enabled()


def test_state_backend_migrations(tmp_path: Path) -> None:
    directory = f"file://{tmp_path}/checkpoint-dir"
    fix = [("'file:///checkpoint-dir'", repr(directory), "the checkpoint directory is the test's")]
    ns = setup(Configuration=Configuration, StreamExecutionEnvironment=StreamExecutionEnvironment)
    run_all("state_backends_memory_migration", ns)
    cfg = ns["env"].get_checkpoint_config()
    assert cfg.get_checkpoint_storage_dir() is None and repr(cfg.get_checkpoint_storage()) == (
        "JobManagerCheckpointStorage()"
    )
    run_all("state_backends_fs_migration", ns, fix)
    cfg = ns["env"].get_checkpoint_config()
    assert isinstance(ns["env"].get_state_backend(), HashMapStateBackend)
    assert cfg.get_checkpoint_storage_dir() == tmp_path / "checkpoint-dir"
    assert isinstance(cfg.get_checkpoint_storage(), FileSystemCheckpointStorage)
    run_all("state_backends_rocksdb_migration", ns, fix)
    assert isinstance(ns["env"].get_state_backend(), EmbeddedRocksDBStateBackend)
    assert ns["env"].get_checkpoint_config().get_checkpoint_storage_dir() == tmp_path / "checkpoint-dir"


def test_checkpoints_go_where_the_migration_says(tmp_path: Path) -> None:
    """The FsStateBackend migration's configuration, run: checkpoints appear in the directory."""
    directory = tmp_path / "checkpoint-dir"
    ns = setup(Configuration=Configuration, StreamExecutionEnvironment=StreamExecutionEnvironment)
    run_all(
        "state_backends_fs_migration", ns, [("'file:///checkpoint-dir'", repr(f"file://{directory}"), "")]
    )
    env = ns["env"]
    env.enable_checkpointing(10)
    env.set_parallelism(1)

    async def slow() -> Any:
        import asyncio

        for i in range(30):
            await asyncio.sleep(0.005)
            yield i

    assert sorted(collect(env.from_async_iterable(slow).map(lambda x: x + 1))) == list(range(1, 31))
    assert any(p.name.startswith("chk-") for p in directory.iterdir())


# ---------------------------------------------------------------- execution/parallel.md


LINES = [("to be or not", 1000), ("to be", 2000), ("be quick", 6000)]


@pytest.mark.parametrize("name", ["parallel_operator_level", "parallel_environment_level"])
def test_parallel(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The page's word count over 5 s windows, on lines with timestamps."""
    ns = setup(
        StreamExecutionEnvironment=StreamExecutionEnvironment,
        TumblingEventTimeWindows=TumblingEventTimeWindows,
    )

    def text_for(env: StreamExecutionEnvironment) -> Any:
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_LineTime())
        return env.from_collection(LINES).assign_timestamps_and_watermarks(strategy).map(lambda line: line[0])

    original = StreamExecutionEnvironment.get_execution_environment

    def get_env(*args: Any) -> StreamExecutionEnvironment:
        env = original(*args)
        ns["text"] = text_for(env)
        return env

    ns["StreamExecutionEnvironment"] = type("Env", (), {"get_execution_environment": staticmethod(get_env)})
    capsys.readouterr()
    run_all(name, ns)
    printed = capsys.readouterr().out.splitlines()
    if name == "parallel_environment_level":  # print() at parallelism 3: Flink's "N> " prefix
        assert all(re.fullmatch(r"[123]> .*", line) for line in printed), printed
        printed = [line[3:] for line in printed]
    # typed (Types.TUPLE) records print as Java tuples; [0 s, 5 s) and [5 s, 10 s)
    assert sorted(printed) == sorted(["(to,2)", "(be,2)", "(or,1)", "(not,1)", "(be,1)", "(quick,1)"])
    assert ns["word_counts"]._node.parallelism == (5 if name == "parallel_operator_level" else None)


class _LineTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


# ---------------------------------------------------------------- bookkeeping

TESTED = {
    "restart_fixed_delay",
    "restart_failure_rate",
    "restart_none",
    "dswindows_tumbling",
    "dswindows_sliding",
    "dswindows_session",
    "dswindows_global",
    "dswindows_reduce",
    "dswindows_aggregate",
    "dswindows_process",
    "dswindows_reduce_process",
    "dswindows_aggregate_process",
    "dswindows_apply",
    "dswindows_allowed_lateness",
    "dswindows_late_side_output",
    "dswindows_consecutive",
    "checkpointing_enable",
    "state_backends_per_job",
    "state_backends_dev_per_job",
    "state_backends_changelog",
    "state_backends_memory_migration",
    "state_backends_fs_migration",
    "state_backends_rocksdb_migration",
    "parallel_operator_level",
    "parallel_environment_level",
}
LEFT_OUT: dict[str, str] = {}


def test_every_snippet_here_has_a_case_or_a_reason() -> None:
    names = {p.stem for p in SNIPPETS.glob("*.py") if p.stem.startswith(PREFIXES)}
    assert names == TESTED | set(LEFT_OUT), names ^ (TESTED | set(LEFT_OUT))
