"""PyFlink's ``pyflink.metrics.metricbase``: re-exports of streamflow's implementations."""

from streamflow.metrics import Counter as Counter
from streamflow.metrics import Distribution as Distribution
from streamflow.metrics import Meter as Meter
from streamflow.metrics import Metric as Metric
from streamflow.metrics import MetricGroup as MetricGroup

__all__ = ["Counter", "Distribution", "Meter", "Metric", "MetricGroup"]
