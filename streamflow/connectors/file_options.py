"""PyFlink's file connector options that fit streamflow's file connectors.

``FileEnumeratorProvider`` and ``FileSplitAssignerProvider`` (``FileSource.for_record_stream_format
(...).set_file_enumerator(...)`` / ``.set_split_assigner(...)``) and ``BucketAssigner``
(``FileSink.for_row_format(...).with_bucket_assigner(...)``) are real here where their choice is
what streamflow does anyway:

* the file enumerators: streamflow's ``FileSource`` lists the given paths (directories
  recursively) and reads each file as one split, which is Flink's non-splittable enumerator;
  the splittable one only splits large files so several readers share one file, which
  changes no record (logged);
* the split assigner: Flink's only one, ``locality_aware_split_assigner()``, prefers splits
  on the reader's host; one streamflow process has one host (logged);
* ``BucketAssigner`` (``file_buckets.py``): ``base_path_bucket_assigner()`` (every file in the
  base path) and ``date_time_bucket_assigner(format_str, timezone_id)`` (a sub-directory per
  value of the formatted processing time) are both real. Flink's default assigner is the
  date-time one; streamflow's is the base path: a sink built without ``with_bucket_assigner``
  logs a warning that its files go into the base path.

File compaction: ``enable_compact(strategy, compactor)`` compacts the rolled files before they
are published (``file_compaction.py``); ``disable_compact()`` turns it off (the default).
"""

from __future__ import annotations

import logging
from typing import Any

from .file_buckets import BucketAssigner
from .file_compaction import FileCompactor, FileCompactStrategy

__all__ = ["BucketAssigner", "FileEnumeratorProvider", "FileSplitAssignerProvider"]

log = logging.getLogger(__name__)


class FileEnumeratorProvider:
    """Which files a ``FileSource`` reads, and how it splits them (PyFlink's static factories)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def default_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("splittable")

    @staticmethod
    def default_non_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("non-splittable")

    def __repr__(self) -> str:
        return f"FileEnumeratorProvider({self.kind})"


class FileSplitAssignerProvider:
    """How a ``FileSource`` hands splits to its readers (PyFlink's static factory)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def locality_aware_split_assigner() -> FileSplitAssignerProvider:
        return FileSplitAssignerProvider("locality-aware")

    def __repr__(self) -> str:
        return f"FileSplitAssignerProvider({self.kind})"


class SourceOptions:
    """``set_file_enumerator`` / ``set_split_assigner`` of ``FileSourceBuilder``."""

    def set_file_enumerator(self, file_enumerator: FileEnumeratorProvider) -> Any:
        _check(file_enumerator, FileEnumeratorProvider, "set_file_enumerator")
        if file_enumerator.kind == "splittable":
            log.info(
                "FileSource: the splittable file enumerator reads each file as one split here "
                "(splitting a file among readers changes no record)"
            )
        return self

    def set_split_assigner(self, split_assigner: FileSplitAssignerProvider) -> Any:
        _check(split_assigner, FileSplitAssignerProvider, "set_split_assigner")
        log.info("FileSource: the locality-aware split assigner is accepted (one process, one host)")
        return self


class SinkOptions:
    """``with_bucket_assigner`` / ``enable_compact`` / ``disable_compact`` of the row-format builder."""

    _bucket_assigner: BucketAssigner | None = None
    _compaction: tuple[FileCompactStrategy | None, FileCompactor | None] = (None, None)

    def with_bucket_assigner(self, bucket_assigner: BucketAssigner) -> Any:
        _check(bucket_assigner, BucketAssigner, "with_bucket_assigner")
        self._bucket_assigner = bucket_assigner
        return self

    def _warn_default_bucket_assigner(self, base_path: Any) -> None:
        """Flink's row-format builder defaults to ``DateTimeBucketAssigner`` (a sub-directory per
        hour, ``yyyy-MM-dd--HH``); this sink writes into the base path: said once per sink built
        without an explicit assigner, so the different layout is never silent."""
        if self._bucket_assigner is None:
            log.warning(
                "FileSink %s: no bucket assigner given; Flink's default, DateTimeBucketAssigner, writes "
                "into an hourly sub-directory (yyyy-MM-dd--HH) of the base path, streamflow writes "
                "every part file into the base path itself (call with_bucket_assigner("
                "BucketAssigner.base_path_bucket_assigner()) to say so and silence this, or "
                "with_bucket_assigner(BucketAssigner.date_time_bucket_assigner()) for Flink's layout)",
                base_path,
            )

    def enable_compact(self, strategy: FileCompactStrategy, compactor: FileCompactor) -> Any:
        """Compact the rolled files before they are published (Flink's ``enableCompact``)."""
        _check(strategy, FileCompactStrategy, "enable_compact")
        _check(compactor, FileCompactor, "enable_compact")
        self._compaction = (strategy, compactor)
        return self

    def disable_compact(self) -> Any:
        """No compaction (the default); a checkpoint taken with compaction still restores: its
        compacted files are published, the others become visible as they are."""
        self._compaction = (None, None)
        return self


def _check(value: Any, cls: type, method: str) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"{method}() expects a {cls.__name__}, got {value!r}")
