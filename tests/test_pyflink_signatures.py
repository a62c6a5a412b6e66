"""Every public method of PyFlink 2.3's exported classes takes its arguments here as there:
each parameter by position and by PyFlink's keyword, and nothing more is required.

``tests/pyflink_material/pyflink_signatures.json`` is extracted from the apache-flink 2.3.0
wheel (``scripts/extract_pyflink_names.py --signatures``). ``KEYWORDS_DIFFER`` lists the
methods whose parameters have other names here (a call by position works; a call by PyFlink's
keyword does not), each with why; it is strict (a method that matches fails the test).
Methods absent here are the members test's business (``test_pyflink_members.py``).
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

SIGNATURES: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "pyflink_material" / "pyflink_signatures.json").read_text()
)

_BUILDER = "streamflow's own name for the builder argument, as in its native connector API"
_TIMERS = "the exported TimerService is the operator's timer store (key, namespace, time)"
#: (class, method) -> why its parameters are named otherwise here
KEYWORDS_DIFFER: dict[tuple[str, str], str] = {
    ("pyflink.common.Configuration", "from_dict"): "mapping",
    ("pyflink.datastream.state.MapState", "put_all"): "streamflow's state API: mapping",
    ("pyflink.datastream.state.BroadcastState", "put_all"): "streamflow's state API: mapping",
}
for _method in (
    "set_checkpointing_mode", "set_checkpoint_interval", "set_checkpoint_timeout",
    "set_min_pause_between_checkpoints", "set_max_concurrent_checkpoints",
    "set_tolerable_checkpoint_failure_number", "set_externalized_checkpoint_retention",
    "set_aligned_checkpoint_timeout",
):  # fmt: skip
    KEYWORDS_DIFFER["pyflink.datastream.CheckpointConfig", _method] = "streamflow's checkpoint API names"
for _key, _method in [
    ("KafkaRecordSerializationSchemaBuilder", "set_topic_selector"),
    ("KafkaRecordSerializationSchemaBuilder", "set_key_serialization_schema"),
    ("KafkaRecordSerializationSchemaBuilder", "set_value_serialization_schema"),
    ("KafkaSinkBuilder", "set_delivery_guarantee"),
    ("KafkaSinkBuilder", "set_transactional_id_prefix"),
    ("KafkaSinkBuilder", "set_record_serializer"),
    ("KafkaSourceBuilder", "set_starting_offsets"),
    ("KafkaSourceBuilder", "set_bounded"),
    ("KafkaSourceBuilder", "set_unbounded"),
    ("KafkaSourceBuilder", "set_value_only_deserializer"),
]:
    KEYWORDS_DIFFER[f"pyflink.datastream.connectors.kafka.{_key}", _method] = _BUILDER
#: classes whose exported streamflow object is not the one a program calls
SKIPPED = {"pyflink.datastream.TimerService": _TIMERS + "; ctx.timer_service() takes PyFlink's arguments"}
for _key, _members in SIGNATURES.items():
    if "assign_windows" in _members and _key.startswith("pyflink.datastream.window."):
        # the operator passes the context by position; a user's assigner names it as it likes
        KEYWORDS_DIFFER.setdefault((_key, "assign_windows"), "ctx, the window operator passes it by position")
KEYWORDS_DIFFER["pyflink.datastream.WindowAssigner", "assign_windows"] = "ctx, passed by position"



def _owner(key: str) -> Any:
    module, name = key.rsplit(".", 1)
    return getattr(importlib.import_module("streamflow" + module[len("pyflink") :]), name)


def _not_checked(key: str, method: str) -> str | None:
    """Why a method's signature is not compared (None: it is)."""
    owner = _owner(key)
    if type(owner).__name__ == "_Refusing":
        return "a name that refuses use (test_pyflink_names.py)"
    if key in SKIPPED:
        return SKIPPED[key]
    found = getattr(owner, method, None)
    if found is None or not callable(found):
        return "absent: test_pyflink_members.py lists it"
    try:
        inspect.signature(found)
    except (TypeError, ValueError):
        return "a builtin without a signature"
    return None


ALL = [(key, method) for key, methods in sorted(SIGNATURES.items()) for method in sorted(methods)]
NOT_CHECKED = {case: why for case in ALL if (why := _not_checked(*case)) is not None}
CASES = [case for case in ALL if case not in NOT_CHECKED]


def test_most_signatures_are_compared() -> None:
    """What is left out is a refusing name, a listed absence or class, or a builtin."""
    assert len(CASES) > 600 and len(NOT_CHECKED) < len(ALL) // 8, NOT_CHECKED


@pytest.mark.parametrize(("key", "method"), CASES, ids=[f"{k}.{m}" for k, m in CASES])
def test_pyflink_method_takes_pyflinks_arguments(key: str, method: str) -> None:
    spec = SIGNATURES[key][method]
    sig = inspect.signature(getattr(_owner(key), method))
    params = [p for n, p in sig.parameters.items() if n not in ("self", "cls")]
    kinds = {p.kind for p in params}
    varkw = inspect.Parameter.VAR_KEYWORD in kinds
    varargs = inspect.Parameter.VAR_POSITIONAL in kinds
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = {p.name for p in params}
    # by position: as many as PyFlink takes (and *args if it has them)
    assert varargs or len(positional) >= len(spec["params"]) or spec["varargs"], (spec, sig)
    if spec["varargs"]:
        assert varargs, f"PyFlink's {method} takes *args: {sig}"
    # nothing more required than PyFlink requires
    required = [p for p in positional if p.default is p.empty]
    assert len(required) <= spec["required"], f"{method}{sig} requires more than PyFlink's {spec}"
    # by keyword
    differ = [n for n in spec["params"] if n not in names and not varkw]
    if (key, method) in KEYWORDS_DIFFER:
        assert differ, f"{key}.{method} takes PyFlink's keywords now: remove it from KEYWORDS_DIFFER"
    else:
        assert not differ, f"{key}.{method}{sig}: PyFlink's keyword(s) {differ} are not accepted"
