"""The server's checkpoint in the run folder, written at each round boundary and read by
``server --resume RUN``.

``RUN/checkpoint.json`` holds the format, the run's configuration (plan and its options, the
secure-sum configuration, the software version: the run's seed is the plan's), the round to
resume at, the plan's server state (arrays replaced by references), what the server context
keeps (who is still in the run, who left and why, abandoned sums, element counts), the clients
the run started with, the round log so far and earlier resumptions. The state's arrays go to
``RUN/checkpoint-<round>-<digest>.npz``, whose SHA-256 the JSON names; it is read back with
``allow_pickle=False``.

Written so that a crash at any moment leaves the previous checkpoint or the new one, whole: the
arrays under a new name, then the JSON through a temporary file and ``os.replace``, then the
array files no checkpoint names any more are removed. Nothing secret: no key, share, seed or
client data; the server state of the plans that resume is metrics and (with mask or plain) the
global model the server held anyway. Reading the JSON needs no torch (``read``), so the command
line checks ``--resume`` before its heavy imports.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from secure_fedgraph.errors import ConfigError

FORMAT = 1
NAME = "checkpoint.json"
_ARRAY = "__array__"


@dataclass(frozen=True)
class Checkpoint:
    """A run at a round boundary.

    Attributes:
        run: the run's configuration ({"plan": ..., "secure_sum": ..., "version": ...}).
        round: the round a resumed run starts at.
        state: the plan's server state at that boundary (JSON values and numpy arrays).
        context: ``ServerContext.snapshot()`` at that boundary.
        run_clients: the clients the run started with (every floor is counted on them).
        plan_clients: how many clients the plan names (its ``--clients``).
        round_log: the per-round rows so far (metrics, bytes, seconds).
        resumptions: earlier resumptions ({"round", "clients"}).
        finished: the run ended (nothing to resume).
    """

    run: dict[str, Any]
    round: int
    state: Any
    context: dict[str, Any]
    run_clients: list[int]
    plan_clients: int
    round_log: list[dict[str, Any]] = field(default_factory=list)
    resumptions: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False


def save(folder: str | os.PathLike, checkpoint: Checkpoint) -> Path:
    """Write ``checkpoint`` into ``folder`` atomically; returns the JSON's path."""
    folder = Path(folder)
    tree, arrays = _split(checkpoint.state)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = None
    if arrays:
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        blob = buffer.getvalue()
        digest = hashlib.sha256(blob).hexdigest()
        tensors = {"file": f"checkpoint-{checkpoint.round}-{digest[:16]}.npz", "sha256": digest}
        _write_atomically(folder / tensors["file"], blob)
    document = {
        "format": FORMAT, "run": checkpoint.run, "round": checkpoint.round, "state": tree, "tensors": tensors,
        "context": checkpoint.context, "run_clients": checkpoint.run_clients, "plan_clients": checkpoint.plan_clients,
        "round_log": checkpoint.round_log, "resumptions": checkpoint.resumptions, "finished": checkpoint.finished,
    }
    path = folder / NAME
    _write_atomically(path, json.dumps(document, indent=1, sort_keys=True, default=_plain).encode())
    for stale in folder.glob("checkpoint-*.npz"):
        if tensors is None or stale.name != tensors["file"]:
            stale.unlink(missing_ok=True)
    return path


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


# what read() requires of each field of checkpoint.json
_FIELDS = {
    "run": lambda v: (isinstance(v, dict) and isinstance(v.get("plan"), dict) and isinstance(v["plan"].get("plan"), str)
                      and isinstance(v["plan"].get("config"), dict) and isinstance(v.get("secure_sum"), dict) and isinstance(v.get("version"), str)),
    "round": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "state": lambda v: True,
    "tensors": lambda v: v is None or (isinstance(v, dict) and isinstance(v.get("file"), str) and isinstance(v.get("sha256"), str)),
    "context": lambda v: isinstance(v, dict) and _ints(v.get("live")),
    "run_clients": _ints,
    "plan_clients": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "round_log": lambda v: isinstance(v, list),
    "resumptions": lambda v: isinstance(v, list),
    "finished": lambda v: isinstance(v, bool),
}


def clear(folder: str | os.PathLike) -> None:
    """Remove the checkpoint in ``folder``, if any: a new run there replaces an earlier one."""
    folder = Path(folder)
    for path in [folder / NAME, *folder.glob("checkpoint-*.npz")]:
        path.unlink(missing_ok=True)


