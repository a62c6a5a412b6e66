"""PyFlink's ``pyflink.datastream.checkpointing_mode``: re-exports of streamflow's implementations."""

from streamflow.datastream import CheckpointingMode as CheckpointingMode

__all__ = ["CheckpointingMode"]
