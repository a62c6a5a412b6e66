"""Table-driven tests of the checkpoint coordinator.

Each case is a script: a call and the exact list of actions it must return,
nothing more. ``advance`` moves the manual clock; ``deadline`` checks
``next_poll_deadline()``; ``stats`` checks some ``CoordinatorStats`` fields. A
step expecting an exception also checks that the coordinator did not change.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamflow.checkpoint.coordinator as coordinator_module
from streamflow.checkpoint.coordinator import (
    AbortCheckpoint,
    AbortReason,
    CheckpointCoordinator,
    CheckpointTriggerError,
    CompleteCheckpoint,
    FailJob,
    NotifyComplete,
    ReleaseTask,
    TriggerCheckpoint,
    TriggerQueued,
    TriggerRequestFailed,
)
from streamflow.runtime.events import CheckpointType, StopMode
from streamflow.testing import ManualClock

CP = CheckpointType.CHECKPOINT
SP = CheckpointType.SAVEPOINT
R = AbortReason


# ---------------------------------------------------------------- action builders


def T(cid: int, ts: int, kind=CP, target: str | None = None, req: int | None = None):
    return TriggerCheckpoint(cid, ts, kind, target, req)


def S(cid: int, *tasks: str) -> dict[str, object]:
    """The states that ``ack(cid, task)`` sends by default."""
    return {t: f"{t}@{cid}" for t in tasks}


def C(cid: int, states: dict[str, object], kind=CP, target=None, finished=()):
    return CompleteCheckpoint(cid, kind, target, states, frozenset(finished))


def A(cid: int, reason: AbortReason) -> AbortCheckpoint:
    return AbortCheckpoint(cid, reason)


N = NotifyComplete
FJ = FailJob
RT = ReleaseTask
Q = TriggerQueued
F = TriggerRequestFailed

# ---------------------------------------------------------------- script steps


def adv(ms: int):
    return ("advance", (ms,), None)


def deadline(expected: int | None):
    return ("deadline", (), expected)


def stats(**expected: Any):
    return ("stats", (), expected)


def poll(*expected):
    return ("poll", (), list(expected))


def trig(*expected, kind=CP, target=None):
    return ("trigger", (kind, target), list(expected))


def stop(*expected, mode=StopMode.SUSPEND, target="/sp"):
    """A stop-with-savepoint's request: a savepoint to ``target`` with ``mode``."""
    return ("trigger", (SP, target, mode), list(expected))


def TS(cid: int, ts: int, req: int, mode=StopMode.SUSPEND, target="/sp"):
    return TriggerCheckpoint(cid, ts, SP, target, req, frozenset(), mode)


def ack(cid: int, task: str, *expected, state: object = None):
    return ("acknowledge", (cid, task, f"{task}@{cid}" if state is None else state), list(expected))


def decline(cid: int, task: str, *expected):
    return ("decline", (cid, task, "boom"), list(expected))


def failed(task: str, *expected):
    return ("task_failed", (task,), list(expected))


def finished(task: str, *expected):
    return ("task_finished", (task, f"{task}@final"), list(expected))


def echo_decline(cid: int, task: str, *expected):
    """A decline that only echoes another cause (a newer barrier, a cancel marker)."""
    return ("echo_decline", (cid, task, "canceled_upstream"), list(expected))


def ending(*expected):
    return ("job_ending", ("was cancelled",), list(expected))


def confirm(cid: int, *expected):
    return ("confirm_completed", (cid,), list(expected))


def persist_failed(cid: int, *expected):
    return ("persist_failed", (cid, "disk full"), list(expected))


def raises(exc: type[Exception], op: str, *args: Any):
    return (op, args, exc)


def complete(cid: int, *tasks: str):
    """Steps acking ``cid`` from every task in ``tasks`` (the last completes it)."""
    steps = [ack(cid, t) for t in tasks[:-1]]
    steps.append(ack(cid, tasks[-1], C(cid, S(cid, *tasks))))
    return steps


def run(script, tasks=("a", "b"), **kwargs: Any) -> CheckpointCoordinator:
    clock = ManualClock(0)
    kwargs.setdefault("interval_ms", None)
    kwargs.setdefault("tolerable_failures", 100)
    coord = CheckpointCoordinator(tasks, clock, **kwargs)
    for i, (op, args, expected) in enumerate(script):
        where = f"step {i}: {op}{args}"
        if op == "advance":
            clock.advance(*args)
        elif op == "deadline":
            assert coord.next_poll_deadline() == expected, where
        elif op == "stats":
            got = {k: getattr(coord.stats, k) for k in expected}
            assert got == expected, where
        elif op == "echo_decline":
            assert coord.decline(*args, counts=False) == expected, where
        elif isinstance(expected, type) and issubclass(expected, Exception):
            before = _snapshot(coord)
            with pytest.raises(expected):
                getattr(coord, op)(*args)
            assert _snapshot(coord) == before, f"{where} changed the state"
        else:
            assert getattr(coord, op)(*args) == expected, where
    return coord


