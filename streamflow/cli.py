"""The ``streamflow`` command (also ``python -m streamflow``).

Subcommands::

    streamflow run [options] SCRIPT [ARGS...]      run a pipeline script
    streamflow checkpoints list DIR                every checkpoint in a directory
    streamflow checkpoints inspect PATH            one checkpoint or savepoint in detail
    streamflow savepoint JOB_URL [DIR]             take a savepoint of a running job
    streamflow cancel JOB_URL [--with-savepoint DIR]
    streamflow stop JOB_URL DIR [--drain]         stop a running job with a savepoint
    streamflow kafka record|replay ...             (needs streamflow.connectors.kafka_replay)

``run`` passes its settings to every ``StreamExecutionEnvironment`` the script
creates through the environment-wide default configuration (Flink's keys:
``state.checkpoints.dir``, ``execution.savepoint.path``, ``parallelism.default``,
``execution.engine``, ``rest.port``, ``rest.address``), so an unchanged script
picks them up; the script's own calls still win when it makes them later.

Exit codes: 0 success, 1 the job or the operation failed, 2 bad usage (argparse's
convention), 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import StreamflowError

_log = logging.getLogger("streamflow.cli")

EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(StreamflowError):
    """A failure to report in one line (no traceback); ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


# --------------------------------------------------------------------------- run


def _cmd_run(args: argparse.Namespace) -> int:
    from .api.environment import set_default_configuration

    script = Path(args.script)
    if not script.is_file():
        raise CommandError(f"no pipeline script at {script}", EXIT_USAGE)
    conf: dict[str, Any] = {}
    if args.checkpoint_dir:
        conf["state.checkpoints.dir"] = args.checkpoint_dir
    if args.from_savepoint:
        if not Path(args.from_savepoint).exists():
            raise CommandError(f"no savepoint or checkpoint at {args.from_savepoint}", EXIT_USAGE)
        conf["execution.savepoint.path"] = args.from_savepoint
    if args.allow_non_restored_state:
        conf["execution.savepoint.ignore-unclaimed-state"] = True
    if args.parallelism is not None:
        if args.parallelism < 1:
            raise CommandError(f"--parallelism must be >= 1, got {args.parallelism}", EXIT_USAGE)
        conf["parallelism.default"] = args.parallelism
    if args.engine != "asyncio":
        _check_engine(args.engine)
        conf["execution.engine"] = args.engine
    if args.rest_port is not None:
        conf["rest.port"] = args.rest_port
        conf["rest.address"] = args.rest_address
    if args.progress is not None:
        conf["streamflow.progress"] = args.progress
    set_default_configuration(conf)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *args.args]
    sys.path.insert(0, str(script.resolve().parent))
    _log.info("running %s with %s", script, conf or "no settings")
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return code or 0
        _log.error("%s exited: %s", script, code)
        return EXIT_FAILED
    except KeyboardInterrupt:
        _log.warning("%s interrupted", script)
        return 130
    except Exception:
        _log.exception("%s failed", script)
        return EXIT_FAILED
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        set_default_configuration({})
    return 0


def _check_engine(engine: str) -> None:
    try:
        import streamflow.spark  # noqa: F401
    except ImportError:
        raise CommandError(
            f"--engine {engine}: the Spark engine is not available in this version of streamflow "
            "(streamflow.spark is missing); use --engine asyncio",
            EXIT_USAGE,
        ) from None


# --------------------------------------------------------------------------- checkpoints


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _cmd_checkpoints_list(args: argparse.Namespace) -> int:
    from .checkpoint.storage import CheckpointStorageError
    from .tools.checkpoints import list_checkpoints

    try:
        rows = list_checkpoints(args.dir)
    except CheckpointStorageError as e:
        raise CommandError(str(e)) from None
    if args.json:
        _out(json.dumps([r.__dict__ for r in rows], indent=2))
        return 0
    if not rows:
        _out(f"no checkpoints in {args.dir}")
        return 0
    _out(f"{'ID':>6}  {'KIND':<10} {'TIME (UTC)':<23}  {'SIZE':>10}  {'STATE':<10} JOB / PATH")
    for r in rows:
        state = "complete" if r.complete else "INCOMPLETE"
        who = f"{r.job_name}  {r.path}" if r.complete else f"{r.path}: {r.problem}"
        cid = "-" if r.checkpoint_id is None else str(r.checkpoint_id)
        when, size = _time(r.timestamp_ms), _size(r.size_bytes)
        _out(f"{cid:>6}  {r.kind or '-':<10} {when:<23}  {size:>10}  {state:<10} {who}")
    return 0


