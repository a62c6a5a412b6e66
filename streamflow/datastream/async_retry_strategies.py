"""PyFlink's ``pyflink.datastream.async_retry_strategies``."""

from streamflow.async_io import NO_RETRY_STRATEGY as NO_RETRY_STRATEGY
from streamflow.async_io import ExponentialBackoffDelayRetryStrategy as ExponentialBackoffDelayRetryStrategy
from streamflow.async_io import FixedDelayRetryStrategy as FixedDelayRetryStrategy

__all__ = ["NO_RETRY_STRATEGY", "ExponentialBackoffDelayRetryStrategy", "FixedDelayRetryStrategy"]
