"""The GC policy freezes long-lived objects while jobs run, and leaves the collector as it found
it when the last job ends (issue 12 item 4)."""

from __future__ import annotations

import asyncio
import gc
import logging
from pathlib import Path
from typing import Any

import pytest
from test_checkpointing import checkpoint_then_cancel

import streamflow as sf
from streamflow.runtime.gc_policy import GC_POLICY

SEEN_FROZEN: list[int] = []


def collect_on_some(i: int) -> int:
    if i % 400 == 0:
        SEEN_FROZEN.append(gc.get_freeze_count())  # O(frozen objects): only now and then
        gc.collect()  # a full collection: with the threshold at 0 ms it counts as "long"
    return i


@pytest.fixture
def any_pause_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GC_POLICY, "freeze_after_ms", 0.0)


async def _run(env: sf.StreamExecutionEnvironment, n: int = 1_000) -> dict:
    env.set_batch_size(10)
    env.from_collection(range(n)).map(collect_on_some).add_sink(lambda _v: None)
    client = await env.execute_async("gc")
    return (await client.get_job_execution_result()).metrics


async def test_a_long_full_collection_freezes_until_the_job_ends(
    any_pause_is_long: None, caplog: pytest.LogCaptureFixture
) -> None:
    assert gc.get_freeze_count() == 0
    SEEN_FROZEN.clear()
    callbacks = list(gc.callbacks)
    with caplog.at_level(logging.INFO, logger="streamflow.gc"):
        metrics = await _run(sf.StreamExecutionEnvironment())
    assert max(SEEN_FROZEN) > 0  # frozen while the job ran
    assert metrics["process.gcFreezes"] >= 1
    assert metrics["process.gcFullCollections"] >= 3
    assert gc.get_freeze_count() == 0  # unfrozen at the end
    assert gc.callbacks == callbacks  # the timing hook is gone
    text = caplog.text
    assert "gc.freeze()" in text and "gc.unfreeze()" in text


async def test_freezing_can_be_turned_off(any_pause_is_long: None) -> None:
    SEEN_FROZEN.clear()
    before = GC_POLICY.freezes
    await _run(sf.StreamExecutionEnvironment({"streamflow.gc.freeze": "false"}))
    assert max(SEEN_FROZEN) == 0
    assert GC_POLICY.freezes == before
    assert gc.get_freeze_count() == 0


async def test_the_applications_own_freeze_is_left_alone(
    any_pause_is_long: None, caplog: pytest.LogCaptureFixture
) -> None:
    gc.freeze()
    try:
        mine = gc.get_freeze_count()
        assert mine > 0
        with caplog.at_level(logging.INFO, logger="streamflow.gc"):
            await _run(sf.StreamExecutionEnvironment())
        assert gc.get_freeze_count() >= mine  # not unfrozen under the application's feet
        assert "does not unfreeze" in caplog.text
    finally:
        gc.unfreeze()


async def test_restoring_a_checkpoint_freezes_the_restored_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()
    emitted = 0

    async def records() -> Any:  # 500 records, then (first run) held open until cancelled
        nonlocal emitted
        for i in range(500):
            emitted += 1
            yield (i % 50, 1)
        await release.wait()

    def job() -> sf.StreamExecutionEnvironment:
        env = sf.StreamExecutionEnvironment().enable_checkpointing(10_000)
        env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path))
        env.from_async_iterable(records).uid("src").key_by(lambda e: e[0]).sum(1).uid("sum").add_sink(
            lambda _v: None
        )
        return env

    # a checkpoint of the running job (the final checkpoint of a finished one keeps no keyed
    # state: FLIP-147)
    first = await job().execute_async("restored")
    sums = [b for t in first.execution.tasks for b in t._keyed_backends()]

    def ready() -> bool:
        return emitted >= 500 and sum(len(t) for b in sums for t in b._tables.values()) >= 50

    await checkpoint_then_cancel(first, ready)
    release.set()
    before = GC_POLICY.freezes
    with caplog.at_level(logging.INFO, logger="streamflow.gc"):
        client = await job().execute_async("restored")
        assert client.execution.restore is not None
        assert gc.get_freeze_count() > 0
        await client.get_job_execution_result()
    # at the build (what was read) and after the task decoded the chain in slices (the state)
    assert GC_POLICY.freezes == before + 2
    assert "after restoring" in caplog.text and "decoded its restored state" in caplog.text
    assert gc.get_freeze_count() == 0


async def test_keyed_tables_are_frozen_while_still_empty() -> None:
    """An empty dict is not tracked by the collector, so a bare ``gc.freeze()`` at open left the
    tables out: they became tracked at their first tuple value and grew up in the generations a
    full collection visits (34-64 ms per collection at 1M keys). Now they are frozen at open:
    ``gc.get_objects()`` (every generation, not the frozen objects) never holds the table."""
    keys = 1_000
    found: list[int] = []
    seen = [0]

    class Look(sf.SinkFunction):
        def write_batch(self, values: list) -> None:
            seen[0] += len(values)
            if seen[0] >= 2 * keys and not found:
                tables = [
                    o for o in gc.get_objects()
                    if type(o) is dict and len(o) >= keys and all(type(k) is int for k in o)
                ]  # fmt: skip
                found.append(len(tables))

    env = sf.StreamExecutionEnvironment().set_batch_size(100)
    records = [(i % keys, 1) for i in range(3 * keys)]
    env.from_collection(records).key_by(lambda e: e[0]).sum(1).add_sink(Look())
    client = await env.execute_async("frozen-tables")
    await client.get_job_execution_result()
    assert found == [0]