def _cmd_checkpoints_inspect(args: argparse.Namespace) -> int:
    from .checkpoint.storage import CheckpointStorageError
    from .tools.checkpoints import inspect_checkpoint

    try:
        d = inspect_checkpoint(args.path, trust_pickle=args.trust_pickle)
    except CheckpointStorageError as e:
        raise CommandError(str(e)) from None
    if args.json:
        _out(json.dumps(d.to_json(), indent=2))
        return 0 if d.valid else EXIT_FAILED
    _out(f"{d.kind} {d.checkpoint_id} of job {d.job_name!r}")
    _out(f"  path:      {d.path}")
    _out(f"  time:      {_time(d.timestamp_ms)} UTC")
    channel_state = _size(d.channel_state_bytes)
    _out(f"  size:      {_size(d.size_bytes)} ({d.size_bytes} bytes), channel state {channel_state}")
    _out(f"  complete:  {'yes' if d.complete else 'no'}; valid (checksums): {'yes' if d.valid else 'NO'}")
    _out(f"  codec:     {d.codec}")
    stats = d.stats
    if stats:
        _out(
            f"  duration:  {stats.get('duration_ms', '-')} ms end to end; "
            f"alignment max {stats.get('alignment_ms_max', '-')} ms; "
            f"sync max {stats.get('sync_ms_max', '-')} ms; async (persist) {stats.get('async_ms', '-')} ms"
        )
    else:
        _out("  duration:  not recorded in this checkpoint's metadata")
    _out("  operators (state bytes over all subtasks):")
    for uid, size in sorted(d.operators.items()):
        _out(f"    {uid:<40} {_size(size):>10}")
    if d.finished:
        _out(f"  finished operators (no keyed state kept; stay finished on restore): {', '.join(d.finished)}")
    _out("  subtasks:")
    per_task = stats.get("tasks", {}) if stats else {}
    for s in d.subtasks:
        t = per_task.get(f"{s.task}#{s.subtask}", {})
        timing = f" alignment {t.get('alignment_ms', '-')} ms, sync {t.get('sync_ms', '-')} ms" if t else ""
        _out(
            f"    {s.task}#{s.subtask} ({s.subtask + 1}/{s.parallelism}) {_size(s.size_bytes):>10}, "
            f"channel state {_size(s.channel_state_bytes)} ({s.input_channel_batches} in, "
            f"{s.output_channel_batches} out batches){timing}{', finished' if s.finished else ''}"
        )
        for uid, size in sorted(s.operators.items()):
            _out(f"        {uid:<36} {_size(size):>10}")
    for p in d.problems:
        _out(f"  problem: {p}")
    return 0 if d.valid else EXIT_FAILED


# --------------------------------------------------------------------------- running jobs


_SP_DIR = "the savepoint goes to a new savepoint-<job>-<random> directory inside DIR"


def _cmd_savepoint(args: argparse.Namespace) -> int:
    from .tools.rest_client import RestError, trigger_savepoint

    target = None if args.dir is None else str(Path(args.dir).absolute())
    try:
        location = trigger_savepoint(args.job_url, target, cancel_job=False, timeout_s=args.timeout)
    except RestError as e:
        raise CommandError(str(e)) from None
    _out(f"savepoint completed: {location}")
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    from .tools.rest_client import RestError, stop_with_savepoint

    target = str(Path(args.dir).absolute())
    try:
        location = stop_with_savepoint(args.job_url, target, args.drain, timeout_s=args.timeout)
    except RestError as e:
        raise CommandError(str(e)) from None
    _out(f"savepoint completed: {location}; job finished")
    return 0


def _cmd_cancel(args: argparse.Namespace) -> int:
    from .tools.rest_client import RestError, cancel, trigger_savepoint

    try:
        if args.with_savepoint is not None:
            target = str(Path(args.with_savepoint).absolute())
            location = trigger_savepoint(args.job_url, target, cancel_job=True, timeout_s=args.timeout)
            _out(f"savepoint completed: {location}; job cancelled")
        else:
            cancel(args.job_url)
            _out("job cancelled")
    except RestError as e:
        raise CommandError(str(e)) from None
    return 0


# --------------------------------------------------------------------------- kafka


