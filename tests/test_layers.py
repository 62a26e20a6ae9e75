"""Imports point one way (issue 13, issue 30): the lower rooms never import the higher ones, so a
reader of data/, models/ or training/ needs nothing from the protocol or the plans, the mask
server role needs nothing from the client role, and protocol/ stands on floors that only look
down: core/ (the vocabulary), then sum_backends/ (the secure-sum backends) and collectives/
(the clients' needs; neither knows the other), then transports/ (which know nothing of the
collectives), then engine/ (plans' contexts, the client host,
one process's wiring). FORBIDDEN is README's "Layout" section written as code: change both
together. No module imports itself back through others, not even inside a function
(test_no_import_cycles), and a module's file name says one thing (test_a_file_name_means_one_thing)."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "secure_fedgraph"

SECURE_SUM_MODULES = sorted(p.stem for p in (ROOT / "protocol" / "sum_backends").glob("*.py") if p.stem != "__init__")

# folder (relative to the repository root) -> module prefixes it must not import
_RUNTIMES = ("secure_fedgraph.server", "secure_fedgraph.clients", "secure_fedgraph.runs", "secure_fedgraph.cli")
FORBIDDEN = {
    "secure_fedgraph/crypto": ("secure_fedgraph.papers", "secure_fedgraph.protocol", "secure_fedgraph.training", "secure_fedgraph.models",
                               "secure_fedgraph.data", "secure_fedgraph.privacy", *_RUNTIMES),
    "secure_fedgraph/data": ("secure_fedgraph.papers", "secure_fedgraph.protocol", "secure_fedgraph.training", "secure_fedgraph.models",
                             "secure_fedgraph.crypto", "secure_fedgraph.privacy", *_RUNTIMES),
    "secure_fedgraph/models": ("secure_fedgraph.papers", "secure_fedgraph.protocol", "secure_fedgraph.training", "secure_fedgraph.data",
                               "secure_fedgraph.crypto", "secure_fedgraph.privacy", *_RUNTIMES),
    "secure_fedgraph/privacy": ("secure_fedgraph.papers", "secure_fedgraph.protocol", "secure_fedgraph.training", "secure_fedgraph.models",
                                "secure_fedgraph.data", *_RUNTIMES),
    "secure_fedgraph/training": ("secure_fedgraph.papers", "secure_fedgraph.protocol", "secure_fedgraph.crypto", *_RUNTIMES),
    "secure_fedgraph/papers": ("secure_fedgraph.protocol.transports", "secure_fedgraph.protocol.sum_backends", "secure_fedgraph.crypto", *_RUNTIMES),
    "secure_fedgraph/runs": ("secure_fedgraph.cli",),
    "secure_fedgraph/audit": _RUNTIMES,
    "secure_fedgraph/errors.py": ("secure_fedgraph",),
    "secure_fedgraph/seeds.py": ("secure_fedgraph",),
    "secure_fedgraph/identity_uris.py": ("secure_fedgraph",),
    "secure_fedgraph/validation.py": ("secure_fedgraph.crypto", "secure_fedgraph.data", "secure_fedgraph.models", "secure_fedgraph.papers",
                                      "secure_fedgraph.privacy", "secure_fedgraph.protocol", "secure_fedgraph.training", *_RUNTIMES),
    "secure_fedgraph/resources.py": ("secure_fedgraph.crypto", "secure_fedgraph.data", "secure_fedgraph.models", "secure_fedgraph.papers",
                                     "secure_fedgraph.privacy", "secure_fedgraph.protocol", "secure_fedgraph.training", *_RUNTIMES),
    "protocol": ("secure_fedgraph.papers", *_RUNTIMES),
    # protocol's floors, bottom up: core < sum_backends, collectives < transports < engine
    "protocol/core": ("secure_fedgraph.protocol.sum_backends", "secure_fedgraph.protocol.collectives", "secure_fedgraph.protocol.transports",
                      "secure_fedgraph.protocol.engine"),
    "protocol/sum_backends": ("secure_fedgraph.protocol.transports", "secure_fedgraph.protocol.collectives", "secure_fedgraph.protocol.engine",
                              "secure_fedgraph.training"),
    "protocol/sum_backends/mask_server.py": ("secure_fedgraph.protocol.sum_backends.mask_client",),
    "protocol/collectives": ("secure_fedgraph.protocol.sum_backends", "secure_fedgraph.protocol.transports", "secure_fedgraph.protocol.engine",
                             "secure_fedgraph.crypto", "secure_fedgraph.training"),
    # the transports carry the secure-sum messages (codec.py encodes them) and nothing else of sum_backends/
    "protocol/transports": (*(f"secure_fedgraph.protocol.sum_backends.{m}" for m in SECURE_SUM_MODULES if m != "messages"),
                            "secure_fedgraph.protocol.collectives", "secure_fedgraph.protocol.engine", "secure_fedgraph.crypto",
                            "secure_fedgraph.training"),
    "server": ("secure_fedgraph.runs", "secure_fedgraph.cli", "secure_fedgraph.clients"),
    "clients": ("secure_fedgraph.runs", "secure_fedgraph.cli", "secure_fedgraph.server"),
}


def imported_modules(path: pathlib.Path) -> set[str]:
    """Every absolute module a file imports, whether at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def violations(target: str, forbidden: tuple[str, ...]) -> list[str]:
    place = ROOT / target
    files = [place] if place.is_file() else sorted(place.rglob("*.py"))
    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in sorted(imported_modules(path))
        if any(name == prefix or name.startswith(prefix + ".") for prefix in forbidden)
    ]


