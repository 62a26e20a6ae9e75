"""Start a server process and client processes on 127.0.0.1: written once for the demo, the
benchmarks and the integration tests. Each process may also run behind a command prefix (``ip
netns exec NS``: runs/netns.py) at an address of its own host, so the same calls start a run
across network namespaces.

Child processes run ``python -P -m secure_fedgraph``: ``-P`` keeps the current folder off the
module path, so a run started from inside a checkout imports the installed package (with
``pip install .``, the source tree's ``secure_fedgraph/`` lacks the ``server`` and ``clients``
subpackages that only the installed layout maps in), the same way under ``make demo``,
``pip install .`` and ``pip install -e .``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


def command(*args: str, module: str = "secure_fedgraph") -> list[str]:
    """The command line of a ``secure-fedgraph`` child process (or of another of the package's
    ``python -m`` modules)."""
    return [sys.executable, "-P", "-m", module, *args]


def id_ranges(n: int, parts: int) -> list[str]:
    """Client ids 0..n-1 in ``parts`` contiguous ``--ids`` ranges ("0-68", ...), none empty."""
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [f"{bounds[i]}-{bounds[i + 1] - 1}" for i in range(parts) if bounds[i + 1] > bounds[i]]


def ensure_host_cert(certs: Path, ids: str) -> None:
    """Issue the host certificate of ``ids`` (``keys host``) unless it exists, where ``certs``
    holds the CA key and ``ids`` names several clients."""
    from secure_fedgraph.clients.ids import format_ids, parse_ids
    from secure_fedgraph.crypto.pki import KeyDirectory, issue_host

    clients = parse_ids(ids)
    keys = KeyDirectory(certs)
    if len(clients) > 1 and (keys.root / "ca.key").is_file() and not keys.host_cert(format_ids(clients)).is_file():
        issue_host(keys.root, label=format_ids(clients), ids=clients)


class LaunchError(RuntimeError):
    """A process did not start, or failed; the message carries its output."""


@dataclass
class LocalRun:
    """A server process on 127.0.0.1 and the client processes started against it."""

    server: subprocess.Popen
    port: int
    certs: Path
    out: Path
    env: Mapping[str, str] | None = None
    clients: list[subprocess.Popen] = field(default_factory=list)
    host: str = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def client(self, ids: str, *extra: str, stdout: int | IO[Any] | None = subprocess.PIPE, host_cert: bool = True,
               prefix: Sequence[str] = (), certs: Path | None = None) -> subprocess.Popen:
        """Start a client process hosting ``ids`` (stderr joins stdout), behind the command
        ``prefix`` (e.g. ``ip netns exec NS``), with the keys folder ``certs`` (default: the
        server's, where the run's keys were made). With ``host_cert`` and the
        CA key in the keys folder (the launcher runs where the keys were made), a process of several
        clients gets a host certificate for them first, and holds one connection for all of them."""
        certs = certs or self.certs
        if host_cert:
            ensure_host_cert(certs, ids)
        process = subprocess.Popen([*prefix, *command("client", "--server", self.address, "--ids", ids, "--certs", str(certs), *extra)],
                                   stdout=stdout, stderr=subprocess.STDOUT, text=True, env=self.env)
        self.clients.append(process)
        return process

    def wait(self, timeout: float) -> str:
        """Wait for the server to finish and return its output (when piped); LaunchError if it failed."""
        output, _ = self.server.communicate(timeout=timeout)
        if self.server.returncode != 0:
            raise LaunchError(f"the server exited with status {self.server.returncode}:\n{output or ''}")
        return output or ""

    def stop(self, grace_s: float = 5.0) -> None:
        """Terminate whatever still runs (clients first), killing what ignores the signal."""
        for process in [*self.clients, self.server]:
            if process.poll() is None:
                process.terminate()
        for process in [*self.clients, self.server]:
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_server(
    work: Path,
    *args: str,
    certs: Path,
    out: Path | None = None,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    env: Mapping[str, str] | None = None,
    ready_timeout_s: float = 60.0,
    port: int = 0,
    host: str = "127.0.0.1",
    prefix: Sequence[str] = (),
) -> LocalRun:
    """Start ``secure-fedgraph server`` on ``host`` (``port``, or 0: a free one, e.g. a server
    resuming a run where its clients wait for it), behind the command ``prefix`` (e.g. ``ip netns
    exec NS``), and wait until it listens (it writes the port to a file once bound). ``args`` are
    the server's other options.

    Raises:
        LaunchError: the server exited or did not listen within ``ready_timeout_s`` (with its output).
    """
    work.mkdir(parents=True, exist_ok=True)
    out = out or work / "run"
    port_file = work / "server.port"
    port_file.unlink(missing_ok=True)
    env = None if env is None else {**os.environ, **env}
    server = subprocess.Popen(
        [*prefix, *command("server", "--bind", f"{host}:{port}", "--port-file", str(port_file), "--certs", str(certs), "--out", str(out), *args)],
        stdout=stdout, stderr=subprocess.STDOUT, text=True, env=env,
    )
    deadline = time.monotonic() + ready_timeout_s
    while not (port_file.exists() and port_file.read_text().strip()):
        if server.poll() is not None or time.monotonic() > deadline:
            if server.poll() is None:
                server.kill()
            output = server.communicate()[0] if stdout == subprocess.PIPE else ""
            raise LaunchError(f"the server did not start listening within {ready_timeout_s:g} s:\n{output or ''}")
        time.sleep(0.05)
    return LocalRun(server, int(port_file.read_text().strip()), certs, out, env, host=host)


def start_clients(run: LocalRun, ranges: Sequence[str], *extra: str, logs: Path | None = None,
                  prefixes: Sequence[Sequence[str]] = ()) -> list[subprocess.Popen]:
    """One client process per ``--ids`` range, the i-th behind the command ``prefixes[i]`` when
    given (its host: runs/netns.py); output to ``logs/client-process-<i>.log`` when given (the
    files stay for the user to read), else discarded."""
    started = []
    for i, ids in enumerate(ranges):
        prefix = prefixes[i] if prefixes else ()
        if logs is None:
            started.append(run.client(ids, *extra, stdout=subprocess.DEVNULL, prefix=prefix))
            continue
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"client-process-{i}.log", "w") as log:  # the child keeps its own handle
            started.append(run.client(ids, *extra, stdout=log, prefix=prefix))
    return started
