"""The Python code blocks of Apache Flink's DataStream documentation, run on streamflow.

``doc_snippets/`` holds each Python block of Flink's docs (the Python DataStream
pages under ``docs/content/docs/dev/python/datastream/`` and the Python tabs of
``docs/content/docs/dev/datastream/``; the file names the page, its commit and
its section) with Flink's license header, unchanged except that ``pyflink``
reads ``streamflow``.

Most blocks are not whole programs: they use an ``env``, a ``data_stream`` or
the page's imports set up earlier on the page. :func:`setup` is that
surrounding setup (what the page says the names are), and the block runs in
it. Where a block cannot run even in PyFlink, a *fix* (an exact text
replacement, which must match) makes it run, and ``FIXES`` says why; docs/pyflink.md
lists them. Blocks that need the Table API or JVM connector jars, or that are
only a fragment (placeholders such as ``<watermark strategy>``, ``...`` as an
argument, a method body without its class), are listed in ``LEFT_OUT`` with
the reason, and the test checks that every file has a case or a reason.

Each result is compared with the output the page documents (``# the printed
output will be (1,4) and (1,5)``) or with Flink's semantics for the program.
"""

from __future__ import annotations

import ast
import runpy
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamflow.common import Duration, Row, Time, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import (
    CoFlatMapFunction,
    CoMapFunction,
    DataStream,
    MapFunction,
    OutputTag,
    ProcessFunction,
    StreamExecutionEnvironment,
    Trigger,
    WindowAssigner,
)
from streamflow.datastream.functions import ProcessWindowFunction, WindowFunction
from streamflow.datastream.state import StateTtlConfig
from streamflow.datastream.window import TimeWindow, TriggerResult

SNIPPETS = Path(__file__).parent / "doc_snippets"

_TABLE = "Table API (StreamTableEnvironment, SQL connectors): not part of streamflow"
_KAFKA_LEGACY = "JVM Kafka connector (FlinkKafkaConsumer/Producer, JSON row formats) and add_jars"
LEFT_OUT: dict[str, str] = {
    "watermarks_after_source": "fragment: `<watermark strategy>` placeholder, undefined MyEvent and "
    "my_file_path, and `read_text_file`, which the page itself says PyFlink does not support",
}
#: Fragments run in test_pyflink_doc_fragments.py's harness (placeholders filled, method bodies
#: inside a KeyedProcessFunction).
RUN_ELSEWHERE = {
    "operators_union", "operators_connect", "operators_start_new_chain", "operators_disable_chaining",
    "operators_slot_sharing_group", "state_key_by", "process_function_timer_key",
    "process_function_coalesce_processing", "process_function_coalesce_event",
    "process_function_delete_processing_timer", "process_function_delete_event_timer",
}
#: Text replacements that make a block run at all (they would be needed in PyFlink too).
FIXES: dict[str, list[tuple[str, str, str]]] = {
    "operators_key_by": [("// Key by", "# Key by", "a Java comment (`//`) in the Python tab")],
    "operators_comap": [("def flat_map1(self, value)\n", "def flat_map1(self, value):\n",
                         "missing colon after `def flat_map1(self, value)`")],
    "operators_partition_custom": [("key % partition,", "key % num_partition,",
                                    "`partition` is undefined; the lambda's parameter is `num_partition`")],
    "side_output_emit": [("input = ...  # type: DataStream\n", "",
                          "`input = ...` placeholder; the setup gives `input`")],
    "side_output_get": [("main_data_stream = ...  # type: DataStream\n", "",
                         "`main_data_stream = ...` placeholder; the previous block made it")],
    "windows_process_window_function": [
        ("TumblingEventWindowAssigner()", "TumblingEventWindowAssigner(2, 0, True)",
         "the assigner's __init__ requires (size, offset, is_event_time)"),
        ("data_stream.key_by(", "result = data_stream.key_by(", "the result is bound to be observed"),
    ],
    "windows_window_function": [
        ("TumblingEventWindowAssigner()", "TumblingEventWindowAssigner(2, 0, True)",
         "the assigner's __init__ requires (size, offset, is_event_time)"),
        ("data_stream.key_by(", "result = data_stream.key_by(", "the result is bound to be observed"),
    ],
}


