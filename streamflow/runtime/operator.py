"""The operator contract and the output that links chained operators.

Lifecycle (as Flink's StreamTask drives it): ``setup`` → ``initialize_state``
→ ``open`` → ``process_batch`` / ``process_watermark`` … → ``finish`` (end of
input, normal end only) → ``close`` (every opened operator, on every path) →
``dispose`` (every operator that was set up, on every path).

Records travel as a batch: ``records`` (a list) and ``timestamps`` (a
parallel list of event-time timestamps in ms, or ``None`` when the stream has
none). Operators never mutate a batch they received; they build new lists.
An operator hands its results to ``self.output``, which calls the next
chained operator directly or writes to channels at the end of a chain.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..functions import Function
from .context import RuntimeContext
from .events import Watermark, WatermarkStatus

if TYPE_CHECKING:
    from .context import OperatorContext


class BatchTarget:
    """Something an output can feed: an operator, or a channel writer."""

    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        raise NotImplementedError

    async def process_watermark(self, watermark: Watermark) -> None:
        raise NotImplementedError

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        raise NotImplementedError


class Output:
    """Fans an operator's results out to its main targets and side-output targets.

    The targets are the next chained operators (called directly) and the
    channel writers at the end of the chain; one loop per batch, no per-record work.
    """

    __slots__ = ("_all", "_main", "_side")

    def __init__(self, main: Sequence[BatchTarget], side: Mapping[str, Sequence[BatchTarget]]):
        self._main: tuple[BatchTarget, ...] = tuple(main)
        self._side = {tag: tuple(targets) for tag, targets in side.items()}
        self._all = self._main + tuple(t for ts in self._side.values() for t in ts)

    async def push(self, records: list, timestamps: list[int] | None) -> None:
        for target in self._main:
            await target.process_batch(records, timestamps)

    def has_side(self, tag_id: str) -> bool:
        return tag_id in self._side

    async def push_side(self, tag_id: str, records: list, timestamps: list[int] | None) -> None:
        for target in self._side.get(tag_id, ()):
            await target.process_batch(records, timestamps)

    async def emit_watermark(self, watermark: Watermark) -> None:
        for target in self._all:
            await target.process_watermark(watermark)

    async def emit_watermark_status(self, status: WatermarkStatus) -> None:
        for target in self._all:
            await target.process_watermark_status(status)


class ConvertingOutput(Output):
    """An output whose records are converted a batch at a time: the main records to a declared
    ``output_type=`` of an operator whose functions are not wrapped to convert (windows,
    connected and broadcast streams; ``api/typed.py``), and the records of a side output to its
    ``OutputTag``'s type (PyFlink's ``get_side_output`` maps with the tag's type); records of
    other side outputs pass unchanged."""

    __slots__ = ("_convert", "_inner", "_op", "_sides")

    def __init__(
        self,
        inner: Output,
        convert: Callable[[list], list] | None,
        op: StreamOperator,
        sides: dict[str, Callable[[list], list]] | None = None,
    ) -> None:
        self._inner, self._convert, self._op, self._sides = inner, convert, op, sides or {}

    async def push(self, records: list, timestamps: list[int] | None) -> None:
        if self._convert is not None:
            try:
                records = self._convert(records)
            except Exception as exc:  # a result the declared type cannot hold: the operator fails
                raise self._op.failure(exc) from None
        await self._inner.push(records, timestamps)

    def has_side(self, tag_id: str) -> bool:
        return self._inner.has_side(tag_id)

    async def push_side(self, tag_id: str, records: list, timestamps: list[int] | None) -> None:
        convert = self._sides.get(tag_id)
        if convert is not None:
            try:
                records = convert(records)
            except Exception as exc:  # a record its tag's type cannot hold: the operator fails
                raise self._op.failure(exc) from None
        await self._inner.push_side(tag_id, records, timestamps)

    async def emit_watermark(self, watermark: Watermark) -> None:
        await self._inner.emit_watermark(watermark)

    async def emit_watermark_status(self, status: WatermarkStatus) -> None:
        await self._inner.emit_watermark_status(status)


class StreamOperator(BatchTarget):
    """Base class of every operator. Subclasses override what they need.

    ``functions`` declares the user functions the operator runs (its own
    copies: see :class:`~streamflow.runtime.factory.OperatorFactory`). Each
    one that is a :class:`~streamflow.functions.Function` is opened by
    ``open`` with the operator's runtime context and closed by ``close`` (even
    when its ``open`` failed, as in Flink: ``close`` releases whatever ``open``
    got), whatever the operator kind.
    """

    output: Output
    ctx: OperatorContext
    functions: tuple[Any, ...] = ()
    _opened_functions: tuple[Function, ...] = ()
    convert_output: Callable[[list], list] | None = None  # set by api/typed.py: converted()
    convert_side: dict[str, Callable[[list], list]] | None = None  # tag id -> its type's (typed.py)

    def __init__(self, name: str) -> None:
        self.name = name
        self.uid = name

    # -- lifecycle ---------------------------------------------------------
    def setup(self, ctx: OperatorContext, output: Output) -> None:
        self.ctx = ctx
        self.name = ctx.name
        self.uid = ctx.uid
        convert, sides = self.convert_output, self.convert_side
        if convert is None and not sides:
            self.output = output
        else:
            self.output = ConvertingOutput(output, convert, self, sides)

    def initialize_state(self, restored: Any | None) -> None:
        """Restore from the operator's snapshot (None on a fresh start)."""

    async def open(self) -> None:
        """Open every user Function (once each) with this operator's runtime context."""
        unique: dict[int, Function] = {}
        for fn in self.functions:
            if isinstance(fn, Function):
                unique.setdefault(id(fn), fn)
        if not unique:
            return
        self._opened_functions = tuple(unique.values())
        context = RuntimeContext(self.ctx)
        for fn in self._opened_functions:
            try:
                result = fn.open(context)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                raise self.failure(exc) from None

    async def finish(self) -> None:
        """All input has ended: flush whatever is buffered (normal end only)."""

    async def close(self) -> None:
        """Release what ``open`` acquired. Runs on every path once ``open`` was called;
        every opened function is closed even if another one's ``close`` fails."""
        opened, self._opened_functions = self._opened_functions, ()
        error: BaseException | None = None
        for fn in reversed(opened):
            try:
                result = fn.close()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                if error is None:
                    error = self.failure(exc)
                else:
                    error.add_note(f"streamflow: also failed while closing {fn!r}: {exc!r}")
        if error is not None:
            raise error

    def dispose(self) -> None:
        """Last cleanup, on every path, for every operator that was set up."""

    # -- data --------------------------------------------------------------
    async def process_batch(self, records: list, timestamps: list[int] | None) -> None:
        await self.output.push(records, timestamps)

    async def process_watermark(self, watermark: Watermark) -> None:
        await self.output.emit_watermark(watermark)

    async def process_watermark_status(self, status: WatermarkStatus) -> None:
        await self.output.emit_watermark_status(status)

    # -- checkpoints -------------------------------------------------------
    async def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Before the snapshot of ``checkpoint_id`` (Flink's name): flush what must be durable first."""

    def snapshot_state(self, checkpoint_id: int) -> Any | None:
        """Plain data for the checkpoint (encoded by the state codec), or None."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> Awaitable[None] | None:
        """Checkpoint ``checkpoint_id`` completed (sinks commit). May be ``async def``: it is awaited."""
        return None

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass

    # -- errors ------------------------------------------------------------
    def failure(self, exc: BaseException, record: Any = None) -> BaseException:
        """Attach this operator's name and the failing record (given, or found) to ``exc``."""
        return attribute_error(exc, f"operator {self.name!r} (uid {self.uid!r})", record)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class TwoInputOperator(StreamOperator):
    """An operator with two inputs (``connect()``): the task feeds the second input's
    batches to ``process_batch2``."""

    async def process_batch2(self, records: list, timestamps: list[int] | None) -> None:
        raise NotImplementedError


_ATTRIBUTED = "_streamflow_where"


def attribute_error(exc: BaseException, where: str, record: Any = None) -> BaseException:
    """Add a note naming ``where`` (once: the innermost operator wins)."""
    if getattr(exc, _ATTRIBUTED, None) is None:
        setattr(exc, _ATTRIBUTED, where)
        note = f"streamflow: raised in {where}"
        if record is None:
            record = failing_record(exc)
        if record is not _NOT_FOUND:
            note += f" while processing record {_short_repr(record)}"
        exc.add_note(note)
    return exc


def where_raised(exc: BaseException) -> str | None:
    return getattr(exc, _ATTRIBUTED, None)


_NOT_FOUND = object()


def failing_record(exc: BaseException) -> Any:
    """The record an operator was handling when ``exc`` was raised.

    Operators loop over a batch with a variable named ``record``; the
    traceback's frames still hold it. This costs nothing on the hot path.
    """
    found: Any = _NOT_FOUND
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename.startswith(_PACKAGE_DIR) and "record" in frame.f_locals:
            found = frame.f_locals["record"]
    return found


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _package_dir() -> str:
    import os

    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_PACKAGE_DIR = _package_dir()
