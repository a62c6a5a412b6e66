"""The cases of Apache Flink's ``pyflink/datastream/tests/test_async_batch_function.py``
(apache/flink ``31da057``, the newest stored version: ``AsyncBatchFunction`` with
``AsyncDataStream.unordered_wait_batch``/``ordered_wait_batch``), on streamflow as
``test_pyflink_async_cases.py`` runs ``test_async_function.py``: the same inputs, calls and
expected outputs, sleeps and timeouts PyFlink's times ``SCALE`` (a tenth by default,
``PYFLINK_CASES_TIME_SCALE=1`` for PyFlink's own). The ``pekko.ask.timeout`` the setUp
raises is the JVM cluster's; there is none here. Nothing is left out; one extra test.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from pyflink_harness import DataStreamTestSinkFunction, assert_equals_sorted, make_env

from streamflow.common import Row, Time, Types
from streamflow.datastream import AsyncBatchFunction, AsyncDataStream

ROW = Types.ROW_NAMED(["v1", "v2"], [Types.INT(), Types.INT()])
SCALE = float(os.environ.get("PYFLINK_CASES_TIME_SCALE", "0.1"))


def sleep(seconds: float) -> Any:
    return asyncio.sleep(seconds * SCALE)


def seconds(n: float) -> Time:
    return Time.milliseconds(round(n * 1000 * SCALE))


def source(data: list[tuple[int, int]]) -> tuple[Any, Any, DataStreamTestSinkFunction]:
    env = make_env()
    env.set_parallelism(1)
    return env, env.from_collection(data, type_info=ROW), DataStreamTestSinkFunction()


class SumBatch(AsyncBatchFunction):
    async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
        return [row[0] + row[1] for row in inputs]


def test_basic_batch_execution() -> None:
    env, ds, sink = source([(1, 1), (2, 2), (3, 3), (4, 4)])

    class MyAsyncBatchFunction(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            await sleep(0.1)
            return [row[0] + row[1] for row in inputs]

    ds = AsyncDataStream.unordered_wait_batch(
        ds, MyAsyncBatchFunction(), timeout=seconds(10), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert_equals_sorted(["2", "4", "6", "8"], sink.get_results(False))


def test_batch_size_triggering() -> None:
    env, ds, sink = source([(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])

    class BatchSizeTrackingFunction(AsyncBatchFunction):
        def __init__(self) -> None:
            self.batch_sizes: list[int] = []

        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            self.batch_sizes.append(len(inputs))
            await sleep(0.05)
            return [row[0] + row[1] for row in inputs]

    ds = AsyncDataStream.unordered_wait_batch(
        ds, BatchSizeTrackingFunction(), timeout=seconds(10), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert_equals_sorted(["2", "4", "6", "8", "10"], sink.get_results(False))


def test_batch_timeout_triggering() -> None:
    env, ds, sink = source([(1, 1)])
    ds = AsyncDataStream.unordered_wait_batch(
        ds,
        SumBatch(),
        timeout=seconds(10),
        batch_size=10,
        batch_timeout=Time.milliseconds(100),
        output_type=Types.INT(),
    )
    ds.add_sink(sink)
    env.execute()
    assert sink.get_results(False) == ["2"]


def test_exception_propagation() -> None:
    env, ds, sink = source([(1, 1), (2, 2)])

    class FailingBatchFunction(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            raise Exception("Test batch failure")

    ds = AsyncDataStream.unordered_wait_batch(
        ds, FailingBatchFunction(), timeout=seconds(5), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    with pytest.raises(Exception, match="Test batch failure"):
        env.execute()


def test_timeout_handling() -> None:
    env, ds, sink = source([(1, 1), (2, 2)])

    class SlowBatchFunction(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            await sleep(10)  # longer than the timeout
            return [row[0] + row[1] for row in inputs]

        def timeout_batch(self, inputs: list[Row]) -> list[int]:
            return [0 for _ in inputs]

    ds = AsyncDataStream.unordered_wait_batch(
        ds, SlowBatchFunction(), timeout=seconds(1), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert_equals_sorted(["0", "0"], sink.get_results(False))


def test_ordered_wait_batch() -> None:
    env, ds, sink = source([(1, 1), (2, 2), (3, 3), (4, 4)])

    class MyAsyncBatchFunction(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            await sleep(0.1)
            return [row[0] + row[1] for row in inputs]

    ds = AsyncDataStream.ordered_wait_batch(
        ds, MyAsyncBatchFunction(), timeout=seconds(10), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert sink.get_results(False) == ["2", "4", "6", "8"]


@pytest.mark.parametrize("result, message", [(42, "list type"), (None, "cannot be none")])
def test_non_list_and_none_result_error(result: Any, message: str) -> None:
    """``test_non_list_result_error`` (42) and ``test_none_result_error`` (None)."""
    env, ds, sink = source([(1, 1), (2, 2)])

    class BadReturnBatchFunction(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> Any:
            return result

    ds = AsyncDataStream.unordered_wait_batch(
        ds, BadReturnBatchFunction(), timeout=seconds(5), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    with pytest.raises(Exception, match=message):
        env.execute()


def test_validation_negative_batch_size() -> None:
    _env, ds, _ = source([(1, 1)])
    with pytest.raises(Exception, match=r"(?i)positive"):
        AsyncDataStream.unordered_wait_batch(
            ds, SumBatch(), timeout=seconds(10), batch_size=-1, output_type=Types.INT()
        )


def test_validation_non_async_method() -> None:
    _env, ds, _ = source([(1, 1)])

    class NonAsyncBatchFunction(AsyncBatchFunction):
        def async_invoke_batch(self, inputs: list[Row]) -> list[int]:  # type: ignore[override]
            return [row[0] + row[1] for row in inputs]

    with pytest.raises(Exception, match="async def"):
        AsyncDataStream.unordered_wait_batch(
            ds, NonAsyncBatchFunction(), timeout=seconds(10), batch_size=2, output_type=Types.INT()
        )


@pytest.mark.parametrize("ordered", [False, True])
def test_end_of_input_flush(ordered: bool) -> None:
    """5 inputs in batches of 3: the last batch of 2 is called at the end of the input."""
    env, ds, sink = source([(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])
    wait = AsyncDataStream.ordered_wait_batch if ordered else AsyncDataStream.unordered_wait_batch
    ds = wait(ds, SumBatch(), timeout=seconds(10), batch_size=3, output_type=Types.INT())
    ds.add_sink(sink)
    env.execute()
    assert_equals_sorted(["2", "4", "6", "8", "10"], sink.get_results(False))


def test_large_batch_with_multiple_outputs() -> None:
    env, ds, sink = source([(1, 1), (2, 2)])
    ds = AsyncDataStream.unordered_wait_batch(
        ds, SumBatch(), timeout=seconds(10), batch_size=2, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert_equals_sorted(["2", "4"], sink.get_results(False))


def test_batches_and_capacity() -> None:
    """Extra: the batches are the inputs in groups of ``batch_size`` in input order, a
    partial batch is called when the queue is full (capacity 3 < batch size 4 would wait
    forever otherwise), and the i-th output goes to the i-th input, ordered."""
    env, ds, sink = source([(i, i) for i in range(1, 8)])
    seen: list[list[int]] = []

    class Recording(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[Row]) -> list[int]:
            seen.append([row[0] for row in inputs])
            return [row[0] * 10 for row in inputs]

    ds = AsyncDataStream.ordered_wait_batch(
        ds, Recording(), timeout=seconds(10), batch_size=4, capacity=3, output_type=Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert sink.get_results(False) == [str(i * 10) for i in range(1, 8)]
    assert [v for batch in seen for v in batch] == list(range(1, 8))
    assert all(len(batch) <= 3 for batch in seen)


def test_batch_timeout_calls_a_partial_batch_while_the_input_is_open() -> None:
    """Extra: ``batch_timeout`` calls a partial batch on its timer, not only at the end of the
    input: the source waits for the first batch's call before it sends its second input (had
    the timer not fired, the source would give up after 10 s and fail the job)."""
    called = asyncio.Event()
    seen: list[list[int]] = []

    class Recording(AsyncBatchFunction):
        async def async_invoke_batch(self, inputs: list[int]) -> list[int]:
            seen.append(list(inputs))
            called.set()
            return [v * 10 for v in inputs]

    async def paced() -> Any:
        yield 1
        await asyncio.wait_for(called.wait(), 10)
        yield 2

    env = make_env()
    env.set_parallelism(1)
    sink = DataStreamTestSinkFunction()
    ds = AsyncDataStream.ordered_wait_batch(
        env.from_async_iterable(paced),
        Recording(),
        timeout=seconds(10),
        batch_size=10,
        batch_timeout=Time.milliseconds(20),
        output_type=Types.INT(),
    )
    ds.add_sink(sink)
    env.execute()
    assert seen == [[1], [2]]
    assert sink.get_results(False) == ["10", "20"]
