"""pyproject lists every package directory, and the three top-level folders install under
the secure_fedgraph namespace (nothing called `protocol` or `server` at the top level)."""

from __future__ import annotations

import importlib
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_directory_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for package, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]))
    assert found == listed


def test_namespaced_imports():
    for name in ("secure_fedgraph.protocol", "secure_fedgraph.server", "secure_fedgraph.clients"):
        module = importlib.import_module(name)
        assert module.__name__ == name
    assert importlib.util.find_spec("protocol") is None or "secure_fedgraph" not in str(importlib.util.find_spec("protocol").origin)
