"""Every public name PyFlink 2.3 exports from the modules streamflow mirrors exists here.

``tests/pyflink_material/pyflink_names.json`` is extracted from the apache-flink
2.3.0 wheel by ``scripts/extract_pyflink_names.py``. ``REFUSED`` lists the names
that exist only to refuse use with a clear error (what, why, what instead; also in
docs/pyflink.md); ``PENDING`` the names not there yet (none).
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

NAMES = json.loads((Path(__file__).parent / "pyflink_material" / "pyflink_names.json").read_text())

#: Names that exist but refuse to be used (``streamflow/api/pyflink_names.py``): constructing
#: them, or reading a class attribute such as ``builder()``, raises NotSupportedError naming
#: what is not supported, why, and what to use instead. Each is listed in docs/pyflink.md.
REFUSED: dict[tuple[str, str], str] = {}
for module, names, why in [
    ("pyflink.common", ["AssignerWithPeriodicWatermarksWrapper", "CompletableFuture", "JobID"], "JVM"),
    ("pyflink.common.completable_future", ["CompletableFuture"], "JVM"),
    ("pyflink.common.job_id", ["JobID"], "JVM"),
    ("pyflink.datastream.state_backend", ["CustomStateBackend"], "JVM"),
    ("pyflink.common.watermark_strategy", ["AssignerWithPeriodicWatermarksWrapper"], "JVM"),
    ("pyflink.common.serialization", ["BulkWriterFactory"], "bulk formats"),
    ("pyflink.datastream", ["CustomStateBackend"], "JVM"),
    ("pyflink.datastream.connectors.base", ["StreamTransformer", "SupportsPreprocessing"], "JVM"),
    (
        "pyflink.datastream.connectors.kafka",
        ["FlinkKafkaConsumer", "FlinkKafkaProducer", "Semantic"],
        "Kafka",
    ),
    (
        "pyflink.datastream.connectors.file_system",
        ["BulkFormat"],
        "not implemented",
    ),
]:
    for name in names:
        REFUSED[(module, name)] = why
#: Names PyFlink's module gave before PyFlink 1.16 moved them (to their home, the value): the
#: mirror still gives them, as the same objects as the home's (user code imports them there).
MOVED: dict[tuple[str, str], str] = {
    ("pyflink.common.serialization", name): f"pyflink.datastream.formats.{fmt}"
    for fmt, names in [("csv", ["CsvRowDeserializationSchema", "CsvRowSerializationSchema"]),
                       ("json", ["JsonRowDeserializationSchema", "JsonRowSerializationSchema"])]
    for name in names
}
#: Names still missing, with their reason (none now; a pending name that appears fails the test).
PENDING: dict[tuple[str, str], str] = {}
PENDING_MODULES: dict[str, str] = {}

CASES = [(module, name) for module, names in sorted(NAMES.items()) for name in names]


def _mirror(module: str) -> object:
    return importlib.import_module("streamflow" + module[len("pyflink") :])


def test_the_list_is_pyflinks() -> None:
    assert len(NAMES) == 45 and len(CASES) > 250  # 20 + 20 behind them + 2 formats + 3
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
        return
    assert present, f"streamflow{module[7:]} has no {name}"
    value = getattr(_mirror(module), name)
    if (module, name) in REFUSED:
        from streamflow.api.pyflink_names import NotSupportedError

        expected = f"{name} .*is not supported by streamflow: .*{re.escape(REFUSED[module, name])}"
        with pytest.raises(NotSupportedError, match=expected):
            value()
        with pytest.raises(NotSupportedError, match="builder of"):
            value.builder()
    else:  # a real implementation, not a refusal
        assert type(value).__name__ != "_Refusing", f"{module}.{name} refuses: list it in REFUSED"


IMPORTED = json.loads(
    (Path(__file__).parent / "pyflink_material" / "pyflink_imported_names.json").read_text()
)


@pytest.mark.parametrize(
    ("module", "name"), [(module, name) for module, names in sorted(IMPORTED.items()) for name in names]
)
def test_a_name_a_pyflink_module_imports_is_importable_from_its_mirror(module: str, name: str) -> None:
    """``from pyflink.datastream.connectors.kafka import DeliveryGuarantee`` works in PyFlink (the
    module imports it), as in Flink's own Kafka example: the mirror gives the same object as the
    module that exports the name."""
    mirror = _mirror(module)
    value = getattr(mirror, name)
    homes = [m for m, names in NAMES.items() if name in names]
    assert homes and any(value is getattr(_mirror(home), name) for home in homes)
    exec(f"from {mirror.__name__} import {name}", {})


@pytest.mark.parametrize(("module", "name"), sorted(MOVED), ids=[f"{m}.{n}" for m, n in sorted(MOVED)])
def test_a_moved_name_is_its_homes_object_at_its_former_module(module: str, name: str) -> None:
    """``from pyflink.common.serialization import CsvRowSerializationSchema`` (PyFlink before 2.0)
    works here and gives the class of ``streamflow.datastream.formats.csv``, not a copy."""
    home = MOVED[module, name]
    assert name in NAMES[home] and name not in NAMES[module]  # PyFlink 2.3's lists agree: it moved
    assert getattr(_mirror(module), name) is getattr(_mirror(home), name)
    assert name in _mirror(module).__all__  # type: ignore[attr-defined]
    exec(f"from {_mirror(module).__name__} import {name}", {})


def test_custom_checkpoint_storage_refuses() -> None:
    from streamflow.datastream import CustomCheckpointStorage
    from streamflow.errors import NotSupportedError

    with pytest.raises(NotSupportedError, match="Java CheckpointStorage object"):
        CustomCheckpointStorage(object())


def test_interfaces_of_the_last_names() -> None:
    from streamflow.common import ExecutionConfig
    from streamflow.common.serialization import RowFieldExtractorSchema
    from streamflow.datastream import StreamExecutionEnvironment
    from streamflow.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaTopicSelector
    from streamflow.metrics import Counter, Distribution, Gauge, Meter, Metric

    assert isinstance(StreamExecutionEnvironment.get_execution_environment().get_config(), ExecutionConfig)
    assert all(issubclass(c, Metric) for c in (Counter, Gauge, Meter, Distribution)) and not issubclass(
        int, Metric
    )
    from streamflow.common import Row

    schema = RowFieldExtractorSchema(1)
    assert schema.serialize(Row(a="x", b=b"key")) == b"key"
    with pytest.raises(TypeError, match="Field at index 1 must be of type bytes, but was str"):
        schema.serialize(("x", "str"))

    class ByParity(KafkaTopicSelector):
        def apply(self, data: int) -> str:
            return "even" if data % 2 == 0 else "odd"

    built = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(ByParity())
        .set_value_serialization_schema(RowFieldExtractorSchema(0))
        .build()
    )
    assert [built.topic_selector(v) for v in (1, 2)] == ["odd", "even"]


def test_short_names_stay() -> None:
    import streamflow
    from streamflow.common import Row, Types
    from streamflow.datastream import StreamExecutionEnvironment

    assert StreamExecutionEnvironment is streamflow.StreamExecutionEnvironment
    assert Types.ROW([Types.INT()]).convert((1,)) == Row(f0=1)
