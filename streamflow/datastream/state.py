"""PyFlink's ``pyflink.datastream.state``: re-exports of ``streamflow.state``."""

from streamflow.api.pyflink_names import OperatorStateStore as OperatorStateStore
from streamflow.state.broadcast import BroadcastState as BroadcastState
from streamflow.state.broadcast import ReadOnlyBroadcastState as ReadOnlyBroadcastState
from streamflow.state.keyed import AggregatingState as AggregatingState
from streamflow.state.keyed import AggregatingStateDescriptor as AggregatingStateDescriptor
from streamflow.state.keyed import ListState as ListState
from streamflow.state.keyed import ListStateDescriptor as ListStateDescriptor
from streamflow.state.keyed import MapState as MapState
from streamflow.state.keyed import MapStateDescriptor as MapStateDescriptor
from streamflow.state.keyed import ReducingState as ReducingState
from streamflow.state.keyed import ReducingStateDescriptor as ReducingStateDescriptor
from streamflow.state.keyed import StateDescriptor as StateDescriptor
from streamflow.state.keyed import ValueState as ValueState
from streamflow.state.keyed import ValueStateDescriptor as ValueStateDescriptor
from streamflow.state.ttl import StateTtlConfig as StateTtlConfig

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "BroadcastState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "OperatorStateStore",
    "ReadOnlyBroadcastState",
    "ReducingState",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]

# names PyFlink's module imports from its other modules (api/pyflink_reexports.py)
from streamflow.api.pyflink_reexports import reexports as _reexports

__getattr__ = _reexports(__name__)
