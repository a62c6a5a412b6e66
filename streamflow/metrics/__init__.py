"""PyFlink's ``pyflink.metrics``: the metric groups user functions get from ``get_metrics_group()``."""

from streamflow.api.pyflink_names import Metric as Metric
from streamflow.runtime.metrics import Counter as Counter
from streamflow.runtime.metrics import Distribution as Distribution
from streamflow.runtime.metrics import Gauge as Gauge
from streamflow.runtime.metrics import Meter as Meter
from streamflow.runtime.metrics import MetricGroup as MetricGroup

__all__ = [
    "Counter",
    "Distribution",
    "Gauge",
    "Meter",
    "Metric",
    "MetricGroup",
]
