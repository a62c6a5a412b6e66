"""Word count over a text file: source -> flat_map -> key_by -> sum -> print.

Run: python examples/word_count.py [path]   (defaults to examples/data/lines.txt)
"""

from __future__ import annotations

import sys
from pathlib import Path

from streamflow import StreamExecutionEnvironment

HERE = Path(__file__).parent


def main(path: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    counts = (
        env.read_text_file(path)
        .flat_map(lambda line: [(w.strip(".,;:!?\"'()").lower(), 1) for w in line.split()])
        .filter(lambda pair: pair[0] != "")
        .key_by(lambda pair: pair[0])
        .sum(1)
        .uid("word-counts")
    )
    final: dict[str, int] = {}
    for word, count in counts.execute_and_collect("word count"):
        final[word] = count  # a running count: keep the latest per word
    top = sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    print(f"{len(final)} distinct words; top 10:")
    for word, count in top:
        print(f"  {count:4d}  {word}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(HERE / "data" / "lines.txt"))
