"""A connected (two-input) task across checkpoints and a failure, ported from Flink's
``flink-tests/src/test/java/org/apache/flink/test/checkpointing/CoStreamCheckpointingITCase.java``
(``testCoStreamCheckpointingProgram``).

Flink's program: ``[source -> filter -> map] -> [co-flat-map] -> [map] -> [keyBy/reduce -> sink]``
where the co-flat-map connects the filtered stream with the source itself (both inputs of
the two-input task come from the same upstream subtasks) and keeps only the first input;
the reducer fails once. Flink counts, in each function's operator state (ListCheckpointed),
the elements it saw, and checks every count is exactly the number of strings. streamflow, as
PyFlink, has no user-facing operator state, so the exactly-once check moves into the sink:
it counts, in its checkpointed state, every running ``(prefix, count)`` the keyed reduce
emits (``ValidatingSink`` of ``test_window_checkpointing_flink.py``), so each prefix's
running counts ``1..n`` must each arrive exactly once. Barriers of both inputs of the
two-input task come from the same source subtask; the checkpoints are aligned and unaligned.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_window_checkpointing_flink import Progress, ValidatingSink

import streamflow as sf

NUM_STRINGS = 2_000
PREFIXES = 40


def _strings() -> list[str]:
    """``StringGeneratingSourceFunction``: string i starts with chr(i % 40 + 40), then 5-14
    random characters."""
    rng = random.Random(7)
    return [
        chr(i % PREFIXES + 40)
        + "".join(chr(rng.randrange(20_000) + 33) for _ in range(rng.randrange(10) + 5))
        for i in range(NUM_STRINGS)
    ]


def _source(progress: Progress, strings: list[str]) -> Any:
    """Slow until two checkpoints completed, stalling at a fifth of the input until then."""

    async def records() -> AsyncIterator[str]:
        for i, s in enumerate(strings):
            if progress.completed < 2 and i >= NUM_STRINGS // 5:
                while progress.completed < 2:
                    await asyncio.sleep(0.002)
            yield s
            if i % 25 == 0:
                await asyncio.sleep(0.001)

    return records


class _LeftIdentity(sf.CoFlatMapFunction):
    """``LeftIdentityCoRichFlatMapFunction``: the first input passes, the second is ignored."""

    def flat_map1(self, value: Any) -> Any:
        yield value

    def flat_map2(self, value: Any) -> Any:
        return iter(())


class _OnceFailingReducer(sf.ReduceFunction):
    """``OnceFailingReducer``: one failure between 40 % and 70 % of the input."""

    def __init__(self, progress: Progress, calls: list[int]) -> None:
        self.progress, self.calls = progress, calls

    def reduce(self, a: tuple, b: tuple) -> tuple:
        self.calls[0] += 1
        if not self.progress.failed and self.progress.completed >= 2 and self.calls[0] >= NUM_STRINGS // 2:
            self.progress.failed = True
            raise RuntimeError("injected failure")
        return (a[0], a[1] + b[1])


@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
@pytest.mark.parametrize("parallelism", [1, 4])
def test_co_stream_checkpointing_program(tmp_path: Path, parallelism: int, unaligned: bool) -> None:
    """testCoStreamCheckpointingProgram: every element counted exactly once through a
    self-connected two-input task, a keyed reduce and a failure."""
    strings = _strings()
    progress = Progress()
    env = sf.StreamExecutionEnvironment().set_parallelism(parallelism).set_batch_size(16)
    env.enable_checkpointing(10)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage_dir(tmp_path / "chk")
    if unaligned:
        config.enable_unaligned_checkpoints()
    env.set_restart_strategy(sf.RestartStrategies.fixed_delay_restart(2, 0))
    stream = env.from_async_iterable(_source(progress, strings)).uid("src").set_parallelism(1).rebalance()
    (
        stream.filter(lambda s: len(s) < 100)
        .uid("filter")
        .connect(stream)
        .flat_map(_LeftIdentity())
        .uid("co-flat-map")
        .map(lambda s: (s[0], 1))
        .uid("prefix-count")
        .start_new_chain()
        .map(lambda pc: pc)
        .uid("counter")
        .key_by(lambda pc: pc[0])
        .reduce(_OnceFailingReducer(progress, [0]))
        .uid("reduce")
        .set_parallelism(1)  # one copy of the failing function: one count, one failure
        .sink_to(ValidatingSink(progress))
        .uid("sink")
        .set_parallelism(1)
    )
    env.execute("co-stream checkpointing")
    assert progress.failed, "the failure was not injected"
    [seen] = progress.final.values()
    per_prefix = Counter(s[0] for s in strings)
    assert seen == {(p, n): 1 for p, total in per_prefix.items() for n in range(1, total + 1)}
