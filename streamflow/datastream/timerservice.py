"""PyFlink's ``pyflink.datastream.timerservice``: re-exports of streamflow's implementations."""

from streamflow.datastream import TimerService as TimerService

__all__ = ["TimerService"]
