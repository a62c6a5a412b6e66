"""PyFlink's ``pyflink.datastream.connectors.file_system``: re-exports of streamflow's file connectors."""

from streamflow.api.pyflink_names import FILE_SYSTEM_REFUSALS
from streamflow.connectors.file_sink import FileSink as FileSink
from streamflow.connectors.file_sink import OutputFileConfig as OutputFileConfig
from streamflow.connectors.file_sink import RollingPolicy as RollingPolicy
from streamflow.connectors.file_sink import StreamingFileSink as StreamingFileSink
from streamflow.connectors.files import FileSource as FileSource
from streamflow.connectors.files import FileSourceBuilder as FileSourceBuilder
from streamflow.connectors.files import StreamFormat as StreamFormat

BucketAssigner = FILE_SYSTEM_REFUSALS["BucketAssigner"]
BulkFormat = FILE_SYSTEM_REFUSALS["BulkFormat"]
FileCompactStrategy = FILE_SYSTEM_REFUSALS["FileCompactStrategy"]
FileCompactor = FILE_SYSTEM_REFUSALS["FileCompactor"]
FileEnumeratorProvider = FILE_SYSTEM_REFUSALS["FileEnumeratorProvider"]
FileSplitAssignerProvider = FILE_SYSTEM_REFUSALS["FileSplitAssignerProvider"]

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
