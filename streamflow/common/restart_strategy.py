"""PyFlink's ``pyflink.common.restart_strategy``: re-exports of streamflow's implementations."""

from streamflow.common import RestartStrategies as RestartStrategies
from streamflow.common import RestartStrategyConfiguration as RestartStrategyConfiguration

__all__ = ["RestartStrategies", "RestartStrategyConfiguration"]
