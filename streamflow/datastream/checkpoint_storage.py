"""PyFlink's ``pyflink.datastream.checkpoint_storage``: re-exports of streamflow's implementations."""

from streamflow.datastream import CheckpointStorage as CheckpointStorage
from streamflow.datastream import CustomCheckpointStorage as CustomCheckpointStorage
from streamflow.datastream import FileSystemCheckpointStorage as FileSystemCheckpointStorage
from streamflow.datastream import JobManagerCheckpointStorage as JobManagerCheckpointStorage

__all__ = [
    "CheckpointStorage",
    "CustomCheckpointStorage",
    "FileSystemCheckpointStorage",
    "JobManagerCheckpointStorage",
]
