"""PyFlink's ``pyflink.datastream.time_domain``."""

from streamflow.functions import TimeDomain as TimeDomain

__all__ = ["TimeDomain"]
