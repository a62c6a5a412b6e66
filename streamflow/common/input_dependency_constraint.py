"""PyFlink's ``pyflink.common.input_dependency_constraint``: re-exports of streamflow's implementations."""

from streamflow.common import InputDependencyConstraint as InputDependencyConstraint

__all__ = ["InputDependencyConstraint"]
