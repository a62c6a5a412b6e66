################################################################################
#  Licensed to the Apache Software Foundation (ASF) under one
#  or more contributor license agreements.  See the NOTICE file
#  distributed with this work for additional information
#  regarding copyright ownership.  The ASF licenses this file
#  to you under the Apache License, Version 2.0 (the
#  "License"); you may not use this file except in compliance
#  with the License.  You may obtain a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
# limitations under the License.
################################################################################
"""The cases of PyFlink's ``pyflink/datastream/tests/test_async_function.py`` (Flink 2.2's
Python async I/O; the DataStream docs' async I/O page has no Python tab), ported as the
``test_data_stream.py`` cases are: the same inputs, API calls and expected outputs, with
``pyflink`` reading ``streamflow``. Two changes, each said where it is made: the sleeps,
timeouts and backoffs are PyFlink's times ``SCALE``, a tenth by default so the suite stays
quick (the relations between them are kept: a call that sleeps past its timeout still
does); ``PYFLINK_CASES_TIME_SCALE=1`` runs them with PyFlink's own times. And where a case
reaches into the JVM (a Java
per-element watermark generator, the JVM configuration) the port uses streamflow's own
equivalent.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import pytest
from pyflink_harness import DataStreamTestSinkFunction, make_env

from streamflow.common import Configuration, Row, Time, Types, WatermarkStrategy
from streamflow.common.watermark_strategy import TimestampAssigner
from streamflow.datastream import (
    AsyncDataStream,
    AsyncFunction,
    AsyncRetryStrategy,
    StreamExecutionEnvironment,
)
from streamflow.eventtime import Watermark, WatermarkGenerator, WatermarkOutput

ROW = Types.ROW_NAMED(["v1", "v2"], [Types.INT(), Types.INT()])
DATA = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]


def source(data: list[tuple[int, int]] = DATA) -> tuple[Any, Any, DataStreamTestSinkFunction]:
    """The case's ``self.env`` (parallelism 1), its collection and the test sink."""
    env = make_env()
    env.set_parallelism(1)
    return env, env.from_collection(data, type_info=ROW), DataStreamTestSinkFunction()


SCALE = float(os.environ.get("PYFLINK_CASES_TIME_SCALE", "0.1"))


def sleep(seconds: float) -> Any:
    return asyncio.sleep(seconds * SCALE)  # PyFlink's sleep, scaled


def seconds(n: float) -> Time:
    """PyFlink's ``Time.seconds(n)``, scaled."""
    return Time.milliseconds(round(n * 1000 * SCALE))


def test_unordered_mode() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(2)
            return [value[0] + value[1]]

        def timeout(self, value: Row):
            return [value[0] + value[1]]

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    ds.add_sink(sink)
    env.execute()
    assert sorted(sink.get_results(False)) == sorted(["2", "4", "6", "8", "10"])


def test_ordered_mode() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(random.randint(1, 2))
            return [value[0] + value[1]]

        def timeout(self, value: Row):
            return [value[0] + value[1]]

    ds = AsyncDataStream.ordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    ds.add_sink(sink)
    env.execute()
    assert sink.get_results(False) == ["2", "4", "6", "8", "10"]


class SecondColumnTimestampAssigner(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


class PerElementWatermarkGenerator(WatermarkGenerator):
    """(The case uses the JVM's ``PerElementWatermarkGenerator``: a watermark per record.)"""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(event_timestamp))


def test_watermark() -> None:
    env, ds, sink = source()
    watermark_strategy = WatermarkStrategy.for_generator(
        PerElementWatermarkGenerator
    ).with_timestamp_assigner(SecondColumnTimestampAssigner())
    ds = ds.assign_timestamps_and_watermarks(watermark_strategy)

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(random.randint(1, 3))
            return [value[0] + value[1]]

        def timeout(self, value: Row):
            return [value[0] + value[1]]

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    ds.add_sink(sink)
    env.execute()
    # note that we use assert_equals instead of assert_equals_sorted (the watermark after each
    # record keeps unordered mode's output in input order)
    assert sink.get_results(False) == ["2", "4", "6", "8", "10"]


