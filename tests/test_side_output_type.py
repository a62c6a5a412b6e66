"""A side-output stream takes its OutputTag's type, as in PyFlink (print shows the JVM's format)."""

from __future__ import annotations

import pytest

from streamflow.common import Types
from streamflow.datastream import OutputTag, ProcessFunction, StreamExecutionEnvironment


class Split(ProcessFunction):
    def __init__(self, tag: OutputTag) -> None:
        self.tag = tag

    def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
        yield value
        yield self.tag, (value, len(value))


def test_side_output_stream_has_the_tags_type(capsys: pytest.CaptureFixture[str]) -> None:
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    tag = OutputTag("side", Types.TUPLE([Types.STRING(), Types.INT()]))
    main = env.from_collection(["ab", "c"], type_info=Types.STRING()).process(Split(tag), Types.STRING())
    side = main.get_side_output(tag)
    assert side.get_type() == tag.type_info
    side.print()
    env.execute()
    assert sorted(capsys.readouterr().out.split()) == ["(ab,2)", "(c,1)"]  # JVM toString, not Python's