def _snapshot(coord: CheckpointCoordinator) -> dict[str, Any]:
    return copy.deepcopy({k: v for k, v in vars(coord).items() if k != "_clock"})


# ---------------------------------------------------------------- the table

# fmt: off
CASES: list[tuple[str, dict[str, Any], list[Any]]] = [
    (
        "periodic_trigger_after_interval",
        {"interval_ms": 100, "timeout_ms": 1000},
        [
            poll(), deadline(100), adv(99), poll(), adv(1), poll(T(1, 100)),
            poll(), deadline(1100),
            *complete(1, "a", "b"), confirm(1, N(1)),
            deadline(200), adv(100), poll(T(2, 200)),
            stats(last_completed_id=1, num_completed=1, in_flight=(2,)),
        ],
    ),
    (
        "interval_counts_from_last_trigger_not_completion",
        {"interval_ms": 100},
        [adv(100), poll(T(1, 100)), adv(50), *complete(1, "a", "b"), confirm(1, N(1)),
         deadline(200), adv(49), poll(), adv(1), poll(T(2, 200))],
    ),
    (
        "slow_checkpoint_next_one_due_at_once",
        {"interval_ms": 100},
        [adv(100), poll(T(1, 100)), adv(250), poll(), *complete(1, "a", "b"), confirm(1, N(1)),
         deadline(350), poll(T(2, 350)), stats(last_duration_ms=250)],
    ),
    (
        "min_pause_after_completion",
        {"interval_ms": 100, "min_pause_ms": 80},
        [adv(100), poll(T(1, 100)), adv(50), *complete(1, "a", "b"), confirm(1, N(1)),
         deadline(230), adv(50), poll(), adv(29), poll(), adv(1), poll(T(2, 230))],
    ),
    (
        # Flink's CheckpointRequestDecider: the pause counts from the last *completed*
        # checkpoint; an abort does not delay the next one (issue 9, defect 6)
        "min_pause_counts_from_completion_not_abort",
        {"interval_ms": 100, "min_pause_ms": 80},
        [adv(100), poll(T(1, 100)), adv(50), decline(1, "a", A(1, R.DECLINED)),
         deadline(200), adv(49), poll(), adv(1), poll(T(2, 200))],
    ),
    (
        "manual_trigger_ignores_interval_and_min_pause",
        {"interval_ms": 100, "min_pause_ms": 1000},
        [adv(100), poll(T(1, 100)), *complete(1, "a", "b"), confirm(1, N(1)),
         adv(10), trig(T(2, 110, req=1)), stats(in_flight=(2,))],
    ),
    (
        "manual_trigger_restarts_interval",
        {"interval_ms": 100},
        [adv(50), trig(T(1, 50, req=1)), *complete(1, "a", "b"), confirm(1, N(1)),
         adv(50), poll(), deadline(150), adv(50), poll(T(2, 150))],
    ),
    (
        "no_interval_means_manual_only",
        {"interval_ms": None},
        [deadline(None), adv(10**6), poll(), trig(T(1, 10**6, req=1)),
         deadline(10**6 + 600_000), *complete(1, "a", "b"), confirm(1, N(1)), deadline(None)],
    ),
    (
        "timeout_aborts_then_periodic_trigger_follows",
        {"interval_ms": 100, "timeout_ms": 500},
        [adv(100), poll(T(1, 100)), ack(1, "a"), deadline(600), adv(499), poll(), adv(1),
         poll(A(1, R.TIMEOUT), T(2, 600)), ack(1, "b"), decline(1, "b"),
         stats(num_aborted=1, num_completed=0, in_flight=(2,))],
    ),
    (
        "timeout_does_not_delay_next_by_min_pause",
        {"interval_ms": 100, "timeout_ms": 500, "min_pause_ms": 50},
        [adv(100), poll(T(1, 100)), adv(500), poll(A(1, R.TIMEOUT), T(2, 600))],
    ),
    (
        "persisting_checkpoint_never_times_out",
        {"timeout_ms": 500},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), deadline(None), adv(5000), poll(),
         confirm(1, N(1)), stats(last_duration_ms=5000)],
    ),
    (
        "max_concurrent_two",
        {"interval_ms": 100, "max_concurrent": 2},
        [adv(100), poll(T(1, 100)), adv(100), poll(T(2, 200)), adv(100), poll(),
         deadline(100 + 600_000), *complete(1, "a", "b"), confirm(1, N(1)), poll(T(3, 300)),
         stats(in_flight=(2, 3))],
    ),
    (
        "completion_subsumes_older_pending",
        {"interval_ms": 100, "max_concurrent": 2},
        [adv(100), poll(T(1, 100)), adv(100), poll(T(2, 200)), ack(1, "a"),
         *complete(2, "a", "b"), confirm(2, A(1, R.SUBSUMED), N(2)),
         ack(1, "b"), decline(1, "b"), raises(ValueError, "confirm_completed", 1),
         stats(last_completed_id=2, num_completed=1, num_aborted=1, in_flight=())],
    ),
    (
        "completion_subsumes_older_persisting",
        {"max_concurrent": 2},
        [trig(T(1, 0, req=1)), trig(T(2, 0, req=2)), *complete(1, "a", "b"),
         *complete(2, "a", "b"), confirm(2, A(1, R.SUBSUMED), N(2)),
         confirm(1), raises(ValueError, "confirm_completed", 1),
         stats(last_completed_id=2, num_completed=1, num_aborted=1)],
    ),
    (
        "persist_failed_of_subsumed_is_ignored",
        {"max_concurrent": 2},
        [trig(T(1, 0, req=1)), trig(T(2, 0, req=2)), *complete(1, "a", "b"),
         *complete(2, "a", "b"), confirm(2, A(1, R.SUBSUMED), N(2)), persist_failed(1),
         raises(ValueError, "persist_failed", 1, "again")],
    ),
    (
        "decline_aborts_and_later_messages_are_ignored",
        {},
        [trig(T(1, 0, req=1)), ack(1, "a"), decline(1, "b", A(1, R.DECLINED)),
         ack(1, "b"), decline(1, "a"), raises(ValueError, "confirm_completed", 1),
         stats(num_aborted=1, in_flight=())],
    ),
    (
        "decline_from_unknown_task_or_checkpoint_is_ignored",
        {},
        [trig(T(1, 0, req=1)), decline(1, "zz"), decline(7, "a"), decline(0, "a"),
         stats(in_flight=(1,))],
    ),
    (
        "decline_after_all_acked_is_ignored",
        {},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), decline(1, "a"), confirm(1, N(1))],
    ),
    (
        "duplicate_and_unknown_acks_are_ignored",
        {},
        [trig(T(1, 0, req=1)), ack(1, "a"), ack(1, "a", state="other"), ack(1, "zz"),
         ack(2, "a"), ack(0, "a"), ack(1, "b", C(1, S(1, "a", "b"))), ack(1, "b"),
         confirm(1, N(1)), ack(1, "a")],
    ),
    (
        "task_failure_aborts_unacknowledged_and_stops_triggering",
        {"interval_ms": 100},
        [adv(100), poll(T(1, 100)), ack(1, "a"), failed("b", A(1, R.TASK_FAILED)),
         deadline(None), adv(1000), poll(), raises(CheckpointTriggerError, "trigger"),
         raises(CheckpointTriggerError, "trigger", SP, "/sp")],
    ),
    (
        "task_failure_keeps_checkpoints_it_acknowledged",
        {},
        [trig(T(1, 0, req=1)), ack(1, "a"), failed("a"), ack(1, "b", C(1, S(1, "a", "b"))),
         confirm(1, N(1)), stats(last_completed_id=1)],
    ),
    (
        "task_failure_fails_queued_requests",
        {},
        [trig(T(1, 0, req=1)), trig(Q(2, SP, "/sp"), kind=SP, target="/sp"), trig(Q(3, CP, None)),
         failed("b", A(1, R.TASK_FAILED), F(2, R.TASK_FAILED), F(3, R.TASK_FAILED)),
         stats(num_queued=0, in_flight=())],
    ),
    (
        "illegal_task_transitions_raise",
        {},
        [raises(ValueError, "task_failed", "zz"), raises(ValueError, "task_finished", "zz"),
         failed("a"), raises(ValueError, "task_failed", "a"),
         raises(ValueError, "task_finished", "a"), finished("b"),
         raises(ValueError, "task_finished", "b"), raises(ValueError, "task_failed", "b")],
    ),
    (
        "finished_task_is_not_asked_later_its_final_state_is_included",
        {"interval_ms": 100},
        [finished("b"), adv(100), poll(T(1, 100)), ack(1, "b"),
         ack(1, "a", C(1, {**S(1, "a"), "b": "b@final"}, finished=("b",))),
         confirm(1, N(1), RT("b"))],
    ),
    (
        # FLIP-147: a task that finishes acknowledges pending checkpoints with its final
        # state; it is released only by a completed checkpoint holding that state
        "task_finishing_acks_pending_with_final_state",
        {"max_concurrent": 2},
        [trig(T(1, 0, req=1)), trig(T(2, 0, req=2)), ack(1, "b"), finished("b"),
         ack(1, "a", C(1, S(1, "a", "b"))), confirm(1, N(1)),
         ack(2, "a", C(2, {**S(2, "a"), "b": "b@final"}, finished=("b",))),
         confirm(2, N(2), RT("b")), trig(T(3, 0, req=3)),
         ack(3, "a", C(3, {**S(3, "a"), "b": "b@final"}, finished=("b",))), confirm(3, N(3))],
    ),
    (
        "task_finishing_last_completes_pending",
        {},
        [trig(T(1, 0, req=1)), ack(1, "a"),
         finished("b", C(1, {**S(1, "a"), "b": "b@final"}, finished=("b",))),
         confirm(1, N(1), RT("b"))],
    ),
    (
        # (the savepoint triggered after b finished holds b's final state and marks it finished:
        # its restore must not run b again, FLIP-147)
        "without_final_checkpoint_finishing_aborts_and_releases",
        {"final_checkpoint": False},
        [trig(T(1, 0, req=1)), trig(Q(2, SP, "/sp"), kind=SP, target="/sp"),
         finished("b", A(1, R.TASK_FINISHED), RT("b"), T(2, 0, SP, "/sp", 2)),
         ack(2, "a", C(2, {"b": "b@final", **S(2, "a")}, SP, "/sp", finished=("b",)))],
    ),
    (
        "all_tasks_finished_final_checkpoint_then_no_more_triggers",
        {"interval_ms": 100},
        [finished("a"), finished("b", C(1, {"a": "a@final", "b": "b@final"}, finished="ab")),
         deadline(None), adv(500), poll(),
         raises(CheckpointTriggerError, "trigger"),
         raises(CheckpointTriggerError, "trigger", SP, "/sp"),
         confirm(1, N(1), RT("a"), RT("b")), stats(in_flight=(), last_completed_id=1)],
    ),
    (
        "all_tasks_finished_fails_queued_requests",
        {},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), trig(Q(2, SP, "/sp"), kind=SP, target="/sp"),
         finished("a"), finished("b", F(2, R.TASK_FINISHED)),
         confirm(1, N(1), C(2, {"a": "a@final", "b": "b@final"}, finished="ab")),
         stats(num_queued=0, in_flight=(2,))],
    ),
    (
        "savepoint_completes_without_notify",
        {},
        [adv(5), trig(T(1, 5, SP, "/sp", 1), kind=SP, target="/sp"), ack(1, "a"),
         ack(1, "b", C(1, S(1, "a", "b"), SP, "/sp")), confirm(1),
         stats(last_completed_id=1, num_completed=1, in_flight=())],
    ),
    (
        # FLIP-34: the synchronous savepoint of a stop-with-savepoint notifies (its sinks commit)
        "stop_with_savepoint_notifies",
        {},
        [adv(5), stop(TS(1, 5, 1)), ack(1, "a"), ack(1, "b", C(1, S(1, "a", "b"), SP, "/sp")),
         confirm(1, N(1)), stats(last_completed_id=1, num_completed=1, in_flight=())],
    ),
    (
        "stop_with_savepoint_drain_notifies_too",
        {},
        [stop(TS(1, 0, 1, StopMode.TERMINATE), mode=StopMode.TERMINATE), *complete(1, "a", "b")[:1],
         ack(1, "b", C(1, S(1, "a", "b"), SP, "/sp")), confirm(1, N(1))],
    ),
    (
        # Flink stops the checkpoint scheduler for a stop-with-savepoint, restarts it on failure
        "stop_with_savepoint_pauses_periodic_checkpoints_until_it_fails",
        {"interval_ms": 100, "timeout_ms": 1000, "max_concurrent": 2},
        [adv(50), stop(TS(1, 50, 1)), deadline(1050), adv(100), poll(), ack(1, "a"),
         decline(1, "b", A(1, R.DECLINED)), deadline(150), poll(T(2, 150))],
    ),
    (
        "stop_with_savepoint_stops_periodic_checkpoints_after_it_completed",
        {"interval_ms": 100},
        [adv(50), stop(TS(1, 50, 1)), *complete(1, "a", "b")[:1],
         ack(1, "b", C(1, S(1, "a", "b"), SP, "/sp")), confirm(1, N(1)), deadline(None),
         adv(500), poll()],
    ),
    (
        # queued behind a checkpoint in flight, the stop keeps its mode; nothing periodic meanwhile
        "stop_with_savepoint_queued_keeps_its_mode",
        {"interval_ms": 100},
        [adv(100), poll(T(1, 100)), stop(Q(1, SP, "/sp", StopMode.TERMINATE), mode=StopMode.TERMINATE),
         *complete(1, "a", "b"), adv(150), confirm(1, N(1), TS(2, 250, 1, StopMode.TERMINATE)),
         poll(), deadline(600_250)],  # only its timeout: no periodic one
    ),
    (
        "only_a_savepoint_stops_the_job",
        {},
        [raises(ValueError, "trigger", CP, None, StopMode.SUSPEND)],
    ),
    (
        "savepoint_ignores_interval_and_min_pause",
        {"interval_ms": 100, "min_pause_ms": 1000},
        [trig(T(1, 0, SP, "/sp", 1), kind=SP, target="/sp")],
    ),
    (
        "savepoint_queued_behind_max_concurrent_ahead_of_checkpoints",
        {"interval_ms": 100},
        [adv(100), poll(T(1, 100)), trig(Q(1, CP, None)),
         trig(Q(2, SP, "/x"), kind=SP, target="/x"), stats(num_queued=2),
         *complete(1, "a", "b"), adv(10), confirm(1, N(1), T(2, 110, SP, "/x", 2)),
         ack(2, "a"), ack(2, "b", C(2, S(2, "a", "b"), SP, "/x")),
         confirm(2, T(3, 110, req=1)), stats(num_queued=0, in_flight=(3,))],
    ),
    (
        "queued_request_starts_after_abort",
        {},
        [trig(T(1, 0, req=1)), trig(Q(2, CP, None)), adv(3),
         decline(1, "a", A(1, R.DECLINED), T(2, 3, req=2))],
    ),
    (
        "queued_request_starts_after_timeout",
        {"timeout_ms": 50},
        [trig(T(1, 0, req=1)), trig(Q(2, CP, None)), adv(50),
         poll(A(1, R.TIMEOUT), T(2, 50, req=2))],
    ),
    (
        "queued_request_starts_after_persist_failure",
        {},
        [trig(T(1, 0, req=1)), trig(Q(2, CP, None)), *complete(1, "a", "b"),
         persist_failed(1, A(1, R.PERSIST_FAILED), T(2, 0, req=2))],
    ),
    (
        "pending_savepoint_is_not_subsumed",
        {"interval_ms": 100, "max_concurrent": 2},
        [trig(T(1, 0, SP, "/sp", 1), kind=SP, target="/sp"), adv(100), poll(T(2, 100)),
         *complete(2, "a", "b"), confirm(2, N(2)), ack(1, "a"),
         ack(1, "b", C(1, S(1, "a", "b"), SP, "/sp")), confirm(1),
         stats(last_completed_id=1, num_completed=2, num_aborted=0)],
    ),
    (
        "completed_savepoint_does_not_subsume_older_checkpoint",
        {"max_concurrent": 2},
        [trig(T(1, 0, req=1)), trig(T(2, 0, SP, "/sp", 2), kind=SP, target="/sp"),
         ack(2, "a"), ack(2, "b", C(2, S(2, "a", "b"), SP, "/sp")), confirm(2),
         *complete(1, "a", "b"), confirm(1, N(1))],
    ),
    (
        "bad_trigger_arguments_raise",
        {},
        [raises(ValueError, "trigger", SP, None), raises(ValueError, "trigger", SP, ""),
         raises(ValueError, "trigger", CP, "/x"), raises(TypeError, "trigger", "savepoint"),
         stats(in_flight=(), num_queued=0), trig(T(1, 0, req=1))],
    ),
    (
        "persist_failure_aborts",
        {"interval_ms": 100, "min_pause_ms": 30},
        [adv(100), poll(T(1, 100)), *complete(1, "a", "b"), adv(20),
         persist_failed(1, A(1, R.PERSIST_FAILED)), raises(ValueError, "confirm_completed", 1),
         raises(ValueError, "persist_failed", 1, "x"), deadline(200), adv(80), poll(T(2, 200)),
         stats(num_completed=0, num_aborted=1, last_completed_id=None)],
    ),
    (
        "confirm_or_fail_before_all_acks_raises",
        {},
        [trig(T(1, 0, req=1)), ack(1, "a"), raises(ValueError, "confirm_completed", 1),
         raises(ValueError, "persist_failed", 1, "x"), raises(ValueError, "confirm_completed", 9),
         ack(1, "b", C(1, S(1, "a", "b"))), confirm(1, N(1))],
    ),
    (
        "ids_continue_after_restore",
        {"restored_checkpoint_id": 41, "interval_ms": 100},
        [stats(last_completed_id=41), trig(T(42, 0, req=1)), decline(42, "a", A(42, R.DECLINED)),
         adv(100), poll(T(43, 100)), ack(41, "a"), *complete(43, "a", "b"),
         confirm(43, N(43)), stats(last_completed_id=43)],
    ),
    # -- failure policy: Flink's CheckpointFailureManagerTest, CheckpointCoordinatorTest
    (
        # testExpiredCheckpointExceedingTolerableFailureNumber; default 0: the first fails the job
        "default_first_timeout_fails_the_job",
        {"interval_ms": 100, "timeout_ms": 500, "tolerable_failures": 0},
        [adv(100), poll(T(1, 100)), adv(500), poll(A(1, R.TIMEOUT), FJ("")), deadline(None),
         adv(1000), poll(), raises(CheckpointTriggerError, "trigger"),
         stats(consecutive_failures=1, in_flight=())],
    ),
    (
        # testContinuousFailure: tolerable 2, the third failure in a row fails the job
        "continuous_failures_exceed_tolerable",
        {"tolerable_failures": 2},
        [trig(T(1, 0, req=1)), decline(1, "a", A(1, R.DECLINED)), trig(T(2, 0, req=2)),
         *complete(2, "a", "b"), persist_failed(2, A(2, R.PERSIST_FAILED)),
         stats(consecutive_failures=2), trig(T(3, 0, req=3)),
         decline(3, "b", A(3, R.DECLINED), FJ("")), raises(CheckpointTriggerError, "trigger")],
    ),
    (
        # testBreakContinuousFailure: a completed checkpoint resets the count
        "completed_checkpoint_resets_the_count",
        {"tolerable_failures": 1},
        [trig(T(1, 0, req=1)), decline(1, "a", A(1, R.DECLINED)), stats(consecutive_failures=1),
         trig(T(2, 0, req=2)), *complete(2, "a", "b"), confirm(2, N(2)),
         stats(consecutive_failures=0), trig(T(3, 0, req=3)), decline(3, "a", A(3, R.DECLINED)),
         trig(T(4, 0, req=4)), decline(4, "a", A(4, R.DECLINED), FJ(""))],
    ),
    (
        # testTotalCountValue: subsumed, task failure/closing, echoed declines and the job's
        # end are not counted
        "ignored_reasons_do_not_count",
        {"tolerable_failures": 0, "max_concurrent": 2, "final_checkpoint": False},
        [trig(T(1, 0, req=1)), trig(T(2, 0, req=2)), *complete(2, "a", "b"),
         confirm(2, A(1, R.SUBSUMED), N(2)), trig(T(3, 0, req=3)), echo_decline(3, "a", A(3, R.DECLINED)),
         trig(T(4, 0, req=4)), ending(A(4, R.JOB_ENDED)), stats(consecutive_failures=0)],
    ),
    (
        "savepoint_failures_are_not_counted",
        {"tolerable_failures": 0},
        [trig(T(1, 0, SP, "/sp", 1), kind=SP, target="/sp"), decline(1, "a", A(1, R.DECLINED)),
         stats(consecutive_failures=0), trig(T(2, 0, req=2))],
    ),
    (
        "task_failure_and_finishing_are_not_counted",
        {"tolerable_failures": 0, "final_checkpoint": False},
        [trig(T(1, 0, req=1)), finished("b", A(1, R.TASK_FINISHED), RT("b")), trig(T(2, 0, req=2)),
         failed("a", A(2, R.TASK_FAILED)), stats(consecutive_failures=0)],
    ),
    # -- the job's end settles what is in flight
    (
        "job_ending_aborts_pending_keeps_persisting_until_its_write_ends",
        {"max_concurrent": 2, "tolerable_failures": 0},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), trig(T(2, 0, req=2)), trig(Q(3, CP, None)),
         ending(A(2, R.JOB_ENDED), F(3, R.JOB_ENDED)), stats(in_flight=(1,)),
         raises(CheckpointTriggerError, "trigger"), adv(10**6), poll(), deadline(None),
         confirm(1, N(1)), stats(in_flight=(), consecutive_failures=0)],
    ),
    (
        "job_ending_persist_failure_is_not_a_new_trigger",
        {},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), ending(), persist_failed(1, A(1, R.PERSIST_FAILED)),
         stats(in_flight=()), poll()],
    ),
    (
        "new_attempt_ids_start_above_the_old_attempts",
        {"restored_checkpoint_id": 3, "first_checkpoint_id": 9},
        [stats(last_completed_id=3), trig(T(9, 0, req=1))],
    ),
    (
        "all_finished_while_persisting_final_checkpoint_follows",
        {},
        [trig(T(1, 0, req=1)), *complete(1, "a", "b"), finished("a"), finished("b"),
         confirm(1, N(1), C(2, {"a": "a@final", "b": "b@final"}, finished="ab")),
         confirm(2, N(2), RT("a"), RT("b"))],
    ),
    (
        "final_checkpoint_write_failure_counts_and_fails",
        {"tolerable_failures": 0},
        [finished("a"), finished("b", C(1, {"a": "a@final", "b": "b@final"}, finished="ab")),
         persist_failed(1, A(1, R.PERSIST_FAILED), FJ("")), stats(in_flight=())],
    ),
    (
        "aborted_ids_are_not_reused",
        {},
        [trig(T(1, 0, req=1)), decline(1, "a", A(1, R.DECLINED)), trig(T(2, 0, req=2)),
         failed("b", A(2, R.TASK_FAILED))],
    ),
]
# fmt: on


