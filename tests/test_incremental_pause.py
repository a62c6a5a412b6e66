"""The heap backend's logs of writes pause while the next capture writes a base anyway
(state/changes.py, "Paused"): nothing is recorded from the start until the first capture and
after a restore until the next one; every delta still holds every write since its chain."""

from __future__ import annotations

from streamflow.state.keyed import KeyedStateBackend
from tests.test_incremental_state import MAXP, Files, settings, tables, write


def test_logs_pause_until_the_first_capture_then_record() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    table, changes = backend.tracked_table("reduce", "value")
    assert changes is not None and changes.paused and not changes.recording
    table.update({"a": 1, "b": 2})
    changes.extend(["a", "b"], [1, 2])
    write(backend, "x", 1)  # a state object's single write: not recorded either
    assert len(changes) == 0 and len(backend._dirty["v"]) == 0
    base = files.take(backend, 1)
    assert len(base["chain"]) == 1 and "-base-" in base["chain"][0]
    assert changes.recording and not backend._dirty["v"].paused
    table["a"] = 10
    changes.extend(["a"], [10])
    write(backend, "y", 2)
    assert len(changes) == 1
    delta = files.take(backend, 2)
    assert len(delta["chain"]) == 2
    assert tables(files.restore([delta])) == tables(backend) == {
        "reduce": {"a": 10, "b": 2}, "v": {"x": 1, "y": 2},
    }  # fmt: skip


def test_a_table_registered_after_a_confirmed_checkpoint_records_at_once() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    write(backend, "x", 1)
    files.take(backend, 1)
    table, changes = backend.tracked_table("late", "value")
    assert changes is not None and changes.recording
    table["k"] = "v"
    changes.put("k", "v")
    delta = files.take(backend, 2)
    assert len(delta["chain"]) == 2 and files.restore([delta])._tables["late"] == {"k": "v"}


def test_a_restore_pauses_the_logs_until_its_first_capture_a_base() -> None:
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    for k in range(50):
        write(backend, k, k)
    d1 = files.take(backend, 1)
    write(backend, 3, "three")
    d2 = files.take(backend, 2)
    restored = files.restore([d2])
    assert all(c.paused for c in restored._dirty.values())
    write(restored, 4, "four")  # through a state object: the table changes, the log pauses
    assert len(restored._dirty["v"]) == 0
    d3 = files.take(restored, 3)
    assert len(d3["chain"]) == 1 and "-base-" in d3["chain"][0] and d3["chain"] != d1["chain"]
    write(restored, 5, "five")
    d4 = files.take(restored, 4)
    assert len(d4["chain"]) == 2
    expected = {k: k for k in range(50)} | {3: "three", 4: "four", 5: "five"}
    assert files.restore([d4])._tables["v"] == expected


def test_a_savepoint_first_keeps_the_logs_paused() -> None:
    """A savepoint leaves logs and chain alone: the first checkpoint after it is a base."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    write(backend, "a", 1)
    sp = files.take(backend, 1, savepoint=True)
    assert "-base-sp-" in sp["chain"][0] and backend._dirty["v"].paused
    write(backend, "b", 2)
    c2 = files.take(backend, 2)
    assert len(c2["chain"]) == 1 and "-base-" in c2["chain"][0]
    assert files.restore([c2])._tables["v"] == {"a": 1, "b": 2}


def test_writes_after_an_unconfirmed_base_are_recorded() -> None:
    """The first base is not confirmed (its checkpoint failed): the next capture is a base
    again; once one is confirmed, the delta after it holds every write since."""
    files, backend = Files(), KeyedStateBackend(MAXP, settings())
    write(backend, "a", 1)
    files.take(backend, 1, confirm=False)
    assert backend._dirty["v"].recording
    write(backend, "b", 2)
    c2 = files.take(backend, 2)
    assert len(c2["chain"]) == 1 and "-base-" in c2["chain"][0]
    write(backend, "a", 3)
    c3 = files.take(backend, 3)
    assert len(c3["chain"]) == 2 and files.restore([c3])._tables["v"] == {"a": 3, "b": 2}