def _cmd_kafka(args: argparse.Namespace) -> int:
    try:
        from .connectors import kafka_replay
    except ImportError:
        raise CommandError(
            f"kafka {args.kafka_command}: not available in this version of streamflow "
            "(streamflow.connectors.kafka_replay is missing)",
            EXIT_USAGE,
        ) from None
    fn = getattr(kafka_replay, f"{args.kafka_command}_cli", None)
    if fn is None:
        raise CommandError(
            f"kafka {args.kafka_command}: streamflow.connectors.kafka_replay has no "
            f"{args.kafka_command}_cli()",
            EXIT_USAGE,
        )
    return int(fn(args) or 0)


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="streamflow",
        description="Run streamflow pipelines, inspect their checkpoints, operate running jobs.",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = sub.add_parser(
        "run",
        help="run a pipeline script",
        description="Run a pipeline script (options go before SCRIPT; everything after it is the "
        "script's own arguments). The settings reach every StreamExecutionEnvironment the script creates.",
    )
    run.add_argument(
        "--checkpoint-dir", metavar="DIR", help="checkpoint storage directory (state.checkpoints.dir)"
    )
    run.add_argument("--from-savepoint", metavar="PATH", help="restore from this savepoint or checkpoint")
    run.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="skip state of operators that are no longer in the job",
    )
    run.add_argument("--parallelism", "-p", type=int, metavar="N", help="default parallelism")
    run.add_argument("--engine", choices=("asyncio", "spark"), default="asyncio", help="execution engine")
    run.add_argument(
        "--rest-port", type=int, metavar="P", help="serve the job page, REST API and /metrics on P"
    )
    run.add_argument(
        "--rest-address",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to bind the REST endpoint to (default 127.0.0.1)",
    )
    prog = run.add_mutually_exclusive_group()
    prog.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show progress even when not on a terminal",
    )
    prog.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    run.add_argument("script", metavar="SCRIPT", help="the pipeline script")
    run.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")
    run.set_defaults(func=_cmd_run)

    ck = sub.add_parser(
        "checkpoints",
        help="list and inspect checkpoints",
        description="Read checkpoint directories (nothing is changed).",
    )
    ck_sub = ck.add_subparsers(dest="checkpoints_command", metavar="SUBCOMMAND", required=True)
    ls = ck_sub.add_parser(
        "list",
        help="every checkpoint in a directory",
        description="List every chk-<id> in DIR (complete or not) with kind, time and size.",
    )
    ls.add_argument("dir", metavar="DIR")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=_cmd_checkpoints_list)
    ins = ck_sub.add_parser(
        "inspect",
        help="one checkpoint or savepoint in detail",
        description="Verify a checkpoint or savepoint (PATH: its directory or _metadata) and show its "
        "size per operator and subtask, channel state, alignment and durations. Exit 1 if it is invalid.",
    )
    ins.add_argument("path", metavar="PATH")
    ins.add_argument("--json", action="store_true", help="machine-readable output")
    ins.add_argument("--trust-pickle", action="store_true", help="decode pickle-codec entries (runs code)")
    ins.set_defaults(func=_cmd_checkpoints_inspect)

    sp = sub.add_parser(
        "savepoint",
        help="take a savepoint of a running job",
        description="Trigger a savepoint through the job's REST endpoint and wait for it.",
    )
    sp.add_argument("job_url", metavar="JOB_URL", help="e.g. http://127.0.0.1:8081 or .../jobs/<id>")
    sp.add_argument("dir", metavar="DIR", nargs="?", help=_SP_DIR)
    sp.add_argument("--timeout", type=float, default=120.0, metavar="S", help="seconds to wait (default 120)")
    sp.set_defaults(func=_cmd_savepoint)

    cancel = sub.add_parser(
        "cancel", help="cancel a running job", description="Cancel a running job through its REST endpoint."
    )
    cancel.add_argument("job_url", metavar="JOB_URL", help="e.g. http://127.0.0.1:8081 or .../jobs/<id>")
    cancel.add_argument("--with-savepoint", metavar="DIR", help="take a savepoint into DIR first")
    cancel.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait (default 120)"
    )
    cancel.set_defaults(func=_cmd_cancel)

    stop = sub.add_parser(
        "stop",
        help="stop a running job with a savepoint",
        description="Stop a running job with a synchronous savepoint (Flink's 'flink stop'): its sources "
        "halt at the savepoint, its sinks commit it, the job ends FINISHED.",
    )
    stop.add_argument("job_url", metavar="JOB_URL", help="e.g. http://127.0.0.1:8081 or .../jobs/<id>")
    stop.add_argument("dir", metavar="DIR", help=_SP_DIR)
    stop.add_argument("--drain", action="store_true",
                      help="emit the maximum watermark first: every event-time window fires")  # fmt: skip
    stop.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds to wait (default 120)"
    )
    stop.set_defaults(func=_cmd_stop)

    kafka = sub.add_parser(
        "kafka",
        help="record and replay Kafka topics",
        description="Record a Kafka topic to a file, or replay a recording into a topic.",
    )
    kafka_sub = kafka.add_subparsers(dest="kafka_command", metavar="SUBCOMMAND", required=True)
    rec = kafka_sub.add_parser(
        "record", help="record a topic to a file", description="Record a topic to FILE."
    )
    rep = kafka_sub.add_parser(
        "replay", help="replay a recording into a topic", description="Replay FILE into a topic."
    )
    for kp in (rec, rep):
        kp.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT")
        kp.add_argument("--topic", required=True)
        kp.add_argument("file", metavar="FILE")
        kp.set_defaults(func=_cmd_kafka)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("streamflow").setLevel(level if args.verbose else logging.INFO)
    try:
        return int(args.func(args))
    except CommandError as e:
        sys.stderr.write(f"streamflow: error: {e}\n")
        return e.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
