"""Modules stay small: the project's standard is one concept per module, modules under ~500 lines.

Every ``.py`` file of the package, ``bench/`` and ``examples/`` has at most ``LIMIT``
lines (as ``wc -l`` counts them); tests are not bound. The modules in ``OVER_LIMIT``
would be over it, each with a ceiling it may not grow past (empty since the four split
on 2026-11-27: keyed.py, codec.py, task.py, datastream.py). Remove an entry once its
module is split under the limit.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOUND = ("streamflow", "bench", "examples")
LIMIT = 500

OVER_LIMIT: dict[str, int] = {}  # module -> its ceiling (none today: every module is within LIMIT)


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def _modules() -> list[Path]:
    return sorted(p for folder in BOUND for p in (ROOT / folder).rglob("*.py"))


def test_every_module_is_within_the_limit() -> None:
    modules = _modules()
    assert len(modules) > 200, f"found only {len(modules)} modules under {BOUND}: wrong root {ROOT}?"
    over = {}
    for path in modules:
        name = path.relative_to(ROOT).as_posix()
        lines, ceiling = _line_count(path), OVER_LIMIT.get(name, LIMIT)
        if lines > ceiling:
            over[name] = f"{lines} lines (at most {ceiling})"
    assert not over, (
        f"modules over the size limit: {over}. Split each along a concept boundary (one concept per "
        "module, its own docstring), keeping the old import path working by re-exporting from it"
    )


def test_the_listed_exceptions_name_modules() -> None:
    missing = [name for name in OVER_LIMIT if not (ROOT / name).is_file()]
    assert not missing, f"OVER_LIMIT names modules that do not exist: {missing}"


def test_the_line_count_is_what_wc_counts(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("a = 1\n" * (LIMIT + 1), encoding="utf-8")
    assert _line_count(sample) == LIMIT + 1
    sample.write_text("a = 1\n" * LIMIT + "b = 2", encoding="utf-8")  # no final newline: wc -l says LIMIT
    assert _line_count(sample) == LIMIT
