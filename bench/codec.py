"""Checkpoint codec benchmark: msgpack with extension types vs msgspec, on realistic state.

    python bench/codec.py [--keys 1000000] [--legacy path/to/old_codec.py]

Each workload is shaped like what the state backend snapshots (``{"groups":
{key group: {state name: {key: value}}}}``) or like in-flight channel
state (batches of record tuples). Every candidate must round-trip the value
exactly (tuples stay tuples), which is checked before timing. Candidates:

* ``msgpack``: streamflow's codec (``strict_types`` + extension types);
* ``msgspec+prepass``: msgspec's MessagePack encoder, which packs tuples as
  arrays with no hook, so tuples/sets/big ints are first wrapped in
  ``msgspec.msgpack.Ext`` by a Python pass (the only way to keep their types);
* ``msgspec (lossy)``: msgspec alone, for reference: fast but tuples come back
  as lists, so it does not meet the codec's guarantees;
* ``legacy``: the former hand-written orjson tagging, when ``--legacy`` names its file.

All candidates run with the cyclic GC paused, as streamflow's codec does.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import msgspec

from streamflow.state import codec
from streamflow.state.key_groups import key_group_of


def keyed(n: int, value: Callable[[int], Any], key: Callable[[int], Any]) -> dict[str, Any]:
    groups: dict[int, dict[str, dict]] = {}
    for i in range(n):
        k = key(i)
        groups.setdefault(key_group_of(k, 128), {}).setdefault("state", {})[k] = value(i)
    return {"kinds": {"state": "value"}, "key_types": [type(key(0)).__name__], "groups": groups}


def workloads(n: int) -> dict[str, Any]:
    return {
        f"{n:,} str keys -> int (running sum)": keyed(n, lambda i: i * 3, lambda i: f"user-{i}"),
        f"{n:,} int keys -> (count, total, last) tuple": keyed(n, lambda i: (i, i * 0.5, "x"), lambda i: i),
        f"{n:,} str keys -> small dict": keyed(n, lambda i: {"n": i, "avg": i / 3}, lambda i: f"k{i}"),
        "in flight: 400 batches x 256 (str, int, float) records": [
            ([(f"k{j % 97}", j, j * 0.25) for j in range(256)], None) for _ in range(400)
        ],
    }


# ---------------------------------------------------------------- msgspec with a type-keeping pre-pass

_Ext = msgspec.msgpack.Ext


def _pre(obj: Any) -> Any:
    t = type(obj)
    if t is str or t is float or t is bool or obj is None or t is bytes:
        return obj
    if t is int:
        return obj if -(2**63) <= obj < 2**64 else codec._enc_bigint(obj)
    if t is list:
        return [_pre(x) for x in obj]
    if t is dict:
        return {_pre(k): _pre(v) for k, v in obj.items()}
    if t is tuple:
        return _Ext(1, _ms_enc.encode([_pre(x) for x in obj]))
    if t is set or t is frozenset:
        return _Ext(2 if t is set else 3, _ms_enc.encode([_pre(x) for x in obj]))
    raise TypeError(t)


def _ms_ext(code: int, data: memoryview) -> Any:
    if code == 1:
        return tuple(_ms_dec.decode(data))
    if code == 2:
        return set(_ms_dec.decode(data))
    return frozenset(_ms_dec.decode(data))


_ms_enc = msgspec.msgpack.Encoder()
_ms_dec = msgspec.msgpack.Decoder(ext_hook=_ms_ext)
_ms_plain = msgspec.msgpack.Decoder()


def candidates(legacy: str | None) -> dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any], bool]]:
    out = {
        "msgpack": (codec.encode, codec.decode, True),
        "msgspec+prepass": (gc_paused(lambda v: _ms_enc.encode(_pre(v))), gc_paused(_ms_dec.decode), True),
        "msgspec (lossy)": (gc_paused(_ms_enc.encode), gc_paused(_ms_plain.decode), False),
    }
    if legacy:
        spec = importlib.util.spec_from_file_location("legacy_codec", legacy)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out["legacy orjson tagging"] = (gc_paused(mod.encode), gc_paused(mod.decode), True)
    return out


def gc_paused(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The same cyclic-GC pause streamflow's codec applies, so every candidate is timed alike."""

    def run(value: Any) -> Any:
        with codec._gc_paused():
            return fn(value)

    return run


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(2):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--legacy", help="file of the former orjson codec, to compare")
    args = ap.parse_args()
    cands = candidates(args.legacy)
    print(f"{'workload':52} {'codec':22} {'encode s':>9} {'decode s':>9} {'MB':>7}  exact")
    for wname, value in workloads(args.keys).items():
        for cname, (enc, dec, _) in cands.items():
            t_enc, data = timed(lambda enc=enc, value=value: enc(value))
            t_dec, back = timed(lambda dec=dec, data=data: dec(data))
            exact = repr(back) == repr(value)
            print(f"{wname:52} {cname:22} {t_enc:9.3f} {t_dec:9.3f} {len(data) / 1e6:7.1f}  {exact}")


if __name__ == "__main__":
    main()
