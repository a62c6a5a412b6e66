"""PyFlink's ``pyflink.common.serializer``: re-exports of ``streamflow.types.serializer``."""

from streamflow.types.serializer import TypeSerializer as TypeSerializer

__all__ = ["TypeSerializer"]
