"""PyFlink's ``pyflink.datastream.connectors.file_system``: re-exports of streamflow's file connectors."""

from streamflow.connectors.file_sink import FileSink as FileSink
from streamflow.connectors.file_sink import OutputFileConfig as OutputFileConfig
from streamflow.connectors.file_sink import RollingPolicy as RollingPolicy
from streamflow.connectors.file_sink import StreamingFileSink as StreamingFileSink
from streamflow.connectors.files import FileSource as FileSource
from streamflow.connectors.files import FileSourceBuilder as FileSourceBuilder
from streamflow.connectors.files import StreamFormat as StreamFormat

__all__ = ["FileSink", "FileSource", "FileSourceBuilder", "OutputFileConfig", "RollingPolicy", "StreamFormat",
           "StreamingFileSink"]
