"""Two-input operators on the Spark engine: ``connect()`` of keyed streams (co-process with state,
event-time timers and a side output; keyed co-map), the interval join, and non-keyed co-map and
co-process give the asyncio engine's answers, in streaming and in batch mode; in batch mode a
non-keyed two-input operator with one keyed input (``keyed.connect(plain)``, either side) reads
the plain input in full first, then the keyed one key by key in timestamp order, on both engines
(``spark/half_sorted.py``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from test_spark import _env, _strategy, events

from streamflow import MapStateDescriptor, OutputTag, ValueStateDescriptor
from streamflow.common import Types
from streamflow.datastream.functions import CoMapFunction, CoProcessFunction, KeyedCoProcessFunction
from streamflow.execution_mode import RuntimeExecutionMode
from streamflow.testing import ListSink

RIGHT_HEAVY = OutputTag("right-heavy")


class BucketSums(KeyedCoProcessFunction):
    """Per key and second: the sums of both inputs' values, emitted by an event-time timer at the
    second's end (buckets where the second input's sum is larger also go to a side output)."""

    def open(self, runtime_context: Any) -> None:
        descriptor = MapStateDescriptor("sums", Types.LONG(), Types.TUPLE([Types.LONG(), Types.LONG()]))
        self.sums = runtime_context.get_map_state(descriptor)

    def _add(self, value: Any, ctx: Any, second: bool) -> None:
        bucket = ctx.timestamp() // 1000
        left, right = self.sums.get(bucket) or (0, 0)
        self.sums.put(bucket, (left, right + value[1]) if second else (left + value[1], right))
        ctx.timer_service().register_event_time_timer(bucket * 1000 + 999)

    def process_element1(self, value: Any, ctx: Any) -> None:
        self._add(value, ctx, False)

    def process_element2(self, value: Any, ctx: Any) -> None:
        self._add(value, ctx, True)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        bucket = timestamp // 1000
        left, right = self.sums.get(bucket)
        self.sums.remove(bucket)
        result = (ctx.get_current_key(), bucket, left, right, ctx.timestamp())
        yield result
        if right > left:
            yield RIGHT_HEAVY, result


class Sides(CoMapFunction):
    def map1(self, value: Any) -> Any:
        return ("first", *value)

    def map2(self, value: Any) -> Any:
        return ("second", *value)


class Stamped(CoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield ("first", value[1], ctx.timestamp())

    def process_element2(self, value: Any, ctx: Any) -> Any:
        if value[1] % 2:
            yield ("second", value[1], ctx.timestamp())


class PlainFirst(CoProcessFunction):
    """``keyed.connect(plain)`` in a batch job: what the operator has seen when each keyed record
    comes, the plain records counted in ``self`` (all of them: they come first), whether the key's
    records come in timestamp order, and how many keys came so far (key by key: each key once)."""

    def open(self, runtime_context: Any) -> None:
        self.plain = 0
        self.last: dict[str, int] = {}
        self.keys: list[str] = []

    def process_element1(self, value: Any, ctx: Any) -> Any:  # the keyed input
        key = value[0]
        if not self.keys or self.keys[-1] != key:
            self.keys.append(key)
        in_order = self.last.get(key, -1) <= ctx.timestamp()
        self.last[key] = ctx.timestamp()
        yield ("keyed", key, value[1], ctx.timestamp(), self.plain, in_order, len(self.keys))

    def process_element2(self, value: Any, ctx: Any) -> Any:  # the plain input
        self.plain += 1
        if self.plain % 500 == 0:
            yield ("plain", self.plain, len(self.keys))


class KeyedSecond(PlainFirst):
    """``plain.connect(keyed)``: the same with the inputs swapped."""

    def process_element1(self, value: Any, ctx: Any) -> Any:
        return PlainFirst.process_element2(self, value, ctx)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        return PlainFirst.process_element1(self, value, ctx)


class Positions(KeyedCoProcessFunction):
    """Each record's position among its key's records (keyed state): on equal timestamps a batch
    job reads the first input's records before the second's (``runtime/sort_buffer.py``)."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def _next(self) -> int:
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return n

    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield ("first", value[1], ctx.timestamp(), self._next())

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield ("second", value[1], ctx.timestamp(), self._next())