def source(name: str, fixes: list[tuple[str, str, str]] | None = None) -> str:
    text = (SNIPPETS / f"{name}.py").read_text()
    for old, new, _why in FIXES.get(name, []) + (fixes or []):
        assert old in text, f"{name}: the fix for {old!r} no longer applies"
        text = text.replace(old, new)
    return text


def run(name: str, ns: dict[str, Any], fixes: list[tuple[str, str, str]] | None = None) -> Any:
    """Run a block in ``ns``; the value of its last line if that is an expression (as a REPL)."""
    tree = ast.parse(source(name, fixes), filename=f"{name}.py")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, f"{name}.py", "exec"), ns)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), f"{name}.py", "eval"), ns)


def setup(**names: Any) -> dict[str, Any]:
    """What the pages set up around their blocks: an environment and the imports they use."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    ns: dict[str, Any] = {
        "__name__": "doc_snippet", "env": env, "Types": Types, "Row": Row, "Time": Time,
        "Duration": Duration, "WatermarkStrategy": WatermarkStrategy, "TimestampAssigner": TimestampAssigner,
        "MapFunction": MapFunction, "CoMapFunction": CoMapFunction, "CoFlatMapFunction": CoFlatMapFunction,
        "ProcessFunction": ProcessFunction, "OutputTag": OutputTag, "DataStream": DataStream,
        "ProcessWindowFunction": ProcessWindowFunction, "WindowFunction": WindowFunction,
        "Trigger": Trigger, "TriggerResult": TriggerResult, "WindowAssigner": WindowAssigner,
    }
    ns.update(names)
    return ns


def collect(stream: Any) -> list[Any]:
    with stream.execute_and_collect() as results:
        return list(results)


def printed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().out.splitlines()


def part_lines(directory: Path) -> list[str]:
    lines: list[str] = []
    for path in directory.rglob("*"):
        if path.is_file() and not path.name.startswith("."):
            lines += path.read_text().splitlines()
    return lines


# ---------------------------------------------------------------- intro_to_datastream_api.md


def test_intro_common_structure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's whole program: per key a % 4, the first two records get value + 1."""
    out = tmp_path / "output"
    path = tmp_path / "program.py"
    path.write_text(source("intro_common_structure", [("'/opt/output/'", repr(str(out) + "/"),
                                                      "the output directory is the test's")]))
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    names = [p.name for p in out.rglob("*") if p.is_file()]
    assert names and all(n.startswith("pre") and n.endswith("suf") for n in names), names
    expected = Counter({f"({k},2)": 2 for k in range(4)} | {f"({k},1)": 2498 for k in range(4)})
    assert Counter(part_lines(out)) == expected  # Java's Tuple2.toString, as SimpleStringEncoder


def test_intro_create_env() -> None:
    ns = setup()
    run("intro_create_env", ns)
    assert isinstance(ns["env"], StreamExecutionEnvironment)


def test_intro_from_list() -> None:
    ns = setup()
    run("intro_from_list", ns)
    rows = collect(ns["ds"])  # rows of an unnamed ROW type are named f0, f1, ... as in PyFlink
    assert rows == [Row(f0=1, f1="aaa|bb"), Row(f0=2, f1="bb|a"), Row(f0=3, f1="aaa|a")]
    assert [r[1] for r in rows] == [r.f1 for r in rows] == ["aaa|bb", "bb|a", "aaa|a"]


def test_intro_from_source() -> None:
    ns = setup()
    run("intro_from_source", ns)
    assert sorted(collect(ns["ds"])) == list(range(1, 1001))


def test_intro_map() -> None:
    ns = setup()
    ns["ds"] = ns["env"].from_collection([1, 2, 3])
    run("intro_map", ns)
    assert collect(ns["ds"]) == [2, 3, 4]


def test_intro_print_collect_execute(capsys: pytest.CaptureFixture[str]) -> None:
    ns = setup()
    typ = Types.TUPLE([Types.INT(), Types.STRING()])
    ns["ds"] = ns["env"].from_collection([(1, "a"), (2, "b")], type_info=typ)
    capsys.readouterr()
    run("intro_print", ns)
    run("intro_execute", ns)
    assert printed(capsys) == ["(1,a)", "(2,b)"]  # PyFlink prints the typed records as Java does
    run("intro_collect", ns)
    assert printed(capsys) == ["(1, 'a')", "(2, 'b')"]  # collected records are Python tuples


