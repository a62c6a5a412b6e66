"""Records and types with PyFlink's names: ``Row``, ``RowKind``, ``Types``, ``Time``, ``Duration``."""

from .row import Row as Row
from .row import RowKind as RowKind
from .time import Duration as Duration
from .time import Instant as Instant
from .time import Time as Time
from .typeinfo import TypeInformation as TypeInformation
from .typeinfo import Types as Types

__all__ = ["Duration", "Instant", "Row", "RowKind", "Time", "TypeInformation", "Types"]
