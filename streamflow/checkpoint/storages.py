"""PyFlink's checkpoint storage classes and externalized-checkpoint retention, mapped on
streamflow's two places for checkpoints.

streamflow keeps a job's checkpoints either in memory (no storage directory: a restart
within the process restores from them, nothing survives the process) or in a directory
on the local file system (``chk-<id>`` directories, see :mod:`streamflow.checkpoint.storage`).
PyFlink's classes name the same two choices:

* :class:`JobManagerCheckpointStorage` -- Flink keeps checkpoints in the JobManager's heap;
  here: in memory, as when no directory is configured. With a ``checkpoint_path`` Flink
  persists each checkpoint's metadata there, and this storage's state is small and written
  inline in that metadata, so the path holds whole checkpoints a job restores from: here
  the checkpoints are written to that directory, as :class:`FileSystemCheckpointStorage`
  writes them. ``max_state_size`` (``DEFAULT_MAX_STATE_SIZE``, 5 MiB, Flink's) is recorded
  and answered by ``get_max_state_size``; Flink fails a checkpoint with a larger state,
  streamflow does not limit it (logged).
* :class:`FileSystemCheckpointStorage` -- checkpoints in a directory. ``file://`` URIs and
  plain paths are accepted; other schemes (``hdfs://``, ``s3://``) need Flink's file
  systems and are refused with that reason. A ``file://`` URI with a host
  (``file://var/checkpoints``) is kept by the storage object, as PyFlink keeps it
  (``get_checkpoint_path()`` answers it), but a job refuses to checkpoint there, a
  documented difference: Flink's local file system ignores the host, so ``var`` is
  silently not part of the path (``/checkpoints``), which is rarely what was meant; the
  error says to write ``file:///var/checkpoints``.
  ``file_state_size_threshold`` and ``write_buffer_size`` tune Flink's stream writers;
  streamflow writes each entry as one file with one atomic rename, so they are recorded and
  logged, not used.
* :class:`CustomCheckpointStorage` wraps a JVM object and is refused.

The configuration keys ``execution.checkpointing.storage`` (``jobmanager`` or
``filesystem``) and ``execution.checkpointing.dir`` map onto the same choices in
``StreamExecutionEnvironment.configure``: ``jobmanager`` with a directory configured is
``JobManagerCheckpointStorage(dir)``, as Flink's ``createFromConfig`` builds it.
"""

from __future__ import annotations

import enum
import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import NotSupportedError

log = logging.getLogger(__name__)


class ExternalizedCheckpointRetention(enum.Enum):
    """What happens to a job's retained checkpoints when it is cancelled (PyFlink's names).

    streamflow's checkpoints in a storage directory are always externalized: the directory is
    where a restarted program restores from, so they are kept when a job is cancelled
    (``RETAIN_ON_CANCELLATION``). The other two values are accepted and logged as not
    applied; the retention of the newest ``set_max_retained_checkpoints(n)`` applies always."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"


class _HostUri:
    """A ``file://`` URI with a host, kept as given; using it as a directory is refused."""

    def __init__(self, uri: str, error: ValueError) -> None:
        self.uri, self.error = uri.rstrip("/"), error

    def directory(self) -> Path:
        raise ValueError(str(self.error))


def _storage_path(path: str | Path) -> Path | _HostUri:
    try:
        return local_path(path)
    except ValueError as exc:
        if urlparse(str(path)).scheme == "file":  # only a host: PyFlink accepts it until used
            return _HostUri(str(path), exc)
        raise


def _directory(path: Path | _HostUri | None) -> Path | None:
    return path.directory() if isinstance(path, _HostUri) else path


def _shown(path: Path | _HostUri | None) -> str | None:
    return None if path is None else path.uri if isinstance(path, _HostUri) else str(path)