def test_intro_sink_to(tmp_path: Path) -> None:
    ns = setup()
    typ = Types.ROW([Types.INT(), Types.STRING()])
    ns["ds"] = ns["env"].from_collection([(1, "a"), (2, "b")], type_info=typ)
    run("intro_sink_to", ns, [("'/opt/output/'", repr(str(tmp_path) + "/"), "the test's directory")])
    run("intro_execute", ns)
    assert sorted(part_lines(tmp_path)) == ["+I[1, a]", "+I[2, b]"]
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(n.startswith("pre") and n.endswith("suf") for n in files)


# ---------------------------------------------------------------- python/datastream/operators/overview.md


@pytest.mark.parametrize("name", ["functions_map_function", "functions_lambda", "functions_python_function"])
def test_functions(name: str) -> None:
    ns = setup()
    run(name, ns)
    assert collect(ns["mapped_stream"]) == [2, 3, 4, 5, 6]


# ---------------------------------------------------------------- python/datastream/operators/windows.md


def _window_classes() -> dict[str, Any]:
    ns = setup()
    run("windows_event_time_trigger", ns)
    run("windows_custom_assigner", ns)
    return ns


def test_windows_assigner_and_trigger() -> None:
    ns = _window_classes()
    assigner = ns["TumblingEventWindowAssigner"](5, 0, True)
    assert assigner.assign_windows(("x",), 7, None) == [TimeWindow(5, 10)]
    trigger = assigner.get_default_trigger(ns["env"])
    assert trigger.on_element(("x",), 7, TimeWindow(5, 10), None) == TriggerResult.CONTINUE
    assert trigger.on_event_time(9, TimeWindow(5, 10), None) == TriggerResult.FIRE_AND_PURGE
    assert trigger.on_event_time(8, TimeWindow(5, 10), None) == TriggerResult.CONTINUE
    assert not assigner.is_event_time()  # as the page writes it


@pytest.mark.parametrize("name", ["windows_process_window_function", "windows_window_function"])
def test_windows_functions(name: str) -> None:
    """The page's program (with its assigner's arguments filled in). The assigner says
    ``is_event_time() -> False``, so Flink's window operator registers each window's cleanup
    as a *processing-time* timer, which calls the trigger's ``on_processing_time`` (CONTINUE) and
    then drops the window: the page's program emits nothing, on Flink and here. With the
    assigner's windows evaluated directly, the functions sum per key as the page says."""
    ns = _window_classes()
    run(name, ns)
    assert collect(ns["result"]) == []
    fn = ns["SumWindowProcessFunction" if "process" in name else "SumWindowFunction"]()
    call = fn.process if "process" in name else fn.apply
    assert list(call("hi", TimeWindow(0, 2), [(1, "hi"), (3, "hi")])) == [("hi", 4)]


# ---------------------------------------------------------------- python/datastream/data_types.md


def test_data_types_pickle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    capsys.readouterr()
    runpy.run_path(str(SNIPPETS / "data_types_pickle.py"), run_name="__main__")
    assert printed(capsys) == ["(2, 'AAA')", "(3, 'BBB')"]  # untyped: Python's str of the tuple


def test_data_types_streaming_file_sink(tmp_path: Path) -> None:
    path = tmp_path / "program.py"
    out = tmp_path / "output"
    path.write_text(source("data_types_streaming_file_sink", [("'/tmp/output'", repr(str(out)),
                                                              "the output directory is the test's")]))
    runpy.run_path(str(path), run_name="__main__")
    assert sorted(part_lines(out)) == ["+I[2, AAA]", "+I[3, BBB]"]  # Row.toString of the typed rows


# ---------------------------------------------------------------- datastream/operators/overview.md


