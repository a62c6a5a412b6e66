"""The window operator's fast path: tumbling event-time windows, default trigger, no evictor.

Theory of operation
-------------------
The common case does what the general path (``window_operator.py``) does with
arithmetic instead of assigner/trigger calls per element; results are identical.
Panes are ``{window: {key: acc}}`` and the timers are implied: a pane fires once when the
watermark passes ``window.max_timestamp()`` and is dropped at its cleanup time.
``_fired`` is the bookkeeping that stands in for the general path's timers: a pane that
fired (on time, or at once for a late element within the allowed lateness) is in it, so
a later watermark does not fire it again; only a late element fires a fired pane again
(``EventTimeTrigger.on_element``). After a restore the operator's watermark starts at MIN
(as in Flink, it is not part of the snapshot), so an element for a fired pane registers,
on the general path, an event-time timer for its key: ``_refire`` holds those keys per
pane, and the next watermark past the pane's end fires them (and only them). The
differential tests (tests/test_window_fast_path.py) run every scenario through both paths.

The functions here take the operator (:class:`~streamflow.runtime.window_operator.WindowOperator`)
and are called once per record batch (:func:`fast_elements`) or per watermark
(:func:`fire_panes`), never per record; the panes are tables of the keyed backend
(``window_panes.py``, the operator's ``_pane_tables``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..windowing.assigners import TumblingEventTimeWindows, require_timestamp
from ..windowing.triggers import EventTimeTrigger, Trigger
from ..windowing.windows import TimeWindow
from .detach import detached
from .events import MAX_WATERMARK, MIN_WATERMARK
from .window_batch import add_one_window
from .window_context import WindowContext, WindowFunctions

if TYPE_CHECKING:
    from .window_operator import WindowOperator

FIRE_SLICE = 1_024  # fired keys between two loop budget checks (fire_panes, process_watermark)


def fast_path_applies(assigner: Any, trigger: Trigger, evictor: Any, functions: WindowFunctions) -> bool:
    """Whether a window operator with these parts may take the fast path."""
    return (
        type(assigner) is TumblingEventTimeWindows
        and type(trigger) is EventTimeTrigger
        and evictor is None
        and not _clears(functions.process_function)  # its clear() runs on the general path
    )


def fast_elements(
    op: WindowOperator, records: list, timestamps: list[int], late: list, late_ts: list
) -> None:
    """Tumbling event-time windows, default trigger: panes are ``{window: {key: acc}}``
    and the timers are implied (every pane fires at ``window.max_timestamp()``). The
    keys each pane got are logged for incremental checkpoints (window_panes.py)."""
    touched: dict[TimeWindow, list] = {}
    if not add_one_window(op, records, timestamps, touched):  # the common batch (window_batch.py)
        _fast_loop(op, records, timestamps, late, late_ts, touched)
    op._pane_tables.log(touched)


def _fast_loop(
    op: WindowOperator,
    records: list,
    timestamps: list[int],
    late: list,
    late_ts: list,
    touched: dict[TimeWindow, list],
) -> None:
    size, offset = op.assigner.size, op.assigner.offset
    lowest = MIN_WATERMARK + size  # windows starting below it may hold Long.MIN_VALUE
    wm, lateness = op.current_watermark, op.allowed_lateness
    key_of, panes, fired = op.key_selector, op.panes, op._fired
    reduce, agg = op.fn.reduce, op.fn.aggregate
    last_start: int | None = None
    window = TimeWindow(0, 0)
    pane: dict[Any, Any] = {}
    refire: set[Any] | None = None
    max_ts = 0
    keys: list = []
    for record, ts in zip(records, timestamps, strict=True):
        start = ts - (ts - offset + size) % size
        if start != last_start:
            if start < lowest:  # the window of Long.MIN_VALUE: each record is checked (no caching)
                require_timestamp(ts)  # the "no timestamp" marker is refused, as the assigner does
            end = start + size - 1
            if min(end + lateness, MAX_WATERMARK) <= wm:  # Flink's cleanupTime: no overflow
                # late: the variables of the window in hand (last_start's) stay as they are,
                # the next record may be in that window again
                late.append(record)
                late_ts.append(ts)
                continue
            last_start, max_ts = (start if start >= lowest else None), end
            window = TimeWindow(start, start + size)
            found = panes.get(window)
            if found is None:
                found = op._pane_tables.new(window)
            pane = found
            logged = touched.get(window)
            if logged is None:
                logged = touched[window] = []
            keys = logged
            # a fired pane while the watermark is behind its end (only after a restore):
            # the general path's trigger registers a timer for the key, so it fires again
            refire = op._refire.setdefault(window, set()) if max_ts > wm and window in fired else None
        key = key_of(record)
        keys.append(key)
        acc = pane.get(key)
        if acc is None:
            if reduce is not None:
                acc = detached(record)  # the pane's own copy (detach.py)
            elif agg is not None:
                acc = agg.add(record, agg.create_accumulator())
            else:
                acc = [record]
            pane[key] = acc
        elif reduce is not None:
            acc = pane[key] = reduce(acc, record)
        elif agg is not None:
            acc = pane[key] = agg.add(record, acc)
        else:
            acc.append(record)
        if max_ts <= wm:  # within allowed lateness: a late firing updates the result
            op.backend.current_key = key  # the function's keyed state is this key's
            op._emit(key, window, acc)
            # the pane counts as fired, as the general path's EventTimeTrigger registers no
            # timer for a passed window: the next watermark must not fire it again
            fired.add(window)
        elif refire is not None:
            refire.add(key)


async def fire_panes(op: WindowOperator, wm: int) -> int:
    """Fire every pane the watermark passed (once; again only for the keys in ``_refire``),
    drop those past their cleanup time. Every ``FIRE_SLICE`` keys the output goes out and
    the job's loop budget may pause (a window over a million keys closes at one watermark).

    Returns the timers the general path would have fired (``numFiredTimers``): one per key
    of a pane's first firing (its trigger timer at ``max_timestamp()``, one with the cleanup
    timer when there is no lateness: same key, window and time), and with lateness one per
    key of a pane at its cleanup (unless at ``MAX_WATERMARK``: no cleanup timer then). A
    late element's firing is the trigger's ``FIRE`` on the element, no timer."""
    panes, fired, refire, lateness = op.panes, op._fired, op._refire, op.allowed_lateness
    due = sorted(w for w in panes if w.end - 1 <= wm and (w not in fired or w in refire))
    timers = 0
    for window in due:
        pane = panes[window]
        keys = refire.pop(window, None)
        held = list(pane)
        if keys is None:
            timers += len(held)
        chosen = held if keys is None else [k for k in held if k in keys]
        for start in range(0, len(chosen), FIRE_SLICE):
            part = chosen[start : start + FIRE_SLICE]
            _emit_pane(op, window, pane, part, not lateness)
            if len(part) == FIRE_SLICE:
                await op._between_slices()
        if lateness:
            fired.add(window)
        else:  # dropped now: its keys fired above were taken out of the pane as they fired
            await op._pane_tables.drop(window, held)
            fired.discard(window)
    for window in [w for w in fired if op.cleanup_time(w) <= wm] if lateness else ():
        if op.cleanup_time(window) < MAX_WATERMARK:
            timers += len(panes[window])
        await op._pane_tables.drop(window)
        fired.discard(window)
        refire.pop(window, None)
    return timers


def _emit_pane(op: WindowOperator, window: TimeWindow, pane: dict[Any, Any], keys: Any, take: bool) -> None:
    """``_emit`` for these keys of one pane (fast path: no evictor), with one context whose
    key is set before each call (Flink reuses its window context too). ``take``: the pane is
    dropped right after it fired, so each key's accumulator leaves the pane as it fires."""
    fn, add, ts, reduce = op.fn, op.out.add, window.end - 1, op.fn.reduce
    result = None if fn.aggregate is None else fn.aggregate.get_result
    process, ctx, backend = fn.process, WindowContext(op, None, window), op.backend
    get = pane.pop if take else pane.__getitem__
    for key in keys:
        acc = get(key)
        if acc is None:  # the function emptied the contents (returned None): nothing to fire
            continue
        if result is not None:  # a result may be the accumulator, which later adds change
            values = [result(acc) if take else detached(result(acc))]
        elif reduce is not None:  # a pane kept for late elements may change its value in place
            values = [acc if take else detached(acc)]
        else:  # a kept pane's element list is appended to by late elements (window_operator._emit)
            values = acc if take or process is None else list(acc)
        if process is None:
            add(values, ts)
        else:
            ctx.key = backend.current_key = key  # the function's keyed state is this key's
            add(process(key, ctx, values), ts)


def _clears(process_function: Any) -> bool:
    """Whether a ProcessWindowFunction overrides ``clear(context)`` (called at each window's
    cleanup: the fast path drops its panes without a per-key call)."""
    from ..functions import ProcessAllWindowFunction, ProcessWindowFunction

    if process_function is None:
        return False
    # window_all's adapter (api/all_windowed.py) clears through the user's function
    target = getattr(process_function, "clear_target", process_function)
    return getattr(type(target), "clear", None) not in (
        None,
        ProcessWindowFunction.clear,
        ProcessAllWindowFunction.clear,
    )