@pytest.mark.parametrize("target", sorted(FORBIDDEN))
def test_lower_rooms_do_not_import_higher_ones(target):
    assert violations(target, FORBIDDEN[target]) == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The guard itself can fail: a file importing a forbidden module is reported."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "leaf.py").write_text("def f():\n    from secure_fedgraph.papers.base import Plan\n")
    assert violations("room", ("secure_fedgraph.papers",)) == ["room/leaf.py imports secure_fedgraph.papers.base", "room/leaf.py imports secure_fedgraph.papers.base.Plan"]


def test_the_check_sees_an_upward_import_between_protocol_floors():
    """A planted import of the engine from core/ (the vocabulary floor) is reported."""
    planted = ROOT / "protocol" / "core" / "_planted_upward.py"
    planted.write_text("def f():\n    from secure_fedgraph.protocol.engine.contexts import ClientHost\n")
    try:
        found = violations("protocol/core", FORBIDDEN["protocol/core"])
    finally:
        planted.unlink()
    assert "protocol/core/_planted_upward.py imports secure_fedgraph.protocol.engine.contexts" in found


# --- import cycles -----------------------------------------------------------------------------

PACKAGE_ROOTS = {"secure_fedgraph": "secure_fedgraph", "protocol": "secure_fedgraph.protocol", "server": "secure_fedgraph.server",
                 "clients": "secure_fedgraph.clients"}  # folder -> the package it installs as (pyproject package-dir)


def installed_modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Every module of the package, by the dotted name it is imported as."""
    modules = {}
    for folder, dotted in PACKAGE_ROOTS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([dotted, *parts])] = path
    return modules


def import_edges(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The package's modules a file imports, at the top or inside a function: ``from p import m``
    is an edge to the module p.m where m is one (not to p's __init__), else to p."""
    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            edges.update(filter(None, (resolve(alias.name) for alias in node.names)))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                edges.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else resolve(node.module))
    edges.discard(None)
    return edges


def import_cycles(root: pathlib.Path) -> list[list[str]]:
    """Groups of modules that import each other, directly or around a loop (Tarjan's strongly
    connected components, iteratively)."""
    modules = installed_modules(root)
    graph = {m: sorted(import_edges(p, modules) - {m}) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_import_cycles():
    assert import_cycles(ROOT) == []


def test_the_check_sees_a_cycle_hidden_inside_a_function(tmp_path):
    """The guard itself can fail: two modules that import each other, one only inside a function."""
    for folder in PACKAGE_ROOTS:
        (tmp_path / folder).mkdir()
    (tmp_path / "secure_fedgraph" / "a.py").write_text("from secure_fedgraph import b\n")
    (tmp_path / "secure_fedgraph" / "b.py").write_text("def f():\n    from secure_fedgraph.a import g\n")
    (tmp_path / "secure_fedgraph" / "c.py").write_text("from secure_fedgraph import a\n")
    assert import_cycles(tmp_path) == [["secure_fedgraph.a", "secure_fedgraph.b"]]


# File names that recur in different rooms because they are one concept at two levels, and why.
SAME_CONCEPT = {
    "base.py": "the base class of a room's members: papers/base.py (plans), audit/attacks/base.py (attacks)",
    "ckks.py": "CKKS the scheme (crypto/ckks.py, TenSEAL contexts) and the secure-sum backend built on it (sum_backends/ckks.py)",
    "messages.py": "the wire messages of a session (core/) and of the secure sum (sum_backends/), both encoded by transports/codec.py",
    "runtime.py": "the two ends of a run across processes: server/runtime.py and clients/runtime.py",
    "skellam.py": "Skellam noise: drawn (privacy/mechanisms/) and its RDP bound (privacy/analysis/)",
    "cnfgnn.py": "a paper: its model, plan and audit attack", "fedstgd.py": "a paper: its model and plan",
    "nfedgnn.py": "a paper: its plan and audit attack",
}


def test_a_file_name_means_one_thing():
    """No two modules of the package share a file name (``noise.py`` meant two things, and the
    secure-sum package, collective and method shared one) unless SAME_CONCEPT says why."""
    rooms = [PACKAGE, ROOT / "protocol", ROOT / "server", ROOT / "clients"]
    by_name: dict[str, list[str]] = {}
    for room in rooms:
        for path in room.rglob("*.py"):
            if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts:
                by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert shared.keys() <= SAME_CONCEPT.keys(), {name: paths for name, paths in shared.items() if name not in SAME_CONCEPT}
    assert SAME_CONCEPT.keys() <= shared.keys(), f"SAME_CONCEPT lists names no longer shared: {SAME_CONCEPT.keys() - shared.keys()}"