@pytest.mark.parametrize(("name", "expected"), [
    ("operators_map", [2, 4, 6, 8, 10]),
    ("operators_flat_map", ["hello", "apache", "flink", "streaming", "compute"]),
    ("operators_filter", [1, 2, 3, 4, 5]),
    # a keyed stream collects as Row(f0=key, f1=record), as PyFlink's execute_and_collect
    ("operators_key_by", [Row(f0="a", f1=(1, "a")), Row(f0="a", f1=(2, "a")), Row(f0="b", f1=(3, "b"))]),
    ("operators_reduce", [(1, "a"), (3, "a"), (6, "a"), (4, "b")]),
    ("operators_partition_custom", [(2, "a"), (2, "a"), (3, "b")]),
])
def test_operators(name: str, expected: list[Any]) -> None:
    ns = setup()
    result = run(name, ns)
    assert sorted(collect(result), key=str) == sorted(expected, key=str)


@pytest.mark.parametrize("name", ["operators_shuffle", "operators_rescale", "operators_broadcast"])
def test_physical_partitioning(name: str) -> None:
    ns = setup()
    ns["env"].set_parallelism(2)
    ns["data_stream"] = ns["env"].from_collection([1, 2, 3, 4])
    result = run(name, ns).map(lambda x: x * 10)
    expected = [10, 20, 30, 40] * (2 if name == "operators_broadcast" else 1)  # broadcast: to both subtasks
    assert sorted(collect(result)) == sorted(expected)


def test_operators_comap() -> None:
    ns = setup()
    a = ns["env"].from_collection([(2, "x")])
    b = ns["env"].from_collection([(5, "y")])
    ns["connectedStreams"] = a.connect(b)
    fixes = [("connectedStreams.map(MyCoMapFunction())\n",
              "mapped = connectedStreams.map(MyCoMapFunction())\n", "the results are bound to be observed")]
    flat = run("operators_comap", ns, fixes)
    assert sorted(collect(ns["mapped"])) == [(3, "x"), (5, "yflink")]
    assert sorted(collect(flat)) == [0, 1, 6]


# ---------------------------------------------------------------- datastream/fault-tolerance/state.md


def test_state_count_window_average(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    runpy.run_path(str(SNIPPETS / "state_count_window_average.py"), run_name="__main__")
    # "the printed output will be (1,4) and (1,5)": untyped records print as Python tuples
    assert printed(capsys) == ["(1, 4)", "(1, 5)"]


def test_state_ttl() -> None:
    ns = setup()
    run("state_ttl", ns)
    config = ns["state_descriptor"].ttl_config
    assert config is ns["ttl_config"] and config.get_ttl() == 1000
    assert config.get_update_type() == StateTtlConfig.UpdateType.OnCreateAndWrite
    assert config.get_state_visibility() == StateTtlConfig.StateVisibility.NeverReturnExpired


def test_state_ttl_cleanup_strategies() -> None:
    ns = setup()
    run("state_ttl_disable_cleanup_in_background", ns)
    assert not ns["ttl_config"].get_cleanup_strategies().is_cleanup_in_background()
    run("state_ttl_cleanup_full_snapshot", ns)
    assert ns["ttl_config"].get_cleanup_strategies().in_full_snapshot()
    run("state_ttl_cleanup_incrementally", ns)
    incremental = ns["ttl_config"].get_cleanup_strategies().get_incremental_cleanup_strategy()
    assert (incremental.get_cleanup_size(), incremental.run_cleanup_for_every_record()) == (10, True)
    run("state_ttl_cleanup_in_rocksdb_compact_filter", ns)
    rocks = ns["ttl_config"].get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy()
    assert rocks.get_query_time_after_num_entries() == 1000


# ---------------------------------------------------------------- datastream/side_output.md


def test_side_output() -> None:
    ns = setup()
    run("side_output_tag", ns)
    assert ns["output_tag"].tag_id == "side-output"
    ns["input"] = ns["env"].from_collection([1, 2, 3], type_info=Types.INT())
    run("side_output_emit", ns)
    run("side_output_get", ns)
    side = ns["side_output_stream"]
    ns["env"].set_parallelism(1)
    assert collect(ns["main_data_stream"]) == [1, 2, 3]
    assert collect(side) == ["sideout-1", "sideout-2", "sideout-3"]


# -------------------------------------------------------- datastream/event-time/generating_watermarks.md


def test_watermarks_timestamp_assigner() -> None:
    """The strategy takes each record's first field as its timestamp, 20 s out of order."""
    from streamflow.datastream.window import TumblingEventTimeWindows

    ns = setup()
    strategy = run("watermarks_timestamp_assigner", ns)
    data = [(1000, "a"), (25_000, "b"), (3000, "c"), (70_000, "d")]
    ds = ns["env"].from_collection(data).assign_timestamps_and_watermarks(strategy)
    counts = ds.window_all(TumblingEventTimeWindows.of(Time.seconds(10))).reduce(
        lambda a, b: (a[0], a[1] + b[1]))
    # 3000 is not late (watermark 25000 - 20000 - 1 < 10000): it joins the window [0, 10 s)
    assert sorted(collect(counts)) == [(1000, "ac"), (25_000, "b"), (70_000, "d")]


def test_watermarks_idleness_and_alignment() -> None:
    ns = setup()
    idle = run("watermarks_idleness", ns)
    assert idle.idle_timeout_ms == 60_000
    aligned = run("watermarks_alignment", ns)
    assert aligned.alignment == ("alignment-group-1", 20_000, 1000)


# ---------------------------------------------------------------- datastream/operators/process_function.md


def test_process_function_count_with_timeout() -> None:
    """The page's functions, fed by a collection instead of its Table API ``datagen`` source
    (same row type): at the end of input each key's latest timer fires and emits its count."""
    import datetime

    ns = setup()
    table_import = "from streamflow.table import StreamTableEnvironment\n"
    run("process_function_count_with_timeout", ns, [(table_import, "", "Table API: a collection stands in")])
    t0 = datetime.datetime(2024, 1, 1)
    rows = [(t0 + datetime.timedelta(seconds=s), key, "c") for s, key in
            [(0, "a"), (10, "b"), (20, "a"), (200, "a"), (210, "b")]]
    stream = ns["env"].from_collection(
        rows, type_info=Types.ROW([Types.SQL_TIMESTAMP(), Types.STRING(), Types.STRING()]))
    watermarked = stream.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ns["MyTimestampAssigner"]()))
    result = watermarked.key_by(lambda value: value[1]).process(ns["CountWithTimeoutFunction"]())
    # Watermarks are periodic (200 ms), so in Flink as here the few records are all processed
    # before the first watermark; at the end of input every timer fires and only each key's
    # latest one (lastModified + 60 s) emits: a counted 3, b 2.
    assert sorted(collect(result)) == [("a", 3), ("b", 2)]


