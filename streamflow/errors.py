"""The one base class of the errors streamflow raises itself.

``except streamflow.StreamflowError`` catches every framework error (a graph
that cannot run, a checkpoint that cannot be read or restored, a malformed
input record, a sink that cannot write); each also derives from the builtin
it refines (``ValueError``, ``OSError``, ``RuntimeError``) so existing
handlers keep working. Errors raised by user code are not wrapped: they reach
the caller as they are, with a note naming the operator and the record.
"""

from __future__ import annotations


class StreamflowError(Exception):
    """Base of every error streamflow raises itself."""


class NotSupportedError(StreamflowError, NotImplementedError):
    """A PyFlink name or setting streamflow does not support (the message says why and what to use)."""
