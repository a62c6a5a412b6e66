"""The cases of Apache Flink's ``pyflink/common/tests/test_configuration.py`` (apache/flink
``057daac``, the newest stored version) on streamflow: the same calls and expected values as
pytest functions. Nothing is left out.
"""

from __future__ import annotations

from copy import deepcopy

import pytest

from streamflow.common import Configuration


def test_init() -> None:
    conf = Configuration()
    assert conf.to_dict() == {}
    conf.set_string("k1", "v1")
    conf2 = Configuration(conf)
    assert conf2.to_dict() == {"k1": "v1"}


def test_getters_and_setters() -> None:
    conf = Configuration()
    conf.set_string("str", "v1")
    conf.set_integer("int", 2)
    conf.set_boolean("bool", True)
    conf.set_float("float", 0.5)
    conf.set_bytearray("bytearray", bytearray([1, 2, 3]))
    assert conf.get_string("str", "") == "v1"
    assert conf.get_integer("int", 0) == 2
    assert conf.get_boolean("bool", False) is True
    assert conf.get_float("float", 0) == 0.5
    assert conf.get_bytearray("bytearray", bytearray()) == bytearray([1, 2, 3])


def test_key_set() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf.set_string("k2", "v2")
    conf.set_string("k3", "v3")
    assert conf.key_set() == {"k1", "k2", "k3"}


def test_add_all_to_dict() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf.set_integer("k2", 1)
    conf.set_float("k3", 1.2)
    conf.set_boolean("k4", True)
    conf.set_bytearray("k5", bytearray([1, 2, 3]))
    target_dict: dict = {}
    conf.add_all_to_dict(target_dict)
    assert target_dict == {"k1": "v1", "k2": 1, "k3": 1.2, "k4": True, "k5": bytearray([1, 2, 3])}


def test_add_all() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf2 = Configuration()
    conf2.add_all(conf)
    assert conf2.get_string("k1", "") == "v1"
    conf2.add_all(conf, "conf_")
    assert conf2.get_string("conf_k1", "") == "v1"


def test_deepcopy() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf2 = deepcopy(conf)
    assert conf2 == conf
    conf2.set_string("k1", "v2")
    assert conf2 != conf


def test_contains_key() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    assert conf.contains_key("k1")
    assert not conf.contains_key("k2")


def test_to_dict() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf.set_integer("k2", 1)
    conf.set_float("k3", 1.2)
    conf.set_boolean("k4", True)
    assert conf.to_dict() == {"k1": "v1", "k2": "1", "k3": "1.2", "k4": "true"}


def test_remove_config() -> None:
    conf = Configuration()
    conf.set_string("k1", "v1")
    conf.set_integer("k2", 1)
    assert conf.contains_key("k1")
    assert conf.contains_key("k2")
    assert conf.remove_config("k1")
    assert not conf.remove_config("k1")
    assert not conf.contains_key("k1")
    conf.remove_config("k2")
    assert not conf.contains_key("k2")


def test_hash_equal_str() -> None:
    conf = Configuration()
    conf2 = Configuration()
    conf.set_string("k1", "v1")
    conf.set_integer("k2", 1)
    conf2.set_string("k1", "v1")
    assert hash(conf) != hash(conf2)
    assert conf != conf2
    conf2.set_integer("k2", 1)
    assert hash(conf) == hash(conf2)
    assert conf == conf2
    assert str(conf) == "{k1=v1, k2=1}"


def test_parse_list_value_non_standard_yaml() -> None:
    assert Configuration.parse_list_value(None, False) == []
    assert Configuration.parse_list_value("jar1;jar2;jar3", False) == ["jar1", "jar2", "jar3"]


def test_parse_list_value_standard_yaml() -> None:
    assert Configuration.parse_list_value(None) == []
    assert Configuration.parse_list_value("[jar1, jar2, jar3]", True) == ["jar1", "jar2", "jar3"]
    assert Configuration.parse_list_value("- jar1\n- jar2\n- jar3", True) == ["jar1", "jar2", "jar3"]
    assert Configuration.parse_list_value("jar1;jar2;jar3", True) == ["jar1", "jar2", "jar3"]


def test_boolean_values_other_than_true_or_false_are_refused() -> None:
    """Extra: Flink's ``getBoolean`` (``ConfigurationUtils.convertToBoolean``) reads ``true`` and
    ``false`` in any case and refuses anything else; a misspelt value read as ``false`` before."""
    from streamflow.configuration import ConfigOptions

    conf = Configuration()
    conf.set_string("a", "TRUE")
    conf.set_string("b", "False")
    conf.set_string("c", "yes")
    assert conf.get_boolean("a", False) is True
    assert conf.get_boolean("b", True) is False
    with pytest.raises(ValueError, match="Unrecognized option for boolean: yes"):
        conf.get_boolean("c", False)
    with pytest.raises(ValueError, match="Unrecognized option for boolean: yes"):
        conf.get(ConfigOptions.key("c").boolean_type().no_default_value())


def test_doubles_are_kept_as_java_writes_them() -> None:
    """Extra: ``to_dict``/``get_string`` of a double give Java's ``Double.toString``, as
    Flink's ``toMap`` does (``1.0E20``, ``1.0E-4``; they were ``1e+20``, ``0.0001``)."""
    conf = Configuration()
    conf.set_float("big", 1e20)
    conf.set_float("small", 0.0001)
    conf.set_float("plain", 2.5)
    assert conf.to_dict() == {"big": "1.0E20", "small": "1.0E-4", "plain": "2.5"}
    assert conf.get_float("big", 0) == 1e20
    assert conf.get_float("small", 0) == 0.0001
