"""PyFlink's ``pyflink.common.completable_future``: re-exports of streamflow's implementations."""

from streamflow.common import CompletableFuture as CompletableFuture

__all__ = ["CompletableFuture"]
