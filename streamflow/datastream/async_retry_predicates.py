"""PyFlink's ``pyflink.datastream.async_retry_predicates``."""

from streamflow.async_io import empty_result_predicate as empty_result_predicate
from streamflow.async_io import exception_type_predicate as exception_type_predicate
from streamflow.async_io import has_exception_predicate as has_exception_predicate

__all__ = ["empty_result_predicate", "exception_type_predicate", "has_exception_predicate"]