def two_input_jobs(engine: str, batch: bool = False) -> dict[str, list]:
    env = _env(engine)
    if batch:
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        # one micro-batch per source (then the end of input's): a batch job's keyed stage keeps a
        # key's rows of both inputs in its state until the end of input all the same, and rows
        # added to the state over several micro-batches are test_spark.py's batch job (3 of them).
        # Each micro-batch of a Python stateful stage cost 1.5-2 s here on the loaded machine
        env.configure({"execution.spark.records-per-batch": 1500})
    data = events(3000)
    # (in batch mode not the stateless co-maps and the non-keyed co-process: their records are the
    # streaming job's, and on Spark each was a query of its own, about 5 s on the loaded machine)
    names = ["co_process", "right_heavy", "interval_join", "after_a_keyed_stage"]
    if not batch:
        names += ["co_map", "co_map_unkeyed", "co_process_unkeyed"]
    sinks = {name: ListSink() for name in names}
    first = env.from_collection(data[::2]).assign_timestamps_and_watermarks(_strategy())
    second = env.from_collection(data[1::2]).assign_timestamps_and_watermarks(_strategy())
    sums = first.connect(second).key_by(lambda e: e[0][-1] in "01234", lambda e: e[0][-1] in "56789")
    processed = sums.process(BucketSums())
    processed.sink_to(sinks["co_process"])
    processed.get_side_output(RIGHT_HEAVY).sink_to(sinks["right_heavy"])
    (
        first.key_by(lambda e: e[1] % 5)
        .interval_join(second.filter(lambda e: e[1] % 3 == 0).key_by(lambda e: e[1] % 5))
        .between(-5, 5)
        .process(lambda left, right, ctx: [(left[1], left[2], right[1], right[2], ctx.get_timestamp())])
        .sink_to(sinks["interval_join"])
    )
    if not batch:
        keyed_pair = first.key_by(lambda e: e[0]).connect(second.key_by(lambda e: e[0]))
        keyed_pair.map(Sides()).sink_to(sinks["co_map"])
        first.connect(second).map(Sides()).filter(lambda r: r[2] % 4 == 0).sink_to(sinks["co_map_unkeyed"])
        first.connect(second).process(Stamped()).sink_to(sinks["co_process_unkeyed"])
    # one input is a keyed stage's output (Spark runs it in a query of its own: an exchange)
    running = first.key_by(lambda e: e[0]).reduce(lambda x, y: (x[0], x[1] + y[1], max(x[2], y[2])))
    keyed = running.connect(second).key_by(lambda e: e[0], lambda e: e[0])
    keyed.process(BucketSums()).sink_to(sinks["after_a_keyed_stage"])
    if batch:  # (streaming: the answer depends on how the inputs interleave, on either engine)
        for name, connected in (("half_keyed", first.key_by(lambda e: e[0]).connect(second)),
                                ("half_keyed_second", first.connect(second.key_by(lambda e: e[0])))):
            sinks[name] = ListSink()
            function = PlainFirst() if name == "half_keyed" else KeyedSecond()
            connected.process(function).set_parallelism(1).sink_to(sinks[name])
        sinks["equal_timestamps"] = ListSink()
        # the first input's records again, in reverse (equal timestamps, the input positions reversed)
        reverse = env.from_collection([(k, -v, t) for k, v, t in reversed(data[::2])])
        mirrored = reverse.assign_timestamps_and_watermarks(_strategy()).key_by(lambda e: e[0])
        first.key_by(lambda e: e[0]).connect(mirrored).process(Positions()).sink_to(sinks["equal_timestamps"])
    env.execute(f"two-input operators on {engine}")
    return {name: sink.results for name, sink in sinks.items()}


def _check(expected: dict[str, list], actual: dict[str, list], batch: bool = False) -> None:
    if not batch:
        assert len(expected["co_map"]) == 3000 and len(expected["co_process_unkeyed"]) > 2000
    # ten keys, three seconds; in batch mode the reduce emits one final record per key (its last second)
    assert len(expected["after_a_keyed_stage"]) == (5 + 5 * 3 if batch else 10 * 3)
    assert len(expected["co_process"]) == 2 * 3  # two keys, three seconds
    assert expected["right_heavy"] and len(expected["interval_join"]) > 500
    if batch:  # every plain record first, then key by key (each key once) in timestamp order
        for name in ("half_keyed", "half_keyed_second"):
            keyed = [r for r in expected[name] if r[0] == "keyed"]
            assert len(keyed) == 1500 and {(r[4], r[5]) for r in keyed} == {(1500, True)}
            assert max(r[6] for r in keyed) == 5  # (each input holds five of the ten keys)
        assert {r[0] for r in expected["equal_timestamps"] if r[3] % 2} == {"first"}
    for name in expected:
        assert Counter(map(repr, actual[name])) == Counter(map(repr, expected[name])), name


def test_keyed_two_input_operators_same_on_both_engines() -> None:
    _check(two_input_jobs("asyncio"), two_input_jobs("spark"))


def test_keyed_two_input_operators_in_batch_mode_same_on_both_engines() -> None:
    _check(two_input_jobs("asyncio", batch=True), two_input_jobs("spark", batch=True), batch=True)
