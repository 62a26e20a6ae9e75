"""Imports point one way (issue 13): the lower rooms never import the higher ones, so a reader
of data/, models/ or training/ needs nothing from the protocol or the plans, the mask
server role needs nothing from the client role, and the secure-sum backends and the transports
know nothing of each other (protocol/local.py wires them together). FORBIDDEN is README's
"Layout" section written as code: change both together."""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "secure_fedgraph"

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
    "secure_fedgraph/papers": ("secure_fedgraph.protocol.transports", "secure_fedgraph.protocol.secure_sum", "secure_fedgraph.crypto", *_RUNTIMES),
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
    "protocol/secure_sum": ("secure_fedgraph.protocol.transports", "secure_fedgraph.protocol.collectives", "secure_fedgraph.protocol.engine",
                            "secure_fedgraph.protocol.local", "secure_fedgraph.papers", "secure_fedgraph.training"),
    "protocol/secure_sum/mask_server.py": ("secure_fedgraph.protocol.secure_sum.mask_client",),
    "protocol/transports": ("secure_fedgraph.protocol.secure_sum", "secure_fedgraph.protocol.collectives", "secure_fedgraph.protocol.engine",
                            "secure_fedgraph.crypto", "secure_fedgraph.papers", "secure_fedgraph.training"),
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
