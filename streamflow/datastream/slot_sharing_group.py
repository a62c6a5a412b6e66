"""PyFlink's ``pyflink.datastream.slot_sharing_group``: re-exports of streamflow's implementations."""

from streamflow.datastream import MemorySize as MemorySize
from streamflow.datastream import SlotSharingGroup as SlotSharingGroup

__all__ = ["MemorySize", "SlotSharingGroup"]
