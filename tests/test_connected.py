"""connect(): co-map, co-flat-map, co-process, keyed co-process with shared state and timers."""

from __future__ import annotations

from typing import Any

import pytest

import streamflow as sf
from streamflow.testing import ListSink, Record, ScriptedSource


class Tag(sf.CoMapFunction):
    def map1(self, value: int) -> str:
        return f"int {value}"

    def map2(self, value: str) -> str:
        return f"str {value}"


class Split(sf.CoFlatMapFunction):
    def flat_map1(self, value: str) -> Any:
        return value.split()

    def flat_map2(self, value: int) -> Any:
        return [value] * value


@pytest.mark.parametrize("parallelism", [1, 2])
def test_co_map_and_co_flat_map(parallelism: int) -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    ints, strs = env.from_collection([1, 2]), env.from_collection(["a", "b"])
    assert sorted(ints.connect(strs).map(Tag()).execute_and_collect()) == ["int 1", "int 2", "str a", "str b"]
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    words, counts = env.from_collection(["x y"]), env.from_collection([2])
    assert sorted(words.connect(counts).flat_map(Split()).execute_and_collect(), key=str) == [2, 2, "x", "y"]


class Join(sf.KeyedCoProcessFunction):
    """Enriches orders with the latest price of their product; an order without a price
    waits for it and is emitted when it arrives, or dropped at a timer 10 ms later."""

    def open(self, ctx: sf.RuntimeContext) -> None:
        self.price = ctx.get_state(sf.ValueStateDescriptor("price"))
        self.waiting = ctx.get_list_state(sf.ListStateDescriptor("waiting"))

    def process_element1(self, order: tuple, ctx: Any) -> Any:  # (product, quantity)
        price = self.price.value()
        if price is None:
            self.waiting.add(order)
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            return
        yield (order[0], order[1] * price)

    def process_element2(self, price: tuple, ctx: Any) -> Any:  # (product, price)
        self.price.update(price[1])
        for order in self.waiting.get():
            yield (order[0], order[1] * price[1])
        self.waiting.clear()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        for order in self.waiting.get():
            yield ("expired", ctx.get_current_key(), order[1])
        self.waiting.clear()


@pytest.mark.parametrize("parallelism", [1, 3])
def test_keyed_co_process_shares_state_and_timers_per_key(parallelism: int) -> None:
    orders = ScriptedSource(
        [
            Record(("apple", 2), 1),
            Record(("pear", 1), 2),
            Record(("plum", 5), 3),
            sf.Watermark(5),
            Record(("apple", 3), 20),
            sf.Watermark(30),
        ]
    )
    prices = ScriptedSource([Record(("apple", 10), 4), Record(("pear", 7), 6), sf.Watermark(40)])
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    o = env.from_source(orders, None, "orders").key_by(lambda r: r[0])
    p = env.from_source(prices, None, "prices").key_by(lambda r: r[0])
    sink = ListSink()
    o.connect(p).process(Join()).sink_to(sink)
    env.execute()
    assert sorted(sink.results, key=str) == sorted(
        [("apple", 20), ("pear", 7), ("expired", "plum", 5), ("apple", 30)], key=str
    )


def test_co_process_without_keys_uses_both_inputs() -> None:
    class Count(sf.CoProcessFunction):
        def process_element1(self, value: Any, ctx: Any) -> Any:
            yield ("left", value)

        def process_element2(self, value: Any, ctx: Any) -> Any:
            yield ("right", value)

    env = sf.StreamExecutionEnvironment()
    left, right = env.from_collection([1]), env.from_collection([2, 3])
    out = sorted(left.connect(right).process(Count()).execute_and_collect())
    assert out == [("left", 1), ("right", 2), ("right", 3)]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_connect_keeps_each_inputs_own_partitioning(parallelism: int) -> None:
    """Flink's connect() keeps each input's partitioning: ``a.connect(b.broadcast())`` gives every
    subtask of the co-map all of b (the control-stream pattern), ``rebalance()`` and a keyed input
    only spread records. b was forwarded before (each record once, whatever the parallelism)."""
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    ints, strs = env.from_collection([1, 2, 3]), env.from_collection(["a", "b"])
    broadcast = sorted(ints.connect(strs.broadcast()).map(Tag()).execute_and_collect())
    assert broadcast == ["int 1", "int 2", "int 3", *sorted(["str a", "str b"] * parallelism)]
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism)
    ints, strs = env.from_collection([1, 2, 3]), env.from_collection(["a", "b"])
    spread = ints.rebalance().connect(strs.key_by(lambda s: s)).map(Tag()).execute_and_collect()
    assert sorted(spread) == ["int 1", "int 2", "int 3", "str a", "str b"]
