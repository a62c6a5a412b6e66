"""PyFlink's ``pyflink.common`` mirror: thin re-exports of streamflow's implementations."""

from streamflow.api.pyflink_names import (
    AssignerWithPeriodicWatermarksWrapper as AssignerWithPeriodicWatermarksWrapper,
)
from streamflow.api.pyflink_names import CompletableFuture as CompletableFuture
from streamflow.api.pyflink_names import ExecutionConfig as ExecutionConfig
from streamflow.api.pyflink_names import JobID as JobID
from streamflow.checkpoint.config import RestartStrategies as RestartStrategies
from streamflow.checkpoint.config import RestartStrategy as RestartStrategyConfiguration
from streamflow.configuration import ConfigOption as ConfigOption
from streamflow.configuration import ConfigOptions as ConfigOptions
from streamflow.configuration import Configuration as Configuration
from streamflow.connectors.file_sink import Encoder as Encoder
from streamflow.connectors.serialization import ByteArraySchema as ByteArraySchema
from streamflow.connectors.serialization import DeserializationSchema as DeserializationSchema
from streamflow.connectors.serialization import SerializationSchema as SerializationSchema
from streamflow.connectors.serialization import SimpleStringSchema as SimpleStringSchema
from streamflow.eventtime import TimestampAssigner as TimestampAssigner
from streamflow.eventtime import WatermarkStrategy as WatermarkStrategy
from streamflow.execution_mode import InputDependencyConstraint as InputDependencyConstraint
from streamflow.runtime.job import JobClient as JobClient
from streamflow.runtime.job import JobExecutionResult as JobExecutionResult
from streamflow.runtime.job import JobStatus as JobStatus
from streamflow.types.row import Row as Row
from streamflow.types.row import RowKind as RowKind
from streamflow.types.serializer import TypeSerializer as TypeSerializer
from streamflow.types.time import Duration as Duration
from streamflow.types.time import Instant as Instant
from streamflow.types.time import Time as Time
from streamflow.types.typeinfo import TypeInformation as TypeInformation
from streamflow.types.typeinfo import Types as Types

__all__ = [
    "AssignerWithPeriodicWatermarksWrapper",
    "ByteArraySchema",
    "CompletableFuture",
    "ConfigOption",
    "ConfigOptions",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "InputDependencyConstraint",
    "Instant",
    "JobClient",
    "JobExecutionResult",
    "JobID",
    "JobStatus",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "TypeSerializer",
    "Types",
    "WatermarkStrategy",
]