def test_non_iterable_result() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(2)
            return value[0] + value[1]

        def timeout(self, value: Row):
            return value[0] + value[1]

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    ds.add_sink(sink)
    with pytest.raises(Exception, match="The result of AsyncFunction should be of list type"):
        env.execute()


def test_none_result() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(10)
            return None

        def timeout(self, value: Row):
            return None

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(1), 2, Types.INT())
    ds.add_sink(sink)
    with pytest.raises(Exception, match="The result of AsyncFunction cannot be none"):
        env.execute()


def test_raise_exception_in_async_invoke() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            raise Exception("encountered an exception")

        def timeout(self, value: Row):
            # raise the same exception to make sure test case is stable in all cases
            raise Exception("encountered an exception")

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    ds.add_sink(sink)
    with pytest.raises(Exception, match="encountered an exception"):
        env.execute()


def test_raise_exception_in_timeout() -> None:
    env, ds, sink = source([(1, 1), (2, 2), (3, 3)])

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(10)
            return [value[0] + value[1]]

        def timeout(self, value: Row):
            raise Exception("encountered an exception")

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(2), 2, Types.INT())
    ds.add_sink(sink)
    with pytest.raises(Exception, match="encountered an exception"):
        env.execute()


def test_processing_timeout() -> None:
    env, ds, sink = source()

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(10)
            return [value[0] + value[1]]

        def timeout(self, value: Row):
            return [value[0] - value[1]]

    ds = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(1), 2, Types.INT())
    ds.add_sink(sink)
    env.execute()
    assert sink.get_results(False) == ["0", "0", "0", "0", "0"]


def test_async_with_retry() -> None:
    env, ds, sink = source([(1, 1), (2, 2), (3, 3)])

    class MyAsyncFunction(AsyncFunction):
        def __init__(self):
            self.retries_1 = {}
            self.retries_2 = {}

        async def async_invoke(self, value: Row):
            await sleep(1)
            if value in self.retries_2:
                return [value[0] + value[1]]
            elif value in self.retries_1:
                self.retries_2[value] = True
                return [value[0] + value[1] + 1]
            else:
                self.retries_1[value] = True
                raise ValueError("failed the first time")

        def timeout(self, value: Row):
            return [value[0] + value[1]]

    def result_predicate(result: list[int]):
        return result[0] % 2 == 1

    def exception_predicate(exception: Exception):
        return "failed the first time" in str(exception)

    async_retry_strategy = AsyncRetryStrategy.fixed_delay(
        max_attempts=5,
        backoff_time_millis=round(1000 * SCALE),
        result_predicate=result_predicate,
        exception_predicate=exception_predicate,
    )
    ds = AsyncDataStream.unordered_wait_with_retry(
        ds, MyAsyncFunction(), seconds(10), async_retry_strategy, 2, Types.INT()
    )
    ds.add_sink(sink)
    env.execute()
    assert sorted(sink.get_results(False)) == ["2", "4", "6"]


def test_run_async_function_in_thread_mode() -> None:
    """EmbeddedThreadAsyncFunctionTests: PyFlink refuses AsyncFunction in its 'thread' execution
    mode. streamflow has no process/thread modes (functions run in the program's own
    interpreter and event loop): the setting is accepted and logged, and the async function
    runs, so the port checks the result instead of PyFlink's refusal (listed in docs/pyflink.md)."""
    config = Configuration()
    config.set_string("python.execution-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(config)
    ds = env.from_collection(DATA, type_info=ROW)

    class MyAsyncFunction(AsyncFunction):
        async def async_invoke(self, value: Row):
            await sleep(2)
            return [value[0] + value[1]]

    result = AsyncDataStream.unordered_wait(ds, MyAsyncFunction(), seconds(5), 2, Types.INT())
    with result.execute_and_collect() as results:
        assert sorted(results) == [2, 4, 6, 8, 10]
