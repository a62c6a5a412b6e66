"""PyFlink's ``pyflink.datastream.async_retry_strategies``."""

from streamflow.async_io import NO_RETRY_STRATEGY as NO_RETRY_STRATEGY
from streamflow.async_io import ExponentialBackoffDelayRetryStrategy as ExponentialBackoffDelayRetryStrategy
from streamflow.async_io import FixedDelayRetryStrategy as FixedDelayRetryStrategy
from streamflow.async_io import NoRetryStrategy as NoRetryStrategy
from streamflow.async_io import RetryPredicate as RetryPredicate

__all__ = [
    "NO_RETRY_STRATEGY",
    "ExponentialBackoffDelayRetryStrategy",
    "FixedDelayRetryStrategy",
    "NoRetryStrategy",
    "RetryPredicate",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
