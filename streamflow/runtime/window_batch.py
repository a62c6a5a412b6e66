"""The window fast path's common batch: every record in one window that is still open.

Theory of operation
-------------------
The fast path (tumbling event-time windows, default trigger, no evictor; see
``window_fast_path.py``) adds each record of a batch to its window's pane, with a per-record
loop that handles every case: a window that changes within the batch, a late record, a late
firing within the allowed lateness, a pane that fired before a restore (``_refire``). In the
common case none of them applies: a batch covers far less event time than a window, so its
records all fall into the one window, which the watermark has not reached and which has not
fired. :func:`add_one_window` checks that with two passes at C speed (``min`` and ``max`` of
the timestamps: the window start is monotone in the timestamp, so when the earliest and the
latest record share a window, all do), computes the keys in one ``map`` (they are the keys
the incremental checkpoint logs for the pane, in record order, as the loop logs them; a key
selector that fails names its record, found from the iterator's position, as the loop does) and
adds the records with a loop that only reads and writes the pane. Any other batch returns
``False`` untouched, for the general loop.

The result is the same pane contents, the same keys logged, in the same order. One
difference only shows in a failing job: the keys are computed before any record is added,
so when both the key selector (for a later record) and the reduce or aggregate function
(for an earlier one) would raise, the key selector's error is the one the job fails with.
"""

from __future__ import annotations

from typing import Any

from ..windowing.assigners import require_timestamp
from ..windowing.windows import TimeWindow
from .detach import detached
from .item_getters import failed_record


def add_one_window(op: Any, records: list, timestamps: list[int], touched: dict[TimeWindow, list]) -> bool:
    """Add ``records`` to their pane when all of them fall into one window that is neither
    late nor fired (module doc); ``touched`` gets the pane's keys. ``False``: nothing done."""
    if not records or len(records) != len(timestamps):
        return False  # (a length mismatch fails in the general loop's zip(strict=True))
    size, offset = op.assigner.size, op.assigner.offset
    lo, hi = min(timestamps), max(timestamps)
    require_timestamp(lo)  # Long.MIN_VALUE is the "no timestamp" marker: refused, as the assigner does
    start = lo - (lo - offset + size) % size
    if hi - (hi - offset + size) % size != start or start + size - 1 <= op.current_watermark:
        return False
    window = TimeWindow(start, start + size)
    if window in op._fired:
        return False
    it = iter(records)
    try:
        keys = list(map(op.key_selector, it))
    except Exception as exc:
        raise op.failure(exc, failed_record(records, it)) from None  # named, as the loop names it
    pane = op.panes.get(window)
    if pane is None:
        pane = op._pane_tables.new(window)
    logged = touched.get(window)
    if logged is None:
        touched[window] = keys
    else:
        logged.extend(keys)
    get = pane.get
    reduce, agg = op.fn.reduce, op.fn.aggregate
    if reduce is not None:
        for key, record in zip(keys, records, strict=True):
            acc = get(key)
            pane[key] = detached(record) if acc is None else reduce(acc, record)  # detach.py
    elif agg is not None:
        add, create = agg.add, agg.create_accumulator
        for key, record in zip(keys, records, strict=True):
            acc = get(key)
            pane[key] = add(record, create() if acc is None else acc)
    else:
        for key, record in zip(keys, records, strict=True):
            acc = get(key)
            if acc is None:
                pane[key] = [record]
            else:
                acc.append(record)
    return True
