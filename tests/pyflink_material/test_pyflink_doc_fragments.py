"""The fragments among Flink's DataStream doc blocks, run in a minimal harness.

Some Python blocks of ``operators/overview.md``, ``fault-tolerance/state.md`` and
``operators/process_function.md`` are not programs: they pass ``...`` where a function
or a stream goes (``some_stream.filter(...).map(...)``), bind ``stream_1 = ...``, or are
the body of a method whose ``ctx`` comes from the enclosing ``process_element``. Each
runs here unchanged except for its placeholders, which :data:`FILLS` replaces by the
harness's names (an exact replacement that must match, with its reason), or, for a
method body, inside a ``KeyedProcessFunction`` of the harness whose ``ctx`` (and
``timeout``) the body uses. The result is then checked against Flink's semantics:
the operators chain or do not chain as the page says, the timers are registered,
coalesced and deleted as it says.

``watermarks_after_source`` stays out (``LEFT_OUT`` of ``test_pyflink_doc_snippets.py``):
the page itself says ``read_file`` is not supported in PyFlink, and the block also
uses ``MyEvent``, ``WARNING``, ``my_file_path``, ``charset``, ``<watermark strategy>``
and ``assign_timestamp_and_watermarks`` (sic), which exist nowhere.
"""

from __future__ import annotations

import textwrap
from typing import Any

from test_pyflink_doc_snippets import RUN_ELSEWHERE, collect, run, setup, source

from streamflow.common import Row, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import CoMapFunction, KeyedProcessFunction

FILLS: dict[str, list[tuple[str, str, str]]] = {
    "operators_union": [
        ("otherStream1, otherStream2, ...)", "otherStream1, otherStream2)", "`...` stands for more streams"),
        ("data_stream.union(", "result = data_stream.union(", "the result is bound to be observed"),
    ],
    "operators_connect": [
        ("stream_1 = ...\n", "", "placeholder: the setup gives stream_1"),
        ("stream_2 = ...\n", "", "placeholder: the setup gives stream_2"),
    ],
    "operators_start_new_chain": [
        (
            "filter(...).map(...).start_new_chain().map(...)",
            "filter(keep).map(step).start_new_chain().map(step)",
            "`...` stands for the functions: the harness's",
        )
    ],
    "operators_disable_chaining": [("map(...)", "map(step)", "`...` stands for the function")],
    "operators_slot_sharing_group": [("filter(...)", "filter(keep)", "`...` stands for the function")],
    "state_key_by": [("words = # type: DataStream[Row]\n", "", "not Python: the setup gives `words`")],
    "process_function_timer_key": [
        ("    # ...\n", "    yield key\n", "`# ...` stands for the rest of the method: it emits the key")
    ],
    "process_function_delete_processing_timer": [
        (
            "timestamp_of_timer_to_stop = ...\n",
            "timestamp_of_timer_to_stop = registered\n",
            "placeholder: the timer the harness registered",
        )
    ],
    "process_function_delete_event_timer": [
        (
            "timestamp_of_timer_to_stop = ...\n",
            "timestamp_of_timer_to_stop = registered\n",
            "placeholder: the timer the harness registered",
        )
    ],
}


def keep(x: int) -> bool:
    return x % 2 == 1


def step(x: int) -> int:
    return x + 1


def chains(env: Any) -> list[list[str]]:
    return [[n.name for n in v.nodes] for v in env.get_job_graph().vertices]


def test_union() -> None:
    ns = setup()
    env = ns["env"]
    ns.update(
        data_stream=env.from_collection([1]),
        otherStream1=env.from_collection([2]),
        otherStream2=env.from_collection([3]),
    )
    run("operators_union", ns, FILLS["operators_union"])
    assert sorted(collect(ns["result"])) == [1, 2, 3]


def test_connect() -> None:
    ns = setup()
    ns.update(stream_1=ns["env"].from_collection([1, 2]), stream_2=ns["env"].from_collection(["a"]))
    run("operators_connect", ns, FILLS["operators_connect"])

    class Tag(CoMapFunction):
        def map1(self, value: int) -> str:
            return f"1:{value}"

        def map2(self, value: str) -> str:
            return f"2:{value}"

    assert sorted(collect(ns["connected_streams"].map(Tag()))) == ["1:1", "1:2", "2:a"]


def test_chaining_and_slot_sharing() -> None:
    """``start_new_chain()`` starts a chain at its operator; ``disable_chaining()`` makes its
    operator a chain of its own; ``slot_sharing_group`` is recorded (shown in the plan)."""
    ns = setup(keep=keep, step=step)
    ns["some_stream"] = ns["env"].from_collection([1, 2, 3])
    result = run("operators_start_new_chain", ns, FILLS["operators_start_new_chain"])
    result.add_sink(lambda x: None)
    # start_new_chain() applies to the operator it is called on, the first map
    assert chains(ns["env"]) == [["collection", "Filter"], ["Map", "Map", "Sink"]]
    assert sorted(collect(result)) == [3, 5]

    ns = setup(keep=keep, step=step)
    ns["some_stream"] = ns["env"].from_collection([1, 2, 3])
    run("operators_disable_chaining", ns, FILLS["operators_disable_chaining"]).add_sink(lambda x: None)
    assert chains(ns["env"]) == [["collection"], ["Map"], ["Sink"]]

    ns = setup(keep=keep, step=step)
    ns["some_stream"] = ns["env"].from_collection([1, 2, 3])
    grouped = run("operators_slot_sharing_group", ns, FILLS["operators_slot_sharing_group"])
    grouped.add_sink(lambda x: None)
    assert '"slot_sharing_group": "name"' in ns["env"].get_execution_plan()
    assert sorted(collect(grouped)) == [1, 3]