@pytest.mark.parametrize(("kwargs", "script"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_script(kwargs: dict[str, Any], script: list[Any]) -> None:
    run(script, **kwargs)


def test_single_task() -> None:
    run([trig(T(1, 0, req=1)), ack(1, "only", C(1, S(1, "only"))), confirm(1, N(1))],
        tasks=["only"])  # fmt: skip


def test_too_many_queued_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinator_module, "MAX_QUEUED_REQUESTS", 2)
    sp = trig(Q(3, SP, "/s"), kind=SP, target="/s")
    coord = run([trig(T(1, 0, req=1)), trig(Q(2, CP, None)), sp])
    with pytest.raises(CheckpointTriggerError) as info:
        coord.trigger()
    assert info.value.reason is AbortReason.TOO_MANY_REQUESTS
    assert coord.stats.num_queued == 2


def test_abort_details_name_the_cause() -> None:
    clock = ManualClock()
    coord = CheckpointCoordinator(["a", "b"], clock, interval_ms=None, timeout_ms=10, tolerable_failures=5)
    coord.trigger()
    coord.acknowledge(1, "a", None)
    clock.advance(10)
    [abort] = coord.poll()
    assert abort.reason is AbortReason.TIMEOUT and "b" in abort.detail and "10 ms" in abort.detail
    coord.trigger()
    [abort] = coord.decline(2, "a", "disk on fire")
    assert "disk on fire" in abort.detail and "a" in abort.detail
    with pytest.raises(CheckpointTriggerError, match="failed") as info:
        coord.task_failed("a")
        coord.trigger()
    assert info.value.reason is AbortReason.TASK_FAILED


def test_completed_checkpoint_states_are_a_copy() -> None:
    coord = CheckpointCoordinator(["a"], ManualClock(), interval_ms=None)
    coord.trigger()
    [done] = coord.acknowledge(1, "a", {"x": 1})
    assert isinstance(done, CompleteCheckpoint)
    done.states["a"] = "mutated"
    assert coord.confirm_completed(1) == [NotifyComplete(1)]


@pytest.mark.parametrize(
    ("tasks", "kwargs"),
    [
        ([], {}),
        (["a", "a"], {}),
        (["a", 1], {}),
        (["a"], {"interval_ms": 0}),
        (["a"], {"min_pause_ms": -1}),
        (["a"], {"timeout_ms": 0}),
        (["a"], {"max_concurrent": 0}),
        (["a"], {"restored_checkpoint_id": -1}),
    ],
)
def test_invalid_configuration(tasks: list[Any], kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("interval_ms", 100)
    with pytest.raises(ValueError):
        CheckpointCoordinator(tasks, ManualClock(), **kwargs)


# ---------------------------------------------------------------- random scripts

_OPS = st.one_of(
    st.tuples(st.just("advance"), st.integers(0, 300)),
    st.tuples(st.just("poll")),
    st.tuples(st.just("trigger"), st.sampled_from([CP, SP])),
    st.tuples(st.just("acknowledge"), st.integers(0, 8), st.sampled_from("abc")),
    st.tuples(st.just("decline"), st.integers(0, 8), st.sampled_from("abc")),
    st.tuples(st.just("task_failed"), st.sampled_from("abc")),
    st.tuples(st.just("task_finished"), st.sampled_from("abc")),
    st.tuples(st.just("confirm_completed"), st.integers(0, 8)),
    st.tuples(st.just("persist_failed"), st.integers(0, 8)),
)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(_OPS, max_size=60),
    max_concurrent=st.integers(1, 3),
    min_pause=st.sampled_from([0, 50]),
)
def test_random_scripts_keep_invariants(ops, max_concurrent, min_pause) -> None:
    clock = ManualClock()
    coord = CheckpointCoordinator(
        "abc", clock, interval_ms=100, min_pause_ms=min_pause, timeout_ms=400,
        max_concurrent=max_concurrent,
    )  # fmt: skip
    triggered: list[int] = []
    ended: set[int] = set()
    waiting_persist: set[int] = set()
    for op, *args in ops:
        if op == "advance":
            clock.advance(args[0])
            continue
        if op == "trigger":
            args = [args[0], "/sp" if args[0] is SP else None]
        elif op == "acknowledge":
            args = [*args, "state"]
        elif op in ("decline", "persist_failed"):
            args = [*args, "why"]
        before = _snapshot(coord)
        try:
            actions = getattr(coord, op)(*args)
        except (ValueError, CheckpointTriggerError):
            assert _snapshot(coord) == before
            continue
        for action in actions:
            if isinstance(action, TriggerCheckpoint):
                assert action.checkpoint_id == (triggered[-1] + 1 if triggered else 1)
                triggered.append(action.checkpoint_id)
            elif isinstance(action, CompleteCheckpoint):
                assert action.checkpoint_id not in ended
                if action.checkpoint_id not in triggered:  # the final checkpoint: no trigger
                    assert action.checkpoint_id == (triggered[-1] + 1 if triggered else 1)
                    triggered.append(action.checkpoint_id)
                waiting_persist.add(action.checkpoint_id)
            elif isinstance(action, AbortCheckpoint | NotifyComplete):
                assert action.checkpoint_id in triggered and action.checkpoint_id not in ended
                ended.add(action.checkpoint_id)
        if op == "confirm_completed" and args[0] in waiting_persist:
            ended.add(args[0])  # a completed savepoint has no NotifyComplete
        assert len(coord.stats.in_flight) <= max_concurrent
        assert set(coord.stats.in_flight) == set(triggered) - ended


def test_trigger_plan_is_the_tasks_without_running_upstream() -> None:
    """Flink's DefaultCheckpointPlanCalculator (FLIP-147): sources, then tasks whose inputs
    all finished; a finished task is asked nothing."""
    up = {"m": ["s1", "s2"], "k": ["m"]}
    coord = CheckpointCoordinator(["s1", "s2", "m", "k"], ManualClock(), interval_ms=None, upstream=up)
    [t1] = coord.trigger()
    assert isinstance(t1, TriggerCheckpoint) and t1.tasks == {"s1", "s2"}
    assert coord.final_snapshot_id("s1") == 1  # 1 still waits for s1: its final state goes there
    coord.task_finished("s1", "s1@final")
    assert coord.final_snapshot_id("m") == 1
    for task in ("s2", "m", "k"):
        coord.acknowledge(1, task, f"{task}@1")
    coord.confirm_completed(1)
    assert coord.final_snapshot_id("s2") == 2  # nothing pending: the next id
    [t2] = coord.trigger()
    assert isinstance(t2, TriggerCheckpoint) and t2.tasks == {"s2"}
    coord.task_finished("s2", "s2@final")
    actions = coord.acknowledge(2, "m", "m@2") + coord.acknowledge(2, "k", "k@2")
    assert [type(a) for a in actions] == [CompleteCheckpoint]
    assert actions[0].states == {"s1": "s1@final", "s2": "s2@final", "m": "m@2", "k": "k@2"}
    coord.confirm_completed(2)
    [t3] = coord.trigger()
    assert isinstance(t3, TriggerCheckpoint) and t3.tasks == {"m"}
    with pytest.raises(ValueError, match="unknown tasks"):
        CheckpointCoordinator(["a"], ManualClock(), interval_ms=None, upstream={"a": ["zz"]})


def test_failure_manager_ignores_failures_older_than_the_last_success() -> None:
    """CheckpointFailureManagerTest.testIgnoresPastCheckpoints and
    testIgnoreOneCheckpointRepeatedlyCountMultiTimes."""
    from streamflow.checkpoint.failure_manager import CheckpointFailureManager

    fm = CheckpointFailureManager(1)
    assert not fm.failed(1, R.TIMEOUT, False)
    assert not fm.failed(1, R.DECLINED, False)  # the same checkpoint counts once
    fm.succeeded(3)
    assert not fm.failed(2, R.TIMEOUT, False) and fm.consecutive == 0  # older than 3
    assert not fm.failed(4, R.TIMEOUT, False) and fm.failed(5, R.PERSIST_FAILED, False)
    for reason in (R.SUBSUMED, R.TASK_FAILED, R.TASK_FINISHED, R.JOB_ENDED, R.TOO_MANY_REQUESTS):
        assert not CheckpointFailureManager(0).failed(9, reason, False)
    assert not CheckpointFailureManager(0).failed(9, R.TIMEOUT, True)  # savepoints
    with pytest.raises(ValueError):
        CheckpointFailureManager(-1)


def test_fail_job_names_the_cause_the_count_and_the_option() -> None:
    clock = ManualClock()
    coord = CheckpointCoordinator(["a"], clock, interval_ms=None, tolerable_failures=1)
    coord.trigger()
    [first] = coord.decline(1, "a", "disk on fire")
    assert isinstance(first, AbortCheckpoint) and first.failures == 1  # tolerated
    coord.trigger()
    abort, fail = coord.decline(2, "a", "disk still on fire")
    assert isinstance(abort, AbortCheckpoint) and abort.failures == 2
    assert isinstance(fail, FailJob)
    for part in ("checkpoint 2", "disk still on fire", "2 consecutive", "tolerable number 1",
                 "set_tolerable_checkpoint_failure_number"):  # fmt: skip
        assert part in fail.detail


def test_the_checkpoint_package_never_imports_the_runtime() -> None:
    """The coordinator, driver and task checkpointer see tasks through a protocol; the
    dependency goes one way (runtime -> checkpoint), with no cycle (issue 9, structure)."""
    import ast
    from pathlib import Path

    import streamflow.checkpoint as package

    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert not module.startswith(("streamflow.runtime", "..runtime")), f"{path.name}: {module}"
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("streamflow.runtime") for a in node.names), path.name
