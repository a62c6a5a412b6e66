"""An exactly-once row-format file sink with PyFlink's names (``FileSink.for_row_format``): the
sink and its builder.

A part file moves ``.{name}.inprogress`` -> ``.{name}.pending`` -> ``{name}`` (visible once the
checkpoint that covers it completed, or at the job's end without checkpoints); the theory of
operation is in ``file_sink_writer.py`` (the writer, one subtask's part files), the policies and
names in ``file_sink_policy.py``, buckets in ``file_buckets.py``, compaction in
``file_compaction.py``.
"""

from __future__ import annotations

import os
from typing import Any

from ..runtime.operator import StreamOperator
from .base import Sink
from .file_buckets import BucketAssigner
from .file_compaction import FileCompactor, FileCompactStrategy
from .file_options import SinkOptions
from .file_sink_parts import FileSinkError
from .file_sink_policy import (
    BulkEncoder,
    DefaultRollingPolicy,
    Encoder,
    OnCheckpointRollingPolicy,
    OutputFileConfig,
    OutputFileConfigBuilder,
    RollingPolicy,
)
from .file_sink_writer import FileSinkOperator

__all__ = [
    "DefaultRollingPolicy",
    "Encoder",
    "FileSink",
    "FileSinkError",
    "FileSinkOperator",
    "OnCheckpointRollingPolicy",
    "OutputFileConfig",
    "OutputFileConfigBuilder",
    "RollingPolicy",
]


class FileSink(Sink):
    """Exactly-once row-format sink: build with ``FileSink.for_row_format(path, encoder)...build()``."""

    has_committer = True  # Flink's plan shows a FileSink's Writer and Committer

    def __init__(
        self,
        base_path: str | os.PathLike[str],
        encoder: Encoder,
        output_file_config: OutputFileConfig | None = None,
        rolling_policy: RollingPolicy | None = None,
        bucket_check_interval: int = 60_000,
        bucket_assigner: BucketAssigner | None = None,
        compact_strategy: FileCompactStrategy | None = None,
        file_compactor: FileCompactor | None = None,
    ) -> None:
        self.base_path = os.fspath(base_path)
        self.encoder = self._declared_encoder = encoder
        self.output_file_config = output_file_config or OutputFileConfig()
        self.rolling_policy = rolling_policy or RollingPolicy.default_rolling_policy()
        if bucket_check_interval < 1:
            raise ValueError(f"bucket check interval must be >= 1 ms, got {bucket_check_interval}")
        self.bucket_check_interval = bucket_check_interval
        #: which directory a batch's part file is in (default: the base path)
        self.bucket_assigner = bucket_assigner or BucketAssigner.base_path_bucket_assigner()
        #: compaction of the rolled files before they are published (file_compaction.py), or None
        self.compact_strategy, self.file_compactor = compact_strategy, file_compactor

    @staticmethod
    def for_row_format(base_path: str | os.PathLike[str], encoder: Encoder) -> RowFormatBuilder:
        return RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str | os.PathLike[str], writer_factory: BulkEncoder) -> BulkFormatBuilder:
        """Flink's bulk-format sink: part files roll at every checkpoint (and only then, Flink's
        ``OnCheckpointRollingPolicy``). The writers are streamflow's: ``CsvBulkWriters.for_schema``
        (Parquet, ORC and Avro writers, Flink's Java format jars, are not implemented)."""
        if not isinstance(writer_factory, BulkEncoder):
            raise TypeError(
                f"FileSink.for_bulk_format: a bulk writer factory such as CsvBulkWriters.for_schema(schema) "
                f"is needed, got {writer_factory!r}"
            )
        return BulkFormatBuilder(base_path, writer_factory)

    def set_input_type(self, type_info: Any, execution_config: Any) -> None:
        """Flink's InputTypeConfigurable: a typed stream's records are written as their type
        formats them (``Encoder.for_type``); an untyped stream's as ``str(record)``."""
        from ..types.typeinfo import TypeInformation

        if isinstance(type_info, TypeInformation):
            self.encoder = self._declared_encoder.for_type(type_info)
        else:
            self.encoder = self._declared_encoder

    def create_operator(self, name: str) -> StreamOperator:
        return FileSinkOperator(name, self)


class StreamingFileSink(FileSink):
    """PyFlink's legacy ``StreamingFileSink`` (for ``add_sink``): the same exactly-once sink as
    :class:`FileSink`, row or bulk format."""

    @staticmethod
    def for_row_format(base_path: str | os.PathLike[str], encoder: Encoder) -> RowFormatBuilder:
        return RowFormatBuilder(base_path, encoder, StreamingFileSink)

    @staticmethod
    def for_bulk_format(base_path: str | os.PathLike[str], writer_factory: BulkEncoder) -> BulkFormatBuilder:
        return FileSink.for_bulk_format(base_path, writer_factory)._as(StreamingFileSink)


class RowFormatBuilder(SinkOptions):
    def __init__(
        self, base_path: str | os.PathLike[str], encoder: Encoder, sink_class: type[FileSink] = FileSink
    ) -> None:
        self._base_path, self._encoder, self._sink_class = base_path, encoder, sink_class
        self._config: OutputFileConfig | None = None
        self._policy: RollingPolicy | None = None
        self._check_interval = 60_000

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> RowFormatBuilder:
        self._config = output_file_config
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> RowFormatBuilder:
        self._policy = rolling_policy
        return self

    def with_bucket_check_interval(self, interval: int) -> RowFormatBuilder:
        """How often (ms of processing time) the rolling policy looks at an idle file."""
        self._check_interval = interval
        return self

    def build(self) -> FileSink:
        self._warn_default_bucket_assigner(self._base_path)
        cls = self._sink_class
        return cls(self._base_path, self._encoder, self._config, self._policy, self._check_interval,
                   self._bucket_assigner, *self._compaction)


class BulkFormatBuilder(RowFormatBuilder):
    """``FileSink.for_bulk_format(path, factory)``'s builder: as the row-format one, but a bulk
    file rolls on checkpoints only (Flink's ``CheckpointRollingPolicy``; the default
    ``OnCheckpointRollingPolicy``)."""

    def __init__(self, base_path: str | os.PathLike[str], writer_factory: BulkEncoder) -> None:
        super().__init__(base_path, writer_factory)
        self._policy = OnCheckpointRollingPolicy()

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> BulkFormatBuilder:
        if not isinstance(rolling_policy, OnCheckpointRollingPolicy):
            raise TypeError(
                "a bulk-format FileSink rolls its part files on checkpoints only: use "
                f"RollingPolicy.on_checkpoint_rolling_policy(), got {rolling_policy!r}"
            )
        self._policy = rolling_policy
        return self

    def _as(self, sink_class: type[FileSink]) -> BulkFormatBuilder:
        self._sink_class = sink_class
        return self
