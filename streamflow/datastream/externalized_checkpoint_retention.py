"""PyFlink's ``pyflink.datastream.externalized_checkpoint_retention``: a re-export."""

from streamflow.datastream import ExternalizedCheckpointRetention as ExternalizedCheckpointRetention

__all__ = ["ExternalizedCheckpointRetention"]
