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


def test_side_output_records_take_the_tags_type() -> None:
    """PyFlink's ``get_side_output(tag)`` is ``ds.map(lambda i: i, output_type=tag.type_info)``
    (flink-python/pyflink/datastream/data_stream.py) and the side output crosses the JVM with the
    tag's serializer: a ``Types.ROW`` tag gives ``Row``s (``r.f0`` works), a ``Types.DOUBLE`` tag
    floats, whatever the function yielded (a tuple, an int). The records went on as yielded; so
    do the late records of a window's ``side_output_late_data`` now take their tag's type."""
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    rows = OutputTag("rows", Types.ROW([Types.STRING(), Types.INT()]))
    doubles = OutputTag("doubles", Types.DOUBLE())

    class Both(ProcessFunction):
        def process_element(self, value, ctx):  # type: ignore[no-untyped-def]
            yield value
            yield rows, (value, len(value))
            yield doubles, len(value)

    main = env.from_collection(["ab", "c"], type_info=Types.STRING()).process(Both(), Types.STRING())
    got_rows = main.get_side_output(rows).map(lambda r: (r.f0, r.f1, type(r).__name__)).execute_and_collect()
    assert sorted(got_rows) == [("ab", 2, "Row"), ("c", 1, "Row")]
    main = env.from_collection(["ab", "c"], type_info=Types.STRING()).process(Both(), Types.STRING())
    got_doubles = main.get_side_output(doubles).map(lambda d: (d, type(d).__name__)).execute_and_collect()
    assert sorted(got_doubles) == [(1.0, "float"), (2.0, "float")]
