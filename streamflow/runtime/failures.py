"""Which error of a failed task group started the failure (``primary_error``)."""

from __future__ import annotations

import anyio

__all__ = ["primary_error"]


def primary_error(group: BaseExceptionGroup) -> BaseException:
    """The error that started a failure: the first one that is not a cancellation."""
    cancelled = anyio.get_cancelled_exc_class()
    fallback: BaseException | None = None
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop(0)
        if isinstance(exc, BaseExceptionGroup):
            stack[:0] = list(exc.exceptions)
        elif not isinstance(exc, cancelled):
            return exc
        elif fallback is None:
            fallback = exc
    return fallback or group
