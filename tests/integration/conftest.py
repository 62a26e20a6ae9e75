"""Helpers for runs with real processes over real sockets on 127.0.0.1 (started by
secure_fedgraph/runs/launch.py, as the demo and the benchmarks start theirs)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.runs.launch import LocalRun, start_server as launch_server

__all__ = ["Run", "start_server"]


@dataclass
class Run:
    """A server process and its folders; clients are started by the test."""

    local: LocalRun
    keys: Path

    @property
    def server(self) -> subprocess.Popen:
        return self.local.server

    @property
    def port(self) -> str:
        return str(self.local.port)

    @property
    def out(self) -> Path:
        return self.local.out

    def client(self, ids: str, *extra: str) -> subprocess.Popen:
        return self.local.client(ids, *extra)

    def finish(self, timeout: float = 240) -> tuple[str, dict]:
        output = self.local.wait(timeout)
        return output, json.loads((self.out / "metrics.json").read_text())


@pytest.fixture
def start_server(tmp_path):
    started: list[LocalRun] = []

    def start(*, clients: int, plan_options: tuple[str, ...], backend: str = "mask", extra: tuple[str, ...] = (), keys_for: int | None = None,
              plan: str = "fedavg-gru") -> Run:
        keys = init_keys(tmp_path / "keys", clients=keys_for or clients).root
        args = ["--plan", plan, "--clients", str(clients), "--backend", backend, "--join-timeout", "60", "--step-timeout", "60"]
        for option in plan_options:
            args += ["--set", option]
        local = launch_server(tmp_path, *args, *extra, certs=keys)
        started.append(local)
        return Run(local, keys)

    yield start
    for local in started:
        local.stop(grace_s=1.0)
