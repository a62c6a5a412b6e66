"""PyFlink's ``pyflink.common.config_options``: re-exports of streamflow's implementations."""

from streamflow.common import ConfigOption as ConfigOption
from streamflow.common import ConfigOptions as ConfigOptions

__all__ = ["ConfigOption", "ConfigOptions"]
