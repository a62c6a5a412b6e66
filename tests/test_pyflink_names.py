"""Every public name PyFlink 2.3 exports from the modules streamflow mirrors exists here.

``tests/pyflink_material/pyflink_names.json`` is extracted from the apache-flink
2.3.0 wheel by ``scripts/extract_pyflink_names.py``. ``PENDING`` lists the names
not there yet, each with its reason (also in docs/pyflink.md); a pending name
that appears fails the test, so the list only shrinks.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

NAMES = json.loads((Path(__file__).parent / "pyflink_material" / "pyflink_names.json").read_text())

_KAFKA = "Kafka connector and schemas: the kafka branch (issue 10)"
_METRICS = "no common Metric base class in streamflow.runtime.metrics (issue 14's module)"
_BACKENDS = "checkpoint storages as classes, custom (JVM) state backends: issue 12"
_FILES = "file connector extensions (compaction, bulk formats, bucket assigners) not implemented"
_JVM = "JVM-only helper with no meaning without the JVM"
PENDING: dict[tuple[str, str], str] = {}
for module, names, reason in [
    ("pyflink.common", ["AssignerWithPeriodicWatermarksWrapper", "CompletableFuture", "JobID",
                        "ExecutionConfig"], _JVM),
    ("pyflink.common.serialization", ["RowFieldExtractorSchema"], _KAFKA),
    ("pyflink.datastream.connectors.kafka", ["FlinkKafkaConsumer", "FlinkKafkaProducer",
                                             "KafkaRecordSerializationSchemaBuilder", "KafkaTopicSelector",
                                             "Semantic"], _KAFKA),
    ("pyflink.common.serialization", ["BulkWriterFactory"], _FILES),
    ("pyflink.common.watermark_strategy", ["AssignerWithPeriodicWatermarksWrapper"], _JVM),
    ("pyflink.datastream", ["CustomStateBackend"], _BACKENDS),
    ("pyflink.datastream.connectors.base", ["StreamTransformer", "SupportsPreprocessing"], _JVM),
    ("pyflink.datastream.connectors.file_system", ["BucketAssigner", "BulkFormat", "FileCompactStrategy",
                                                   "FileCompactor", "FileEnumeratorProvider",
                                                   "FileSplitAssignerProvider"],
     _FILES),
    ("pyflink.datastream.state", ["OperatorStateStore"], "operator state (non-keyed) is not exposed"),
    ("pyflink.metrics", ["Metric"], _METRICS),
]:
    for name in names:
        PENDING[(module, name)] = reason
PENDING_MODULES: dict[str, str] = {}

CASES = [(module, name) for module, names in sorted(NAMES.items()) for name in names]


def _mirror(module: str) -> object:
    return importlib.import_module("streamflow" + module[len("pyflink"):])


def test_the_list_is_pyflinks() -> None:
    assert len(NAMES) == 20 and len(CASES) > 200
    assert "Types" in NAMES["pyflink.common"] and "RuntimeExecutionMode" in NAMES["pyflink.datastream"]


@pytest.mark.parametrize(("module", "name"), CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_pyflink_name_exists(module: str, name: str) -> None:
    if module in PENDING_MODULES:
        with pytest.raises(ImportError):
            _mirror(module)
        return
    present = hasattr(_mirror(module), name)
    if (module, name) in PENDING:
        assert not present, f"{module}.{name} exists now: remove it from PENDING and docs/pyflink.md"
    else:
        assert present, f"streamflow{module[7:]} has no {name}"


def test_short_names_stay() -> None:
    import streamflow
    from streamflow.common import Row, Types
    from streamflow.datastream import StreamExecutionEnvironment

    assert StreamExecutionEnvironment is streamflow.StreamExecutionEnvironment
    assert Types.ROW([Types.INT()]).convert((1,)) == Row(f0=1)
