"""PyFlink's ``pyflink.datastream.connectors.file_system``: re-exports of streamflow's file connectors."""

from streamflow.api.pyflink_names import FILE_SYSTEM_REFUSALS
from streamflow.connectors.file_buckets import BucketAssigner as BucketAssigner
from streamflow.connectors.file_compaction import FileCompactor as FileCompactor
from streamflow.connectors.file_compaction import FileCompactStrategy as FileCompactStrategy
from streamflow.connectors.file_options import FileEnumeratorProvider as FileEnumeratorProvider
from streamflow.connectors.file_options import FileSplitAssignerProvider as FileSplitAssignerProvider
from streamflow.connectors.file_sink import FileSink as FileSink
from streamflow.connectors.file_sink import OutputFileConfig as OutputFileConfig
from streamflow.connectors.file_sink import RollingPolicy as RollingPolicy
from streamflow.connectors.file_sink import StreamingFileSink as StreamingFileSink
from streamflow.connectors.files import FileSource as FileSource
from streamflow.connectors.files import FileSourceBuilder as FileSourceBuilder
from streamflow.connectors.files import StreamFormat as StreamFormat

BulkFormat = FILE_SYSTEM_REFUSALS["BulkFormat"]

__all__ = [
    "BucketAssigner",
    "BulkFormat",
    "FileCompactStrategy",
    "FileCompactor",
    "FileEnumeratorProvider",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "FileSplitAssignerProvider",
    "OutputFileConfig",
    "RollingPolicy",
    "StreamFormat",
    "StreamingFileSink",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports  # noqa: E402

__getattr__ = _reexports(__name__)
