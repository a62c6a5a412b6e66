"""The window fast path's one-window batch (``runtime/window_batch.py``) against the per-record
loop it short-cuts: the same output, late records, pane contents and logged keys, for every
window function kind, on seeded random multi-record batches that sometimes fall into one open
window and sometimes span windows, arrive late or land in a fired window."""

from __future__ import annotations

import random
from typing import Any

import pytest
from window_harness import FUNCTIONS, WindowHarness

from streamflow.runtime import window_fast_path
from streamflow.runtime.events import Watermark
from streamflow.windowing import TumblingEventTimeWindows

KEYS = ["a", "b", "c", "d", "e"]


def _script(seed: int) -> list[tuple[str, Any]]:
    """Batches of 1-40 records around an advancing event time (out of order by up to 300 ms,
    some 1.5 s late; some all in the watermark's window), with watermarks (ascending, some
    exactly at a window's last millisecond) and a few snapshots restored into a fresh
    operator (whose watermark starts over, so fired panes get records again) between them."""
    rng = random.Random(seed)
    now, wm, script = 0, -1, []
    for _ in range(120):
        draw = rng.random()
        if draw < 0.05:
            script.append(("snap", None))
        elif draw < 0.3:
            wm = max(wm, now - rng.randrange(0, 400))
            if rng.random() < 0.3:
                wm = wm // 1000 * 1000 + 999
            script.append(("w", wm))
        else:
            batch = []
            in_wm_window = wm >= 0 and rng.random() < 0.15  # all in the window the watermark is in
            for _ in range(rng.randrange(1, 41)):
                late = rng.random() < 0.05
                ts = max(0, now - (1500 if late else 0) - rng.randrange(0, 300))
                if in_wm_window:
                    ts = wm // 1000 * 1000 + rng.randrange(0, 1000)
                batch.append(((rng.choice(KEYS), rng.randrange(100)), ts))
            script.append(("b", batch))
            now += rng.randrange(0, 250)
    return script


async def _run(kind: str, lateness: int, seed: int) -> tuple[list, list, dict, list]:
    harness = WindowHarness(TumblingEventTimeWindows.of(1000), FUNCTIONS[kind], lateness=lateness, fast=True)
    logged: list[dict] = []

    def watch(op: Any) -> None:
        log = op._pane_tables.log

        def logging(touched: dict) -> None:
            logged.append({w: list(k) for w, k in touched.items()})
            log(touched)

        op._pane_tables.log = logging

    watch(harness.op)
    await harness.op.open()
    for step, arg in _script(seed):
        if step == "snap":
            await harness.step(("snap",))
            watch(harness.op)
        elif step == "w":
            await harness.op.process_watermark(Watermark(arg))
        else:
            await harness.op.process_batch([r for r, _ in arg], [t for _, t in arg])
    panes = {w: dict(p) for w, p in harness.op.panes.items()}
    await harness.op.close()
    return harness.main.events, harness.late.events, panes, logged


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
@pytest.mark.parametrize("lateness", [0, 700])
async def test_one_window_batches_equal_the_per_record_loop(
    kind: str, lateness: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = declined = 0
    real = window_fast_path.add_one_window

    def counted(*args: Any) -> bool:
        nonlocal taken, declined
        done = real(*args)
        taken, declined = taken + done, declined + (not done)
        return done

    for seed in range(3):
        monkeypatch.setattr(window_fast_path, "add_one_window", counted)
        batched = await _run(kind, lateness, seed)
        monkeypatch.setattr(window_fast_path, "add_one_window", lambda *args: False)
        looped = await _run(kind, lateness, seed)
        assert batched == looped, (kind, lateness, seed)
    # both ways were exercised: one open window, and batches the loop had to take
    assert taken > 20 and declined > 20, (taken, declined)
