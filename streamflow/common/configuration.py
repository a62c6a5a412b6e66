"""PyFlink's ``pyflink.common.configuration``: re-exports of ``streamflow.configuration``."""

from streamflow.configuration import Configuration as Configuration

__all__ = ["Configuration"]
