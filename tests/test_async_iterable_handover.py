"""An async iterable's long synchronous runs are handed over to the job in pieces
(``connectors/collection.py``: ``HANDOVER`` records at a time, for the first ``HANDOVER_MAX``
records of a run), so the first records of a run do not wait for the whole run to be made and
processed; an iterator that never waits still fills whole batches after that."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import streamflow as sf
from streamflow.connectors.collection import HANDOVER, HANDOVER_MAX


class Batches(sf.SinkFunction):
    sizes: list[int] = []

    def write_batch(self, values: list) -> None:
        Batches.sizes.append(len(values))


def _run(make: object) -> list[int]:
    Batches.sizes = []
    env = sf.StreamExecutionEnvironment().set_batch_size(512)
    env.from_async_iterable(make).map(lambda x: x).add_sink(Batches())
    env.execute("handover")
    return Batches.sizes


def test_a_burst_reaches_the_job_in_pieces() -> None:
    """Bursts of 200 records made without waiting, a wait between them (a paced source
    catching up): every batch has at most HANDOVER records (without the hand-over, one batch
    of 200 per burst)."""

    async def bursts() -> AsyncIterator[int]:
        for burst in range(5):
            for i in range(200):
                yield burst * 200 + i
            await asyncio.sleep(0.001)

    sizes = _run(bursts)
    assert sum(sizes) == 1_000
    assert max(sizes) <= HANDOVER, sizes


def test_a_source_that_never_waits_still_fills_whole_batches() -> None:
    """After HANDOVER_MAX records of one run, no more hand-overs: the batches are full again."""

    async def flat_out() -> AsyncIterator[int]:
        for i in range(20_000):
            yield i

    sizes = _run(flat_out)
    assert sum(sizes) == 20_000
    assert sum(1 for s in sizes if s <= HANDOVER) <= HANDOVER_MAX // HANDOVER + 1, sizes[:50]
    assert sum(1 for s in sizes if s == 512) >= 30, sizes


def test_short_bursts_are_not_split() -> None:
    """Runs shorter than HANDOVER reach the job whole: one batch per run."""

    async def short_bursts() -> AsyncIterator[int]:
        for _ in range(50):
            for i in range(HANDOVER - 2):
                yield i
            await asyncio.sleep(0.001)

    sizes = _run(short_bursts)
    assert sizes == [HANDOVER - 2] * 50, sizes
