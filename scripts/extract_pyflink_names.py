"""List the public names of the PyFlink modules streamflow mirrors, from an apache-flink wheel.

Usage: pip download apache-flink==2.3.0 --no-deps -d /tmp/pyflink
       python scripts/extract_pyflink_names.py /tmp/pyflink/apache_flink-2.3.0-*.whl \
           > tests/pyflink_material/pyflink_names.json

A module's names are its ``__all__`` when it has one, else its top-level public
classes and functions (read with ``ast``: PyFlink itself is not imported).
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile

MODULES = [
    "pyflink.common",
    "pyflink.common.typeinfo",
    "pyflink.common.time",
    "pyflink.common.watermark_strategy",
    "pyflink.common.serialization",
    "pyflink.common.configuration",
    "pyflink.common.serializer",
    "pyflink.datastream",
    "pyflink.datastream.functions",
    "pyflink.datastream.state",
    "pyflink.datastream.window",
    "pyflink.datastream.data_stream",
    "pyflink.datastream.connectors",
    "pyflink.datastream.connectors.base",
    "pyflink.datastream.connectors.file_system",
    "pyflink.datastream.connectors.kafka",
    "pyflink.datastream.connectors.number_seq",
    "pyflink.datastream.execution_mode",
    "pyflink.datastream.output_tag",
    "pyflink.metrics",
]


def public_names(source: str) -> list[str]:
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return sorted({ast.literal_eval(e) for e in node.value.elts})  # type: ignore[attr-defined]
    return sorted(
        n.name
        for n in tree.body
        if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and not n.name.startswith("_")
    )


def main(wheel: str) -> None:
    out: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as zf:
        files = set(zf.namelist())
        for module in MODULES:
            path = module.replace(".", "/")
            path = f"{path}/__init__.py" if f"{path}/__init__.py" in files else f"{path}.py"
            out[module] = public_names(zf.read(path).decode())
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
