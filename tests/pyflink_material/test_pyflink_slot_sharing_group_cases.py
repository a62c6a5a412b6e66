"""The cases of Apache Flink's ``pyflink/datastream/tests/test_slot_sharing_group.py``
(apache/flink ``c15323b``, the newest stored version) on streamflow: the same calls and
expected values. Nothing is left out. ``test_illegal_values_messages`` (not Flink's) checks
the three setters that refuse a value that is not positive with the messages of Flink's
``SlotSharingGroup.Builder`` (``setCpuCores``, ``setTaskHeapMemory``, ``setTaskHeapMemoryMB``).
"""

from __future__ import annotations

import pytest

from streamflow.datastream import MemorySize, SlotSharingGroup


def test_build_slot_sharing_group_with_specific_resource() -> None:
    name = "slot_sharing_group"
    heap_memory = MemorySize.of_mebi_bytes(100)
    off_heap_memory = MemorySize.of_mebi_bytes(200)
    managed_memory = MemorySize.of_mebi_bytes(300)
    slot_sharing_group = (
        SlotSharingGroup.builder(name)
        .set_cpu_cores(1.0)
        .set_task_heap_memory(heap_memory)
        .set_task_off_heap_memory(off_heap_memory)
        .set_managed_memory(managed_memory)
        .set_external_resource("gpu", 1.0)
        .build()
    )
    assert slot_sharing_group.get_name() == name
    assert slot_sharing_group.get_cpu_cores() == 1.0
    assert slot_sharing_group.get_task_heap_memory() == heap_memory
    assert slot_sharing_group.get_task_off_heap_memory() == off_heap_memory
    assert slot_sharing_group.get_managed_memory() == managed_memory
    assert slot_sharing_group.get_external_resources() == {"gpu": 1.0}


def test_build_slot_sharing_group_with_unknown_resource() -> None:
    name = "slot_sharing_group"
    slot_sharing_group = SlotSharingGroup.builder(name).build()
    assert slot_sharing_group.get_name() == name
    assert slot_sharing_group.get_cpu_cores() is None
    assert slot_sharing_group.get_task_heap_memory() is None
    assert slot_sharing_group.get_task_off_heap_memory() is None
    assert slot_sharing_group.get_managed_memory() is None
    assert slot_sharing_group.get_external_resources() == {}


def test_build_slot_sharing_group_with_illegal_config() -> None:
    with pytest.raises(Exception):  # noqa: B017 (Flink's assertRaises(Exception))
        (
            SlotSharingGroup.builder("slot_sharing_group")
            .set_cpu_cores(1.0)
            .set_task_heap_memory(MemorySize(bytes_size=0))
            .set_task_off_heap_memory_mb(10)
            .build()
        )


@pytest.mark.parametrize(
    ("setter", "value", "message"),
    [
        ("set_cpu_cores", 0.0, "The cpu cores should be positive."),
        ("set_cpu_cores", -1.0, "The cpu cores should be positive."),
        ("set_task_heap_memory", MemorySize(0), "The task heap memory should be positive."),
        ("set_task_heap_memory_mb", 0, "The task heap memory should be positive."),
        ("set_task_heap_memory_mb", -5, "The task heap memory should be positive."),
    ],
)
def test_illegal_values_messages(setter: str, value: object, message: str) -> None:
    builder = SlotSharingGroup.builder("g")
    with pytest.raises(ValueError) as raised:
        getattr(builder, setter)(value)
    assert str(raised.value) == message


def test_build_slot_sharing_group_without_all_required_config() -> None:
    with pytest.raises(Exception):  # noqa: B017 (Flink's assertRaises(Exception))
        SlotSharingGroup.builder("slot_sharing_group").set_cpu_cores(1.0).set_task_off_heap_memory_mb(10).build()


def test_le_method() -> None:
    """``MemorySizeTests.test_le_method``."""
    m1 = MemorySize.of_mebi_bytes(100)
    m2 = MemorySize.of_mebi_bytes(100)
    m3 = MemorySize.of_mebi_bytes(200)
    assert m1 == m2
    assert m1 <= m2
    assert m2 <= m1
    assert m1 <= m3
    assert not m3 <= m1
