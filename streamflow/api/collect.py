"""``execute_and_collect()``: the job runs while the caller iterates, a batch at a time.

Theory of operation
-------------------
PyFlink's ``execute_and_collect()`` returns at once; the job runs in the cluster and
the iterator fetches results as they come. Here the job runs in an event loop that
belongs to the iterator (an :class:`asyncio.Runner` with asyncio's own loop, see below)
and that runs only while the caller asks for more:

* ``execute_and_collect()`` builds and starts the job in that loop (graph errors are
  raised there, at the call) and returns a :class:`~streamflow.api.surface.CloseableIterator`
  (with a ``limit``, as PyFlink, a list of the first records: :class:`~streamflow.api.surface.CollectedList`).
* Each step runs the loop until the collect sink's channel (a :class:`QueueSink`, capacity
  ``CHANNEL_RECORDS``) holds ``STEP_RECORDS`` records, or a writer waits for room, or the
  job ended (``QueueSink.wait_ready``); the loop stops, and what the channel holds is taken
  (``QueueSink.take_ready_lists``): the record lists the sink was handed, not a copy (a copy
  into one list touched every record once more and once more when freed: about 100
  instructions and 5-9 first-level cache misses a record of W2's collected form, cachegrind,
  helper ``fast``). Taking them makes room, but the writers resume
  only when the loop runs again, at the next step: the job never runs ahead of the caller
  by more than the channel holds, and at most ``CHANNEL_RECORDS`` records are in flight.
  (Until 2026-11-27 the sink drained the channel *inside* the loop, so the job refilled it
  before the loop stopped: twice the records in flight for the same number of steps.)
* Steps are small (two batches): the records between the job and the caller are few. The
  caller's records of one step are freed before the job runs again, so the job's next
  records reuse that memory while it is still in the processor's cache, and few records
  live long enough to be visited by a young-generation collection. With steps of 8,192
  records and a channel of 4,096, a keyed running sum over 1M records (W2, bench/run.py)
  spent about 0.2 s in a thousand collections and ran about 25 % slower.
* A step costs a loop start and stop: 16-25 us of CPU with asyncio's loop, 60-90 us with
  uvloop's, which creates and closes a socket pair (its signal wake-up) and re-arms
  ``signal.set_wakeup_fd`` in every ``run_until_complete`` in the main thread (measured at
  load 8: a thousand steps per million records, about 5 % of W2's collected form). The job
  itself hardly uses the loop between steps, so the iterator runs asyncio's loop;
  ``execute()`` and ``execute_async()`` keep uvloop. One long-lived task (``_pump``) waits for
  each step and stops the loop, and the next step resumes it with ``run_forever``: about 6 us
  a step against 15 us for ``run_until_complete`` of a new coroutine (its task, its done
  callback). A failure of the pump (the job's error surfaces through the channel, not here)
  stops the loop as well and is raised from the iteration.
* The caller's ``for`` walks those lists at C speed (``itertools.chain`` over one list
  iterator per list; those lists are only read here): no Python
  call per record, memory bounded by the channel, and each record read while its batch
  is still in the processor's cache (collecting a million records into one list first
  and iterating it afterwards cost a third more than the whole hand-written loop).
* After the sink's last end-of-input the iterator waits for the job's result, so every
  operator has finished and closed before iteration ends, and a failure is raised from
  the iteration; then it closes the loop.
* ``close()`` (also leaving a ``with`` block, or a ``limit`` reached) cancels a job still
  running, waits for it to end and closes the loop; the list iterator in hand is moved to
  its end (``__setstate__``; the list itself is left whole, since another consumer of the
  same stream may have been handed it too), so every iterator over the results ends. An
  iterator dropped unclosed is closed when it is garbage-collected; if that cannot run
  (another loop running in this thread), the cause is logged.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Generator, Iterator
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from ..connectors.queue_sink import QueueSink
from .blocking import refuse_running_loop
from .surface import CloseableIterator, CollectedList

if TYPE_CHECKING:
    from ..runtime.job import JobClient
    from .datastream import DataStream

__all__ = ["execute_and_collect"]

_log = logging.getLogger(__name__)
STEP_RECORDS = 1024  # records the job produces per step (the loop stops and restarts between steps)
CHANNEL_RECORDS = 1024  # the collect sink's channel: the records in flight at most
_EMPTY: Iterator[Any] = iter([])  # a list iterator over nothing (``__setstate__`` is a no-op on it)


def execute_and_collect(
    stream: DataStream, job_name: str, limit: int | None
) -> CloseableIterator | CollectedList:
    refuse_running_loop(
        "execute_and_collect() runs the job in an event loop of its own and cannot be called "
        "inside a running event loop; use `async for record in stream.execute_and_collect_async()`"
    )
    sink = QueueSink(CHANNEL_RECORDS)
    env = stream._env
    node = stream.sink_to(sink).set_parallelism(1)._node  # Flink's collect sink: one subtask
    runner = asyncio.Runner()  # asyncio's loop: cheaper to stop and restart (module doc)
    try:
        client = runner.run(env._execute_async(job_name))
    except BaseException:
        runner.close()
        raise
    finally:
        env._graph.remove(node)  # when execute failed before it cleared the graph
    results = _Results(runner, client, sink)
    if limit is None:
        return CloseableIterator(chain.from_iterable(results.batches()), results.close)
    try:  # PyFlink returns the first ``limit`` records as a list
        return CollectedList(islice(chain.from_iterable(results.batches()), limit))
    finally:
        results.close()


class _Results:
    """The job's output, one list of records per step, and the loop that runs the job."""

    def __init__(self, runner: asyncio.Runner, client: JobClient, sink: QueueSink) -> None:
        self._runner = runner
        self._client = client
        self._sink = sink
        self._current: Any = _EMPTY  # a list iterator (``__setstate__`` ends it)
        self._started = self._closed = False
        # pending while the pump has stopped the loop with a step ready, and waits for it (``_pump``)
        self._resume: asyncio.Future[None] | None = None
        self._gen = self._batches()

    def batches(self) -> Iterator[Iterator[Any]]:
        return self._gen

    def _batches(self) -> Generator[Iterator[Any], None, None]:
        self._started = True
        loop, client = self._runner.get_loop(), self._client
        take_ready = self._sink.take_ready_lists
        # one task waits for each step and stops the loop (``_pump``); the next step resumes it:
        # a step costs one ``run_forever`` (about 6 us), not ``run_until_complete`` of a new
        # coroutine in a new task (about 15 us; a thousand steps a million records). Not
        # asyncio.Runner.run, which would swap the SIGINT handler at every step.
        pump = loop.create_task(self._pump())

        def stop(_task: asyncio.Task[None]) -> None:  # a failure of the pump stops the loop too
            loop.stop()

        pump.add_done_callback(stop)
        ended = False
        try:
            while True:
                while not pump.done() and (self._resume is None or self._resume.done()):
                    loop.run_forever()
                if pump.done():
                    pump.result()  # the pump ends only by a failure (raised here) or a cancel
                lists = take_ready(client)  # the loop is stopped: the job waits for room
                if lists is None:
                    break
                for records in lists:
                    # the channel's own lists, not a copy: an iterator over each, so that
                    # close() can end it without emptying a list another consumer may hold
                    self._current = it = iter(records)
                    yield it
                # the caller is done with this step's records (an exhausted list iterator drops
                # its list): free them before the job runs again, so it reuses their memory
                self._current = it = _EMPTY
                lists = records = None  # type: ignore[assignment]
                resume = self._resume
                assert resume is not None  # pending: the pump stopped the loop with this step
                resume.set_result(None)
            self._current = _EMPTY
            _stop_pump(pump, stop)
            loop.run_until_complete(self._result())
            ended = True
        finally:
            self._current.__setstate__(sys.maxsize)  # ends an iteration over the records in hand
            self._closed = True
            _stop_pump(pump, stop)
            if not ended:
                self._shutdown()
            self._runner.close()

    async def _pump(self) -> None:
        """Run the job step by step: once the collect channel holds a step's worth (or a writer
        waits for room, or the job ended: ``QueueSink.wait_ready``), stop the loop and wait for
        the consumer to take it (``_resume``, set by ``_batches``)."""
        loop = asyncio.get_running_loop()
        wait_ready, client = self._sink.wait_ready, self._client
        while True:
            await wait_ready(client, STEP_RECORDS)
            self._resume = loop.create_future()
            loop.stop()
            await self._resume

    async def _result(self) -> None:
        await self._client.get_job_execution_result()
        if self._client.rest is not None:
            await self._client.rest.wait_stopped()

    def _shutdown(self) -> None:
        """Cancel the job (iteration stopped early) and wait for it to end."""
        try:
            self._runner.run(self._client.cancel())
        except Exception as exc:  # the job failed meanwhile, or no loop can run here
            _log.warning("execute_and_collect(): while cancelling job %r: %r", self._client.job_name, exc)

    def close(self) -> None:
        """Stop: cancel the job if it still runs, close the loop (idempotent)."""
        if self._closed:
            return
        if self._started:
            self._gen.close()  # its finally clause does the work
            return
        self._closed = True  # never iterated: the generator's own cleanup never runs
        try:
            self._shutdown()
        finally:
            self._runner.close()

    def __del__(self) -> None:
        if not self._closed:
            try:
                self.close()
            except Exception as exc:
                _log.warning("execute_and_collect(): an unclosed result iterator: %r", exc)


def _stop_pump(pump: asyncio.Task[None], stop: Callable[[asyncio.Task[None]], None]) -> None:
    """Cancel the pump without its cancellation stopping the loop (a later run would end early)."""
    pump.remove_done_callback(stop)
    pump.cancel()