def local_path(path: str | Path, what: str = "checkpoint path") -> Path:
    """A plain path or a ``file://`` URI as a local path; other schemes are refused."""
    if isinstance(path, Path):
        return path
    text = str(path)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(
                f"{what} {text!r}: a file:// URI must name a local path (no host; Flink's local file "
                f"system would ignore the host {parsed.netloc!r}): write file:///{parsed.netloc}{parsed.path}"
            )
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:  # (a one-letter scheme is a Windows drive)
        raise ValueError(
            f"{what} {text!r}: streamflow checkpoints to the local file system only (a path or a "
            f"file:// URI); the {parsed.scheme}:// scheme needs Flink's JVM file systems"
        )
    return Path(text)


class CheckpointStorage:
    """Base class of PyFlink's checkpoint storages (for ``isinstance`` checks)."""

    def directory(self) -> Path | None:
        """The storage directory, or None for checkpoints kept in memory."""
        raise NotImplementedError


class JobManagerCheckpointStorage(CheckpointStorage):
    """Checkpoints kept in memory (Flink: the JobManager's heap), or written to
    ``checkpoint_path`` when one is given (Flink persists them there as metadata with the
    state inline)."""

    #: Flink's default maximal size of a state in this storage (5 MiB); recorded, not enforced
    DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024

    def __init__(self, checkpoint_path: str | Path | None = None, max_state_size: int | None = None) -> None:
        self._path = _storage_path(checkpoint_path) if checkpoint_path is not None else None
        if max_state_size is not None:
            if max_state_size <= 0:
                raise ValueError(f"max_state_size must be positive, got {max_state_size}")
            log.info(
                "JobManagerCheckpointStorage: max_state_size=%d is recorded; in-memory checkpoints "
                "are not size-limited in streamflow",
                max_state_size,
            )
        self._max_state_size = max_state_size

    def get_max_state_size(self) -> int:
        if self._max_state_size is None:
            return self.DEFAULT_MAX_STATE_SIZE
        return self._max_state_size

    def get_checkpoint_path(self) -> str | None:
        """The directory the checkpoints are written to, or None (kept in memory)."""
        return _shown(self._path)

    def directory(self) -> Path | None:
        return _directory(self._path)

    def __repr__(self) -> str:
        return f"JobManagerCheckpointStorage({'' if self._path is None else repr(_shown(self._path))})"


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints in a directory of the local file system."""

    def __init__(
        self,
        checkpoint_path: str | Path,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int | None = None,
    ) -> None:
        self._path = _storage_path(checkpoint_path)
        for name, value in (
            ("file_state_size_threshold", file_state_size_threshold),
            ("write_buffer_size", write_buffer_size),
        ):
            if value is not None and value != -1:
                log.info(
                    "FileSystemCheckpointStorage: %s=%s is recorded, not used: streamflow writes "
                    "each checkpoint entry as one file with one atomic rename",
                    name,
                    value,
                )
        self._threshold = file_state_size_threshold
        self._write_buffer_size = write_buffer_size

    def get_checkpoint_path(self) -> str:
        return str(_shown(self._path))

    def get_min_file_size_threshold(self) -> int:
        return self._threshold if self._threshold is not None else 20 * 1024

    def get_write_buffer_size(self) -> int:
        return self._write_buffer_size if self._write_buffer_size not in (None, -1) else 4096

    def directory(self) -> Path | None:
        return _directory(self._path)

    def __repr__(self) -> str:
        return f"FileSystemCheckpointStorage({_shown(self._path)!r})"


class CustomCheckpointStorage(CheckpointStorage):
    """PyFlink's wrapper of a JVM checkpoint storage object: refused (there is no JVM)."""

    def __init__(self, j_custom_checkpoint_storage: Any = None) -> None:
        raise NotSupportedError(
            "CustomCheckpointStorage wraps a Java CheckpointStorage object, which needs Flink's JVM; "
            "streamflow stores checkpoints in memory (JobManagerCheckpointStorage()) or in a local "
            "directory (FileSystemCheckpointStorage(path))"
        )

    def directory(self) -> Path | None:  # pragma: no cover - never constructed
        raise NotImplementedError
