"""Fault injection for crash tests (``STREAMFLOW_KILL_AT``): see :mod:`streamflow._faults`.

The hooks live in a small internal module so production code never imports this test kit.
"""

from .._faults import ARMED as ARMED
from .._faults import point as point
