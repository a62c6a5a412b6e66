"""List the public names of the PyFlink modules streamflow mirrors, from an apache-flink wheel.

Usage: pip download apache-flink==2.3.0 --no-deps -d /tmp/pyflink
       python scripts/extract_pyflink_names.py /tmp/pyflink/apache_flink-2.3.0-*.whl \
           > tests/pyflink_material/pyflink_names.json
       python scripts/extract_pyflink_names.py --imported /tmp/pyflink/apache_flink-2.3.0-*.whl \
           > tests/pyflink_material/pyflink_imported_names.json
       python scripts/extract_pyflink_names.py --members /tmp/pyflink/apache_flink-2.3.0-*.whl \
           > tests/pyflink_material/pyflink_members.json
       python scripts/extract_pyflink_names.py --signatures /tmp/pyflink/apache_flink-2.3.0-*.whl \
           > tests/pyflink_material/pyflink_signatures.json

``--members``: for each class those modules export, its public members (methods, nested
classes and their members as ``Outer.inner``, class-level names such as enum members), from
the class's definition in the wheel: ``tests/pyflink_material/pyflink_members.json``.

``--imported``: for each module, the names it imports from its other modules that are public
there (in some module's list): ``from pyflink.datastream.connectors.kafka import
DeliveryGuarantee`` works in PyFlink, so it must here (``streamflow/api/pyflink_reexports.py``).

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
    # the modules behind the package-level names, imported by their full path too
    "pyflink.common.completable_future",
    "pyflink.common.config_options",
    "pyflink.common.execution_config",
    "pyflink.common.input_dependency_constraint",
    "pyflink.common.job_client",
    "pyflink.common.job_execution_result",
    "pyflink.common.job_id",
    "pyflink.common.job_status",
    "pyflink.common.restart_strategy",
    "pyflink.datastream.checkpoint_config",
    "pyflink.datastream.checkpoint_storage",
    "pyflink.datastream.checkpointing_mode",
    "pyflink.datastream.externalized_checkpoint_retention",
    "pyflink.datastream.slot_sharing_group",
    "pyflink.datastream.stream_execution_environment",
    "pyflink.datastream.time_domain",
    "pyflink.datastream.timerservice",
    "pyflink.datastream.state_backend",
    "pyflink.datastream.async_data_stream",
    "pyflink.metrics.metricbase",
    "pyflink.common.types",  # Row and RowKind by their full path
    "pyflink.datastream.async_retry_strategies",
    "pyflink.datastream.async_retry_predicates",
    # the row formats the Kafka examples use (Avro, ORC, Parquet need Java format jars)
    "pyflink.datastream.formats.json",
    "pyflink.datastream.formats.csv",
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


def imported_names(source: str) -> set[str]:
    """Names a module imports (``from pyflink... import X``) at its top level."""
    return {
        a.asname or a.name
        for node in ast.parse(source).body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pyflink")
        for a in node.names
        if not (a.asname or a.name).startswith("_") and a.name != "*"
    }


def class_members(cls: ast.ClassDef, prefix: str = "") -> list[str]:
    """Public members a class defines itself (methods, nested classes with their members,
    class-level assignments)."""
    out: list[str] = []
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
            out.append(prefix + node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out.append(prefix + node.name)
            out += class_members(node, f"{prefix}{node.name}.")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [prefix + t.id for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_")]
    return out


def signature(node: ast.FunctionDef) -> dict[str, object]:
    """A method's parameters (without self/cls), how many are required, and whether it takes
    ``*args``/``**kwargs``."""
    args = node.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    required = len(positional) - len(args.defaults)
    if positional and positional[0] in ("self", "cls"):
        positional, required = positional[1:], required - 1
    return {
        "params": positional + [a.arg for a in args.kwonlyargs],
        "required": max(required, 0),
        "varargs": args.vararg is not None,
        "varkw": args.kwarg is not None,
    }


def signatures(zf: zipfile.ZipFile, exported: dict[str, list[str]]) -> dict[str, dict[str, object]]:
    """``{"module.Class": {method: signature}}`` for the public methods of the exported classes."""
    out: dict[str, dict[str, object]] = {}
    for key, cls in _exported_classes(zf, exported):
        methods = {
            n.name: signature(n)
            for n in cls.body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
        }
        if methods:
            out[key] = methods
    return out


def _exported_classes(zf: zipfile.ZipFile, exported: dict[str, list[str]]) -> list[tuple[str, ast.ClassDef]]:
    definitions: dict[str, ast.ClassDef] = {}
    for path in sorted(zf.namelist()):
        if not path.startswith("pyflink/") or not path.endswith(".py") or "/tests/" in path:
            continue
        if path.startswith(("pyflink/table/", "pyflink/examples/")):
            continue
        for node in ast.parse(zf.read(path).decode()).body:
            if isinstance(node, ast.ClassDef):
                definitions.setdefault(node.name, node)
    out: list[tuple[str, ast.ClassDef]] = []
    seen: set[str] = set()
    for module in MODULES:
        for name in exported[module]:
            if name not in seen and name in definitions:
                seen.add(name)
                out.append((f"{module}.{name}", definitions[name]))
    return out


def members(zf: zipfile.ZipFile, exported: dict[str, list[str]]) -> dict[str, list[str]]:
    """``{"module.Class": [member, ...]}`` for every class the modules export (each class once,
    under the first module, in MODULES order, that exports it)."""
    return {key: listed for key, cls in _exported_classes(zf, exported) if (listed := class_members(cls))}


def main(
    wheel: str, imported: bool = False, with_members: bool = False, with_signatures: bool = False
) -> None:
    out: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        files = set(zf.namelist())
        for module in MODULES:
            path = module.replace(".", "/")
            path = f"{path}/__init__.py" if f"{path}/__init__.py" in files else f"{path}.py"
            sources[module] = zf.read(path).decode()
            out[module] = public_names(sources[module])
        if with_signatures:
            json.dump(signatures(zf, out), sys.stdout, indent=1, sort_keys=True)
            sys.stdout.write("\n")
            return
        if with_members:
            json.dump(members(zf, out), sys.stdout, indent=1, sort_keys=True)
            sys.stdout.write("\n")
            return
    if imported:
        public = {n for names in out.values() for n in names}
        out = {
            module: names
            for module in MODULES
            if (names := sorted((imported_names(sources[module]) & public) - set(out[module])))
        }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    flags = sys.argv[1:]
    main(sys.argv[-1], "--imported" in flags, "--members" in flags, "--signatures" in flags)
