"""``from_source(source, strategy, name, type_info)``: what it appends after the source (the
conversion to the declared type, the watermark strategy's operator) runs inside Flink's source
operator, so the stream it returns is the source's: its uid, parallelism and side outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from waiting import wait_until

import streamflow as sf
from streamflow.common import Types
from streamflow.connectors.base import DEAD_LETTER, DeadLetter
from streamflow.testing.scripted import ScriptedSource


def _strategy() -> sf.WatermarkStrategy:
    return sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e: e[1])


class _OneBadRecord(ScriptedSource):
    """A source whose reader could not read one record (as a file source with a bad line)."""

    def create_reader(self, subtask_index: int, parallelism: int) -> Any:
        reader = super().create_reader(subtask_index, parallelism)
        letters = [DeadLetter("bad", "file:1", b"{oops", "not JSON")]
        reader.take_dead_letters = lambda: [letters.pop()] if letters else []  # type: ignore[method-assign]
        return reader


def test_the_dead_letters_of_a_source_with_a_strategy_reach_its_side_output() -> None:
    env = sf.StreamExecutionEnvironment()
    stream = env.from_source(_OneBadRecord([("a", 1), ("b", 2)]), _strategy(), "files")
    out: list = []
    dead: list = []
    stream.add_sink(out.append)
    stream.get_side_output(DEAD_LETTER).add_sink(dead.append)
    env.execute("dead letters")  # the job failed: the strategy's operator has no dead letters
    assert out == [("a", 1), ("b", 2)]
    assert [d.location for d in dead] == ["file:1"]


def _plan(env: sf.StreamExecutionEnvironment) -> list[tuple[str, int]]:
    return [(n["type"], n["parallelism"]) for n in json.loads(env.get_execution_plan())["nodes"]]


def test_the_strategy_runs_at_the_sources_parallelism() -> None:
    env = sf.StreamExecutionEnvironment().set_parallelism(4)
    env.from_source(ScriptedSource([("a", 1)]), _strategy(), "src").map(lambda e: e).add_sink(lambda e: None)
    # a non-parallel source: its watermarks come from its one subtask (a rebalance to 4
    # generators gave each a quarter of the records)
    assert _plan(env) == [("Source: src", 1), ("Timestamps/Watermarks", 1), ("Map", 4), ("Sink: Sink", 4)]


def test_settings_on_the_returned_stream_are_the_sources(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x 1\ny 2\n")
    env = sf.StreamExecutionEnvironment().set_parallelism(4)
    files = sf.FileSource.for_record_stream_format(sf.StreamFormat.text_line_format(), str(tmp_path)).build()
    parsed = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda line: int(line.split()[1])
    )
    stream = env.from_source(files, parsed, "files").set_parallelism(2).uid("my-files").name("my files")
    stream.add_sink(lambda e: None)
    assert stream.get_name() == "my files"
    assert _plan(env)[:2] == [("Source: my files", 2), ("Timestamps/Watermarks", 2)]
    (source_node,) = [n for n in env._graph.nodes if n.source is not None]
    assert source_node.uid == "my-files"


async def test_a_uid_keeps_the_sources_position_when_the_job_changes(tmp_path: Path) -> None:
    """The uid names the source, whose position is state: a savepoint restores into a job with
    another source added before it (which changes the generated uids)."""
    live = ScriptedSource([("a", 1), ("b", 2)], end=False)
    env = sf.StreamExecutionEnvironment()
    first: list = []
    env.from_source(live, _strategy(), "src").uid("src").add_sink(first.append)
    client = await env.execute_async("v1")
    await wait_until(lambda: len(first) == 2)
    path = await client.trigger_savepoint(str(tmp_path / "sp"))
    await client.cancel()

    env2 = sf.StreamExecutionEnvironment()
    env2.configure({"execution.savepoint.path": path})
    second: list = []
    env2.from_collection(["other"]).add_sink(lambda e: None)  # a new source first
    again = ScriptedSource([("a", 1), ("b", 2), ("c", 3)])
    env2.from_source(again, _strategy(), "src").uid("src").add_sink(second.append)
    await (await env2.execute_async("v2")).get_job_execution_result()
    assert second == [("c", 3)]  # resumed after b, not from the start


def test_the_timestamp_assigner_sees_the_declared_type() -> None:
    """PyFlink's assigner gets records of ``type_info`` (a ``Row`` here, read by field name)."""
    env = sf.StreamExecutionEnvironment()
    row = Types.ROW_NAMED(["word", "ts"], [Types.STRING(), Types.LONG()])
    by_name = sf.WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r: r.ts)
    out: list = []
    env.from_source(ScriptedSource([("a", 5), ("b", 7)]), by_name, "src", type_info=row).add_sink(out.append)
    env.execute("typed")
    assert [(r.word, r.ts) for r in out] == [("a", 5), ("b", 7)]
