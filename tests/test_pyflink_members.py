"""Every public member (method, nested class, class constant) of every class PyFlink 2.3 exports
from the mirrored modules exists on streamflow's class, or is listed in ``ABSENT`` with why.

``tests/pyflink_material/pyflink_members.json`` is extracted from the apache-flink 2.3.0 wheel
(``scripts/extract_pyflink_names.py --members``). ``ABSENT`` is strict: a listed member that
appears fails the test (remove it from the list and from docs/pyflink.md). Classes that only
refuse use (``test_pyflink_names.REFUSED``) are left out.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

MEMBERS: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "pyflink_material" / "pyflink_members.json").read_text()
)

_JVM = "a bridge to the Java object behind PyFlink's wrapper; streamflow has no JVM"
_BULK = "bulk formats (Parquet, ORC, Avro) need Flink's Java format jars (docs/pyflink.md)"
_BUILDERS = (
    "the builder classes exist under streamflow's own names (for_row_format() returns one with "
    "these methods); PyFlink's nested class names, used only in annotations, are not mirrored"
)
_JOB = (
    "streamflow's JobClient is asyncio-based (await client.cancel(), trigger_savepoint(dir)) and "
    "has no accumulators; JobStatus has the states streamflow's jobs go through"
)
_RESTART = (
    "RestartStrategies' factories return streamflow's strategy objects; PyFlink's configuration "
    "classes (and their getters) are not mirrored"
)

#: (class, member) -> why it is absent; all of them are listed in docs/pyflink.md
ABSENT: dict[tuple[str, str], str] = {
    ("pyflink.common.TypeInformation", "get_java_type_info"): _JVM,
    ("pyflink.common.RowKind", "to_j_row_kind"): _JVM,
    ("pyflink.datastream.MemorySize", "get_java_memory_size"): _JVM,
    ("pyflink.datastream.OutputTag", "get_java_output_tag"): _JVM,
    ("pyflink.datastream.SlotSharingGroup", "get_java_slot_sharing_group"): _JVM,
    ("pyflink.datastream.connectors.file_system.FileSink", "get_transformer"): _JVM,
    ("pyflink.datastream.connectors.kafka.KafkaSink", "get_transformer"): _JVM,
    ("pyflink.datastream.connectors.file_system.FileSource", "for_bulk_file_format"): _BULK,
    (
        "pyflink.common.ConfigOptions",
        "OptionBuilder",
    ): "ConfigOptions.key(k) returns streamflow's typed builder",
    ("pyflink.common.ConfigOptions", "TypedConfigOptionBuilder"): "as OptionBuilder",
    ("pyflink.common.RestartStrategyConfiguration", "get_description"): _RESTART,
    (
        "pyflink.datastream.FileSystemCheckpointStorage",
        "MAX_FILE_STATE_THRESHOLD",
    ): "file states are not inlined",
    (
        "pyflink.datastream.FileSystemCheckpointStorage",
        "get_savepoint_path",
    ): "savepoints take their directory",
    (
        "pyflink.datastream.JobManagerCheckpointStorage",
        "get_savepoint_path",
    ): "savepoints take their directory",
    ("pyflink.datastream.TimerService", "current_processing_time"): (
        "the exported TimerService is the operator's timer store; ctx.timer_service() has the method"
    ),
    ("pyflink.datastream.window.ContinuousEventTimeTrigger", "register_next_fire_timestamp"): (
        "an internal helper of PyFlink's implementation"
    ),
    ("pyflink.datastream.window.ContinuousProcessingTimeTrigger", "register_next_fire_timestamp"): (
        "an internal helper of PyFlink's implementation"
    ),
    ("pyflink.datastream.formats.json.JsonRowDeserializationSchema", "Builder.json_schema"): (
        "a JSON schema string is not turned into a row type: declare type_info()"
    ),
}
ABSENT["pyflink.common.JobClient", "get_accumulators"] = _JOB
for _member in ("FAILING", "CANCELLING", "SUSPENDED", "RECONCILING", "is_globally_terminal_state",
                "is_terminal_state"):  # fmt: skip
    ABSENT["pyflink.common.JobStatus", _member] = _JOB
for _key, _members in MEMBERS.items():
    for _member in _members:
        if _key.endswith("RestartStrategies") and "Configuration" in _member:
            ABSENT[_key, _member] = _RESTART
        if _key.endswith(("file_system.FileSink", "file_system.StreamingFileSink")) and "Builder" in _member:
            ABSENT[_key, _member] = _BUILDERS
        if _key.startswith("pyflink.datastream.formats.json.") and _member.startswith("Builder."):
            ABSENT.setdefault((_key, _member), "Builder() is a function returning the builder (it has these)")
        if _key.endswith("ConfigOptions") and "." in _member:
            ABSENT[_key, _member] = "as OptionBuilder"



def _owner(key: str) -> object:
    module, name = key.rsplit(".", 1)
    return getattr(importlib.import_module("streamflow" + module[len("pyflink") :]), name)


def _refuses(key: str) -> bool:
    """A name that refuses use (test_pyflink_names.py checks it) has no members to check."""
    return type(_owner(key)).__name__ == "_Refusing"


CASES = [
    (key, member)
    for key, members in sorted(MEMBERS.items())
    if not _refuses(key)
    for member in members
]


def _moved() -> list[tuple[str, str]]:
    """The members of the classes PyFlink 1.16 moved (test_pyflink_names.MOVED), looked up at
    their former module: the same classes there, so the same members."""
    from test_pyflink_names import MOVED  # tests/test_pyflink_names.py

    return [
        (f"{module}.{name}", member)
        for (module, name), home in sorted(MOVED.items())
        for member in MEMBERS[f"{home}.{name}"]
        if (f"{home}.{name}", member) not in ABSENT
    ]


MOVED_CASES = _moved()


def _lookup(key: str, member: str) -> object:
    value = _owner(key)
    for part in member.split("."):
        value = getattr(value, part)
    return value


def test_the_members_are_pyflinks() -> None:
    assert len(MEMBERS) > 140 and len(CASES) > 850  # the members of names that refuse use are left out
    assert "key_by" in MEMBERS["pyflink.datastream.DataStream"]
    assert "Context.window_state" in MEMBERS["pyflink.datastream.ProcessWindowFunction"]


@pytest.mark.parametrize(("key", "member"), CASES, ids=[f"{k}.{m}" for k, m in CASES])
def test_pyflink_member_exists(key: str, member: str) -> None:
    try:
        _lookup(key, member)
        present = True
    except AttributeError:
        present = False
    if (key, member) in ABSENT:
        assert not present, f"{key}.{member} exists now: remove it from ABSENT and docs/pyflink.md"
    else:
        assert present, f"streamflow{key[7:]} has no {member}"


@pytest.mark.parametrize(("key", "member"), MOVED_CASES, ids=[f"{k}.{m}" for k, m in MOVED_CASES])
def test_a_moved_class_has_its_members_at_its_former_module(key: str, member: str) -> None:
    _lookup(key, member)  # (an AttributeError fails the test)


def test_the_moved_classes_members_are_checked() -> None:
    keys = {key for key, _ in MOVED_CASES}
    assert "pyflink.common.serialization.CsvRowSerializationSchema" in keys and len(MOVED_CASES) > 15