def test_state_key_by() -> None:
    ns = setup()
    rows = [Row("a", 1), Row("b", 2), Row("a", 3)]
    ns["words"] = ns["env"].from_collection(rows, type_info=Types.ROW([Types.STRING(), Types.INT()]))
    run("state_key_by", ns, FILLS["state_key_by"])
    summed = ns["keyed"].reduce(lambda a, b: Row(a[0], a[1] + b[1]))
    assert sorted(tuple(r) for r in collect(summed)) == [("a", 1), ("a", 4), ("b", 2)]


class _Time(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def _timed(env: Any, data: list[tuple[str, int]]) -> Any:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Time())
    return env.from_collection(data).assign_timestamps_and_watermarks(strategy)


class _Recording:
    """The ``ctx`` the block gets: the real one, with its timer service calls recorded."""

    def __init__(self, ctx: Any, calls: list[tuple[str, int]]) -> None:
        self._ctx, self._calls = ctx, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def timer_service(self) -> Any:
        timers, calls = self._ctx.timer_service(), self._calls

        class Timers:
            def __getattr__(self, name: str) -> Any:
                method = getattr(timers, name)
                if not name.startswith(("register", "delete")):
                    return method
                return lambda t: (calls.append((name, t)), method(t))[1]

        return Timers()


def _body_function(name: str, calls: list[tuple[str, int]] | None = None) -> type:
    """A KeyedProcessFunction whose process_element registers an event- and a processing-time
    timer at ts + 500 (``registered``) and runs the block (a method body) with its ``ctx``
    (calls recorded in ``calls``) and ``timeout`` = 1 s; timers emit (key, timestamp, domain).
    (A processing-time timer at 1970 + 1.5 s is long due: it fires at once.)"""
    body = compile(source(name, FILLS.get(name, [])), f"{name}.py", "exec")
    recorded = [] if calls is None else calls

    class Body(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            registered = value[1] + 500
            ctx.timer_service().register_event_time_timer(registered)
            ctx.timer_service().register_processing_time_timer(registered)
            exec(body, {"ctx": _Recording(ctx, recorded), "timeout": 1000, "registered": registered})
            return None

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield ctx.get_current_key(), timestamp, ctx.time_domain().name

    return Body


def test_timer_key() -> None:
    ns = setup(KeyedProcessFunction=KeyedProcessFunction)
    text = source("process_function_timer_key", FILLS["process_function_timer_key"])
    exec(
        "class TimerKey(KeyedProcessFunction):\n"
        "    def process_element(self, value, ctx):\n"
        "        ctx.timer_service().register_event_time_timer(value[1] + 1)\n"
        + textwrap.indent(text, "    "),
        ns,
    )
    result = _timed(ns["env"], [("a", 1), ("b", 2)]).key_by(lambda v: v[0]).process(ns["TimerKey"]())
    assert sorted(collect(result)) == ["a", "b"]  # on_timer's ctx.get_current_key()


def test_coalesced_timers() -> None:
    """Processing-time coalescing rounds to the second: one timer per key and second; the
    event-time one registers at watermark + 1, which fires with the next watermark."""
    ns = setup()
    data = [("a", 1000), ("a", 1100), ("a", 1200)]
    calls: list[tuple[str, int]] = []
    collect(
        _timed(ns["env"], data)
        .key_by(lambda v: v[0])
        .process(_body_function("process_function_coalesce_processing", calls)())
    )
    # ((ctx.timestamp() + timeout) // 1000) * 1000: the three records share one timer second
    assert calls == [("register_processing_time_timer", 2000)] * 3
    calls.clear()
    fired = collect(
        _timed(ns["env"], data)
        .key_by(lambda v: v[0])
        .process(_body_function("process_function_coalesce_event", calls)())
    )
    # current_watermark() + 1: nothing was emitted yet (periodic watermarks), so MIN + 1
    assert {name for name, _ in calls} == {"register_event_time_timer"}
    assert {("a", t, "EVENT_TIME") for _, t in calls} <= set(fired)


def test_deleted_timers() -> None:
    """The block deletes the timer the harness registered: only the other kind fires."""
    ns = setup()
    data = [("a", 1000)]
    assert collect(
        _timed(ns["env"], data)
        .key_by(lambda v: v[0])
        .process(_body_function("process_function_delete_event_timer")())
    ) == [("a", 1500, "PROCESSING_TIME")]
    assert collect(
        _timed(ns["env"], data)
        .key_by(lambda v: v[0])
        .process(_body_function("process_function_delete_processing_timer")())
    ) == [("a", 1500, "EVENT_TIME")]


def test_every_fragment_here_is_run_here() -> None:
    ran = {
        "operators_union",
        "operators_connect",
        "operators_start_new_chain",
        "operators_disable_chaining",
        "operators_slot_sharing_group",
        "state_key_by",
        "process_function_timer_key",
        "process_function_coalesce_processing",
        "process_function_coalesce_event",
        "process_function_delete_processing_timer",
        "process_function_delete_event_timer",
    }
    assert ran == RUN_ELSEWHERE
