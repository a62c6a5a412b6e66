"""Compressed input files of the file source, chosen by file extension as Flink's
``StandardDeCompressors`` does: ``.deflate`` (zlib's format, Java's ``InflaterInputStream``),
``.gz`` and ``.gzip``, ``.bz2``, ``.xz``; any other file is read as it is.

Theory of operation: a compressed file cannot be entered in the middle, so Flink reads it
as one split and its checkpointed position is the number of records read (the reader skips
them on restore). Here a position is a byte offset into the *decompressed* stream: the file
source's line splitting and offsets work on the decompressed bytes unchanged, and
:func:`open_input` seeks a restored compressed file by decompressing and dropping the bytes
before that offset (the same work as Flink's skipping of records).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, cast

__all__ = ["COMPRESSED_EXTENSIONS", "open_input"]

_SKIP_CHUNK = 1 << 16


class _InflaterFile(io.RawIOBase):
    """A read-only stream of a zlib-format (``.deflate``) file's decompressed bytes."""

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "rb")  # noqa: SIM115  (closed by close())
        self._inflater = zlib.decompressobj()
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._pending:
            if self._inflater.eof:
                return 0
            compressed = self._fh.read(_SKIP_CHUNK)
            if not compressed:
                if not self._inflater.eof:
                    raise EOFError(f"{self._fh.name}: the deflate stream ends before its end marker")
                return 0
            self._pending = self._inflater.decompress(compressed)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


def _deflate(path: Path) -> BinaryIO:
    return cast(BinaryIO, io.BufferedReader(_InflaterFile(path)))


def _gzip(path: Path) -> BinaryIO:
    return cast(BinaryIO, gzip.GzipFile(path, "rb"))


def _bzip2(path: Path) -> BinaryIO:
    return cast(BinaryIO, bz2.BZ2File(path, "rb"))


def _xz(path: Path) -> BinaryIO:
    return cast(BinaryIO, lzma.LZMAFile(path, "rb"))


_OPENERS: dict[str, Callable[[Path], BinaryIO]] = {
    ".deflate": _deflate,
    ".gz": _gzip,
    ".gzip": _gzip,
    ".bz2": _bzip2,
    ".xz": _xz,
}
COMPRESSED_EXTENSIONS = tuple(_OPENERS)


def open_input(path: Path, offset: int) -> BinaryIO:
    """``path`` opened for reading its (decompressed) bytes from ``offset`` on."""
    opener = _OPENERS.get(path.suffix)
    if opener is None:
        plain = open(path, "rb")  # noqa: SIM115  (the caller closes it)
        plain.seek(offset)
        return plain
    fh = opener(path)
    remaining = offset
    while remaining > 0:
        skipped = len(fh.read(min(remaining, _SKIP_CHUNK)))
        if skipped == 0:
            fh.close()
            raise ValueError(
                f"file source: cannot resume {path} at decompressed byte {offset}: it decompresses "
                f"to only {offset - remaining} bytes (was it replaced since the checkpoint?)"
            )
        remaining -= skipped
    return fh
