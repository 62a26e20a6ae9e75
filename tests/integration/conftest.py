"""Helpers for runs with real processes over real sockets on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from secure_fedgraph.crypto.pki import init_keys


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "secure_fedgraph", *args]


@dataclass
class Run:
    """A server process and its folders; clients are started by the test."""

    work: Path
    keys: Path
    out: Path
    server: subprocess.Popen
    port: str

    def client(self, ids: str, *extra: str) -> subprocess.Popen:
        return subprocess.Popen(command("client", "--server", f"127.0.0.1:{self.port}", "--ids", ids, "--certs", str(self.keys), *extra),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(self, timeout: float = 240) -> tuple[str, dict]:
        output, _ = self.server.communicate(timeout=timeout)
        assert self.server.returncode == 0, output
        return output, json.loads((self.out / "metrics.json").read_text())


@pytest.fixture
def start_server(tmp_path):
    started: list[subprocess.Popen] = []

    def start(*, clients: int, plan_options: tuple[str, ...], backend: str = "mask", extra: tuple[str, ...] = (), keys_for: int | None = None,
              plan: str = "fedavg-gru") -> Run:
        keys = init_keys(tmp_path / "keys", clients=keys_for or clients).root
        port_file, out = tmp_path / "port", tmp_path / "run"
        args = ["server", "--bind", "127.0.0.1:0", "--port-file", str(port_file), "--plan", plan, "--clients", str(clients),
                "--backend", backend, "--certs", str(keys), "--out", str(out), "--join-timeout", "60", "--step-timeout", "60"]
        for option in plan_options:
            args += ["--set", option]
        server = subprocess.Popen(command(*args, *extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(server)
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            assert server.poll() is None, server.communicate()[0]
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        return Run(tmp_path, keys, out, server, port_file.read_text().strip())

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
