"""PyFlink's ``env.execute_async()`` in a program without an event loop.

PyFlink's ``execute_async`` submits the job and returns a ``JobClient`` at once; its methods
return futures (``client.get_job_execution_result().result()`` waits for the end). A
streamflow job runs in an asyncio event loop: called where no loop is running, as in a
PyFlink program, ``execute_async`` starts one in a thread of its own, starts the job there
and returns :class:`BlockingJobClient`, whose methods return ``concurrent.futures.Future``
objects (``result()``, ``done()``, ``cancel()``, ``exception()``, ``add_done_callback()``:
what PyFlink's ``CompletableFuture`` offers). The loop stops once the job has ended and
its result is read. Inside a running loop ``execute_async`` stays a coroutine
(``client = await env.execute_async()``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .blocking import loop_factory

if TYPE_CHECKING:
    from .environment import StreamExecutionEnvironment

__all__ = ["BlockingJobClient"]

class BlockingJobClient:
    """A job started by ``execute_async()`` outside an event loop (PyFlink's ``JobClient``)."""

    def __init__(self, env: StreamExecutionEnvironment, job_name: str) -> None:
        factory = loop_factory()
        self._loop = factory() if factory is not None else asyncio.new_event_loop()
        self._env = env
        name = f"streamflow job {job_name!r}"
        self._thread = threading.Thread(target=self._run_loop, name=name, daemon=True)
        self._thread.start()
        try:
            self._client = self._submit(env._execute_async(job_name)).result()
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            raise
        self._result = self._submit(self._client.get_job_execution_result())
        self._result.add_done_callback(lambda _: self._loop.call_soon_threadsafe(self._loop.stop))

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def _submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        if self._loop.is_closed() or not self._thread.is_alive():
            coro.close()
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            done.set_exception(RuntimeError(f"job {self._client.job_name!r} has ended"))
            return done
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def get_job_id(self) -> str:
        return str(self._client.get_job_id())

    def get_job_status(self) -> concurrent.futures.Future[Any]:
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        done.set_result(self._client.get_job_status())
        return done

    def get_job_execution_result(self) -> concurrent.futures.Future[Any]:
        return self._result

    def cancel(self) -> concurrent.futures.Future[Any]:
        if self._result.done():
            done: concurrent.futures.Future[Any] = concurrent.futures.Future()
            done.set_result(None)
            return done
        return self._submit(self._client.cancel())

    def trigger_savepoint(self, savepoint_directory: str | None = None) -> concurrent.futures.Future[Any]:
        return self._submit(self._client.trigger_savepoint(savepoint_directory))

    def stop_with_savepoint(
        self, advance_to_end_of_event_time: bool = False, savepoint_directory: str | None = None
    ) -> concurrent.futures.Future[Any]:
        """Stop the job with a synchronous savepoint (``JobClient.stop_with_savepoint``): the
        sources halt at its barrier, with drain after the maximum watermark; the job ends
        FINISHED once its sinks are notified. The future resolves to the savepoint's path."""
        stop = self._client.stop_with_savepoint(advance_to_end_of_event_time, savepoint_directory)
        return self._submit(stop)
