"""A time-to-live list whose elements expire at different times, as Flink's TtlListState reads
it, on the heap backend and on RocksDB.

Source (apache/flink): flink-runtime/src/main/java/org/apache/flink/runtime/state/ttl/
TtlListState.java (``get`` and its ``IteratorWithCleanup``): a read leaves the stored list as it
is while any element is unexpired (with OnReadAndWrite it stores the unexpired elements with
the read's time); only a list whose every element expired is cleared by the read. So with
ReturnExpiredIfNotCleanedUp an expired element of a list that still holds an unexpired one is
returned by every read until the whole list expires or a cleanup strategy drops it
(``TtlListState#getUnexpiredOrNull``, here in a full snapshot). The scenario is
TtlStateTestBase#testRelaxedExpirationOnWrite / testExactExpirationOnWrite with
TtlFixedLenElemListStateTestContext's elements written at two times, through the harness of
test_state_ttl_flink.py (a settable clock, snapshot and restore into a new backend).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_state_ttl_flink import KINDS, SV, TTL, UT, _config, backend_kind, make  # noqa: F401

from streamflow.common import Time
from streamflow.datastream.state import StateTtlConfig

LIST = KINDS[1]  # TtlFixedLenElemListStateTestContext: ListState of longs, update = add_all

# (update type, visibility): the reads at 120 (elements 1, 2 written at 0 are expired; 3
# written at 50 is not), twice, then at 160 (3 expired too, or renewed by the read at 120),
# twice; after the last, whether the backend still holds the key's list.
CASES = {
    "write-never": (UT.OnCreateAndWrite, SV.NeverReturnExpired, [[3], [3], [], []], False),
    "write-return": (
        UT.OnCreateAndWrite, SV.ReturnExpiredIfNotCleanedUp, [[1, 2, 3], [1, 2, 3], [1, 2, 3], []], False
    ),
    "read-never": (UT.OnReadAndWrite, SV.NeverReturnExpired, [[3], [3], [3], [3]], True),
    "read-return": (UT.OnReadAndWrite, SV.ReturnExpiredIfNotCleanedUp, [[1, 2, 3], [3], [3], [3]], True),
}


@pytest.mark.parametrize("case", CASES)
def test_partly_expired_list(make, case: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Each read returns what Flink's TtlListState#get returns, and leaves what it leaves: a
    snapshot and restore after the first read at each time keeps it (an expired element was
    dropped by the first read that saw it, so ReturnExpiredIfNotCleanedUp returned it once only)."""
    update, visibility, reads, held = CASES[case]
    h = make(LIST, _config(update, visibility))
    h.clock.set(0)
    h.update([1, 2])
    h.clock.set(50)
    h.update([3])
    got: list[Any] = []
    for i, now in enumerate((120, 120, 160, 160)):
        h.clock.set(now)
        got.append(h.get())
        if i % 2 == 0:  # the list as the read left it, through a snapshot and restore
            h.take_and_restore()
    assert got == reads
    assert h.original_empty() is not held


def test_full_snapshot_cleanup_drops_the_expired_elements_of_a_partly_expired_list(make) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """TtlListState#getUnexpiredOrNull: a full snapshot with cleanup_full_snapshot leaves the
    expired elements out, so after the restore ReturnExpiredIfNotCleanedUp no longer sees them."""
    config = (
        StateTtlConfig.new_builder(Time.milliseconds(TTL))
        .set_state_visibility(SV.ReturnExpiredIfNotCleanedUp)
        .cleanup_full_snapshot()
        .build()
    )
    h = make(LIST, config)
    h.clock.set(0)
    h.update([1, 2])
    h.clock.set(50)
    h.update([3])
    h.clock.set(120)
    h.take_and_restore()
    assert h.get() == [3]
