"""The job's own HTTP endpoint (``rest.port``): the live job page, a JSON REST API in the
shape of Flink's, and ``/metrics`` in the Prometheus text format."""

from .prometheus import content_type as prometheus_content_type
from .prometheus import render as prometheus_text
from .server import RestServer as RestServer
from .server import serve_job as serve_job

__all__ = ["RestServer", "prometheus_content_type", "prometheus_text", "serve_job"]
