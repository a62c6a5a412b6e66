"""Restoring RocksDB keyed state: the files of a snapshot back into a working DB.

``materialise`` lays a snapshot's DB out in a directory: its SST files from
checkpoint storage (hard links, copies across file systems) and its small
files (CURRENT, MANIFEST, OPTIONS) from the snapshot itself. A missing or
damaged SST file raises :class:`~streamflow.checkpoint.storage.CorruptCheckpointError`
naming it, which the job treats as a damaged checkpoint (refused, or an older
one restored when fallback is enabled).

``copy_key_groups`` is the rescale path: the old DB is materialised in a
scratch directory, opened read-only, and the entries of the key groups the new
subtask owns are copied, one seek per key group range, in WriteBatches of
20,000; state ids are mapped by state name (two subtasks may have numbered
their states differently).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import rocksdict

from ..checkpoint.storage import CorruptCheckpointError

if TYPE_CHECKING:
    from .rocksdb_backend import RocksDBKeyedStateBackend

log = logging.getLogger(__name__)

_BATCH = 20_000


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)  # another file system, or no hard links there


def materialise(snap: dict[str, Any], shared_path: Callable[[str], Path], target: Path) -> None:
    """Lay out the snapshot's DB in ``target`` (created)."""
    target.mkdir(parents=True, exist_ok=False)
    for local, name in snap["files"].items():
        try:
            src = shared_path(name)
            if not src.is_file():
                raise FileNotFoundError(f"{src} is missing")
            _link_or_copy(src, target / local)
        except CorruptCheckpointError:
            raise
        except (OSError, KeyError, ValueError) as e:
            raise CorruptCheckpointError(
                f"RocksDB state file {name} of the checkpoint cannot be restored: {e}", str(name)
            ) from e
    for local, data in snap["inline"].items():
        (target / local).write_bytes(data)


def open_checked(path: Path, snap: dict[str, Any], read_only: bool) -> rocksdict.Rdict:
    """Open a materialised DB; a damaged file is reported as a damaged checkpoint."""
    from .rocksdb_backend import _options

    opts = _options()
    opts.set_paranoid_checks(True)
    try:
        if read_only:
            return rocksdict.Rdict(str(path), opts, access_type=rocksdict.AccessType.read_only())
        return rocksdict.Rdict(str(path), opts)
    except Exception as e:
        names = ", ".join(sorted(snap["files"].values())[:5])
        raise CorruptCheckpointError(
            f"the RocksDB state restored from checkpoint files ({names}) cannot be opened: {e}", str(path)
        ) from e


def copy_key_groups(
    backend: RocksDBKeyedStateBackend, snap: dict[str, Any], shared_path: Callable[[str], Path]
) -> None:
    """Copy the key groups ``backend`` owns from the snapshot's DB into ``backend``'s DB."""
    scratch = Path(tempfile.mkdtemp(prefix="rescale-", dir=backend.root))
    try:
        src_path = scratch / "db"
        materialise(snap, shared_path, src_path)
        src = open_checked(src_path, snap, read_only=True)
        try:
            kinds = snap["kinds"]
            remap = {
                sid.to_bytes(2, "big"): backend.sid_of(name, kinds.get(name, "internal")).to_bytes(2, "big")
                for name, sid in snap["state_ids"].items()
            }
            lo, hi = snap["key_groups"]
            start = max(lo, backend.key_groups.start)
            stop = min(hi, backend.key_groups.stop)
            end = stop.to_bytes(2, "big")
            dst = backend.db
            batch = rocksdict.WriteBatch(raw_mode=True)
            n = 0
            try:
                for k, raw in src.items(from_key=start.to_bytes(2, "big")):
                    rk = cast(bytes, k)
                    if rk[:2] >= end:
                        break
                    sid = remap.get(rk[2:4])
                    if sid is None:
                        continue
                    batch.put(rk[:2] + sid + rk[4:], raw)
                    n += 1
                    if n % _BATCH == 0:
                        dst.write(batch)
                        batch = rocksdict.WriteBatch(raw_mode=True)
            except Exception as e:
                raise CorruptCheckpointError(
                    f"reading RocksDB state of key groups {start}-{stop - 1} from checkpoint files "
                    f"failed: {e}",
                    str(src_path),
                ) from e
            if not batch.is_empty():
                dst.write(batch)
            log.info("rescaled RocksDB state: %d entries of key groups %d-%d copied", n, start, stop - 1)
        finally:
            src.close()
            del src
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