KEPT: list[list[int]] = []


def allocate(i: int) -> int:
    KEPT.extend([i] for _ in range(60_000))  # tracked objects, alive: they count towards a collection
    return i


async def test_a_task_collects_the_young_generation_before_it_waits_for_input() -> None:
    """A job that keeps up with its input collects the young garbage while it waits, not in the
    middle of the next batch: with the automatic threshold out of reach, the young count a batch
    left behind is gone once the task waits for its next record."""
    counts: list[int] = []
    more = asyncio.Event()

    async def records() -> Any:
        yield 1
        for _ in range(20):  # the task takes the record, runs the map, and waits for the next
            await asyncio.sleep(0)
        counts.append(gc.get_count()[0])
        more.set()

    before = gc.get_threshold()
    gc.set_threshold(100_000, *before[1:])  # the map's 60,000 objects: past half, not past all
    try:
        env = sf.StreamExecutionEnvironment()
        env.from_async_iterable(records).map(allocate).add_sink(lambda _v: None)
        client = await env.execute_async("idle-gc")
        await asyncio.wait_for(more.wait(), 30)
        await client.get_job_execution_result()
    finally:
        gc.set_threshold(*before)
        KEPT.clear()
    assert counts and counts[0] < 30_000, counts  # 60,000 and more after the map; collected when idle


def test_track_keeps_a_string_keyed_table_on_the_string_lookup() -> None:
    """track() makes each table tracked without a key of another type: one non-str key switches
    a dict to the general lookup for good (equal strings compared through rich comparison, a
    few hundred instructions a record more for a keyed job). The two layouts differ in size:
    a dict of str keys stores no hashes in its entries."""
    import sys

    from streamflow.runtime.gc_policy import track

    empty: dict = {}
    filled = {"k0": 0}
    track([empty, filled])
    assert gc.is_tracked(empty) and gc.is_tracked(filled)
    assert filled == {"k0": 0} and empty == {}
    plain: dict = {"x": []}  # the same history of inserts and deletes, with str keys only
    del plain["x"]
    for i in range(5):
        empty[f"k{i}"] = plain[f"k{i}"] = i
        filled[f"k{i}"] = i
    assert sys.getsizeof(empty) == sys.getsizeof(plain)
    assert sys.getsizeof(filled) == sys.getsizeof({f"k{i}": i for i in range(5)})
    general: dict = {object(): []}  # what an object() probe did: the general layout
    del general[next(iter(general))]
    for i in range(5):
        general[f"k{i}"] = i
    assert sys.getsizeof(general) > sys.getsizeof(plain)  # the check sees the difference
    assert list(filled) == [f"k{i}" for i in range(5)]  # the order is kept


SEEN_THRESHOLDS: list[tuple[int, int, int]] = []


def note_thresholds(i: int) -> int:
    if i % 100 == 0:
        SEEN_THRESHOLDS.append(gc.get_threshold())
    return i


async def _run_noting(
    env: sf.StreamExecutionEnvironment, change_to: tuple[int, int, int] | None = None
) -> None:
    SEEN_THRESHOLDS.clear()

    def change(i: int) -> int:
        if change_to is not None and i == 500:
            gc.set_threshold(*change_to)  # the application, while the job runs
        return i

    env.set_batch_size(10)
    env.from_collection(range(1_000)).map(note_thresholds).map(change).add_sink(lambda _v: None)
    client = await env.execute_async("thresholds")
    await client.get_job_execution_result()


async def test_full_collections_are_rarer_while_jobs_run_and_as_before_after() -> None:
    """Window panes hold records in lists that reach generation 2 (gc_policy module doc):
    while a job runs the third threshold is ``FULL_EVERY``, and the application's come back."""
    from streamflow.runtime.gc_policy import FULL_EVERY

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        await _run_noting(sf.StreamExecutionEnvironment())
        assert SEEN_THRESHOLDS and set(SEEN_THRESHOLDS) == {(700, 10, FULL_EVERY)}
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(700, 10, 500)  # already rarer: left alone
        await _run_noting(sf.StreamExecutionEnvironment())
        assert set(SEEN_THRESHOLDS) == {(700, 10, 500)}
        gc.set_threshold(0, 10, 10)  # switched off by threshold: left alone
        await _run_noting(sf.StreamExecutionEnvironment())
        assert set(SEEN_THRESHOLDS) == {(0, 10, 10)}
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*before)


async def test_thresholds_the_application_sets_while_a_job_runs_stay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        with caplog.at_level(logging.INFO, logger="streamflow.gc"):
            await _run_noting(sf.StreamExecutionEnvironment(), change_to=(1_000, 20, 30))
        assert gc.get_threshold() == (1_000, 20, 30)  # not put back under the application's feet
        assert "(1000, 20, 30) stay" in caplog.text
    finally:
        gc.set_threshold(*before)