# ---------------------------------------------------------------- bookkeeping


def test_every_snippet_has_a_case_or_a_reason() -> None:
    # (the prefixes of test_pyflink_doc_snippets_datastream's blocks)
    others = ("dswindows_", "checkpointing_", "state_backends_", "parallel_", "restart_")
    names = {p.stem for p in SNIPPETS.glob("*.py") if not p.stem.startswith(others)}
    tested = {
        "intro_common_structure", "intro_create_env", "intro_from_list", "intro_from_source", "intro_map",
        "intro_print", "intro_collect", "intro_sink_to", "intro_execute", "functions_map_function",
        "functions_lambda", "functions_python_function", "windows_custom_assigner",
        "windows_process_window_function", "windows_window_function", "windows_event_time_trigger",
        "data_types_pickle", "data_types_streaming_file_sink", "operators_map", "operators_flat_map",
        "operators_filter", "operators_key_by", "operators_reduce", "operators_partition_custom",
        "operators_shuffle", "operators_rescale", "operators_broadcast", "operators_comap",
        "state_count_window_average", "state_ttl", "state_ttl_disable_cleanup_in_background",
        "state_ttl_cleanup_full_snapshot", "state_ttl_cleanup_incrementally",
        "state_ttl_cleanup_in_rocksdb_compact_filter", "side_output_tag", "side_output_emit",
        "side_output_get", "watermarks_timestamp_assigner", "watermarks_idleness", "watermarks_alignment",
        "process_function_count_with_timeout",
    }
    assert not tested & set(LEFT_OUT) and not tested & RUN_ELSEWHERE
    assert names == tested | set(LEFT_OUT) | RUN_ELSEWHERE, (names ^ (tested | set(LEFT_OUT) | RUN_ELSEWHERE))
    for name in LEFT_OUT:
        with pytest.raises((SyntaxError, NameError, TypeError, AttributeError)):  # fragments do not run
            run(name, setup())