def finish(folder: str | os.PathLike) -> None:
    """Mark the checkpoint in ``folder`` (if any) as of a finished run, so ``--resume`` says so."""
    path = Path(folder) / NAME
    if path.is_file():
        document = json.loads(path.read_text())
        document["finished"] = True
        _write_atomically(path, json.dumps(document, indent=1, sort_keys=True).encode())


def read(folder: str | os.PathLike) -> dict[str, Any]:
    """The checkpoint's JSON (no torch, no arrays): what the command line checks first.

    Raises:
        ConfigError: no checkpoint in ``folder``, or not one this version can read.
    """
    path = Path(folder) / NAME
    if not path.is_file():
        raise ConfigError(f"--resume {folder}: no {NAME} there; a server writes it at every round boundary of a plan that can resume "
                          "(is this the run's --out folder?)")
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--resume {folder}: {path} is not a readable checkpoint ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        found = document.get("format") if isinstance(document, dict) else None
        raise ConfigError(f"--resume {folder}: {path} has checkpoint format {found!r}; this secure-fedgraph reads format {FORMAT}")
    wrong = [name for name, check in _FIELDS.items() if name not in document or not check(document[name])]
    if wrong:
        raise ConfigError(f"--resume {folder}: {path} is not a checkpoint this secure-fedgraph can read ({', '.join(wrong)} missing or malformed)")
    if document["finished"]:
        raise ConfigError(f"--resume {folder}: that run finished; nothing to resume (its metrics are in {Path(folder) / 'metrics.json'})")
    return document


def load(folder: str | os.PathLike, *, run: dict[str, Any]) -> Checkpoint:
    """The checkpoint in ``folder``, refused unless it belongs to ``run`` (the configuration the
    caller means to go on with).

    Raises:
        ConfigError: missing, unreadable, finished, of another run, or its arrays altered.
    """
    document = read(folder)
    changed = differences(document["run"], run)
    if changed:
        raise ConfigError(f"--resume {folder}: the checkpoint is of another run ({'; '.join(changed[:4])})")
    state = document["state"]
    tensors = document["tensors"]
    if tensors is not None:
        state = _join(state, _load_arrays(Path(folder), tensors, folder))
    return Checkpoint(run=document["run"], round=int(document["round"]), state=state, context=document["context"],
                      run_clients=[int(c) for c in document["run_clients"]], plan_clients=int(document["plan_clients"]),
                      round_log=document["round_log"], resumptions=document["resumptions"], finished=False)


def _load_arrays(folder: Path, tensors: dict[str, str], shown: Any) -> dict[str, Any]:
    import numpy as np

    path = folder / Path(tensors["file"]).name
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--resume {shown}: cannot read the checkpoint's arrays {path} ({exc.strerror})") from None
    if hashlib.sha256(blob).hexdigest() != tensors["sha256"]:
        raise ConfigError(f"--resume {shown}: {path} does not match the SHA-256 that {NAME} names (altered or partly written)")
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def differences(found: dict[str, Any], wanted: dict[str, Any], prefix: str = "") -> list[str]:
    """What differs between two configurations, as "where: there vs here" lines."""
    lines = []
    for key in sorted(set(found) | set(wanted)):
        a, b = found.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            lines += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            lines.append(f"{prefix}{key} is {a!r} there, {b!r} here")
    return lines


def _split(tree: Any, arrays: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """``tree`` with every numpy array replaced by {"__array__": key}; the arrays by key."""
    arrays = {} if arrays is None else arrays
    if isinstance(tree, dict):
        return {str(k): _split(v, arrays)[0] for k, v in tree.items()}, arrays
    if isinstance(tree, list | tuple):
        return [_split(v, arrays)[0] for v in tree], arrays
    if type(tree).__module__ == "numpy" and getattr(tree, "shape", ()) != ():
        key = f"a{len(arrays)}"
        arrays[key] = tree
        return {_ARRAY: key}, arrays
    return (_plain(tree) if type(tree).__module__ == "numpy" else tree), arrays


def _join(tree: Any, arrays: dict[str, Any]) -> Any:
    if isinstance(tree, dict):
        if set(tree) == {_ARRAY}:
            if tree[_ARRAY] not in arrays:
                raise ConfigError(f"the checkpoint names an array {tree[_ARRAY]!r} that its array file does not hold")
            return arrays[tree[_ARRAY]]
        return {k: _join(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_join(v, arrays) for v in tree]
    return tree


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (JSON)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"a checkpoint holds JSON values and numpy arrays, not {type(value).__name__}")


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, rename it over
    ``path``, and flush the folder: readers see the old file or the new one, never a part."""
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
