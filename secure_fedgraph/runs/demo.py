"""``secure-fedgraph demo``: the run a new user sees first.

It makes throwaway certificates, starts a server process and several client processes on
127.0.0.1, runs secure FedAvg of per-sensor GRU forecasters on the packaged first week of
METR-LA (one logical client per sensor), shows the server's progress, and then audits the
run from its own transcripts: the server's (every message it received) and the clients'
local audit records (their own plaintext contributions, which never left them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from secure_fedgraph.audit import audit_run
from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.errors import ConfigError


@dataclass(frozen=True)
class DemoOptions:
    clients: int = 207
    processes: int = 3
    rounds: int = 3
    local_steps: int = 2
    backend: str = "mask"
    keep: Path | None = None
    data_dir: str | None = None

    def __post_init__(self) -> None:
        if not 2 <= self.clients <= 207:
            raise ConfigError(f"--clients must be between 2 and 207 (METR-LA sensors), got {self.clients}")
        if not 1 <= self.processes <= self.clients:
            raise ConfigError(f"--processes must be between 1 and --clients, got {self.processes}")
        if self.rounds < 1 or self.local_steps < 1:
            raise ConfigError("--rounds and --local-steps must be at least 1")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "secure_fedgraph", *args]


def _ranges(n: int, parts: int) -> list[tuple[int, int]]:
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


def run_demo(options: DemoOptions, *, say: Callable[[str], None] = print) -> bool:
    """Run the demo; True when the run finished and every audit check passed."""
    work = options.keep or Path(tempfile.mkdtemp(prefix="secure-fedgraph-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _run(options, work, say)
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _run(options: DemoOptions, work: Path, say) -> bool:
    started = time.monotonic()
    n = options.clients
    say(f"secure-fedgraph demo: secure FedAvg ({options.backend}) of per-sensor GRU forecasters (hidden 100, 12 steps in, "
        f"12 out, Adam 1e-3) on the first week of METR-LA, {n} clients (one per sensor) in {options.processes} processes")
    keys = init_keys(work / "keys", clients=n)
    say(f"  made a throwaway CA, server certificate and {n} client certificates with identity keys")
    run_dir, client_dir, port_file = work / "run", work / "clients", work / "port"
    server = subprocess.Popen(
        _command("server", "--bind", "127.0.0.1:0", "--port-file", str(port_file), "--plan", "fedavg-gru", "--clients", str(n),
                 "--backend", options.backend, "--certs", str(keys.root), "--out", str(run_dir), "--transcript",
                 "--join-timeout", "90", "--set", f"rounds={options.rounds}", "--set", f"max_local_steps={options.local_steps}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text():
        if server.poll() is not None or time.monotonic() > deadline:
            say(server.stdout.read() if server.stdout else "")
            say("demo: the server did not start")
            return False
        time.sleep(0.1)
    port = port_file.read_text().strip()
    logs, clients = [], []
    for i, (lo, hi) in enumerate(_ranges(n, options.processes)):
        log = open(work / f"client-process-{i}.log", "w")  # noqa: SIM115 (closed below)
        logs.append(log)
        args = ["client", "--server", f"127.0.0.1:{port}", "--ids", f"{lo}-{hi}", "--certs", str(keys.root),
                "--transcript", str(client_dir), "--audit", "--backend", options.backend]
        if options.data_dir:
            args += ["--data-dir", options.data_dir]
        clients.append(subprocess.Popen(_command(*args), stdout=log, stderr=subprocess.STDOUT))
    for line in server.stdout:
        say("  " + line.rstrip())
    server_ok = server.wait() == 0
    clients_ok = all(c.wait(timeout=60) == 0 for c in clients)
    for log in logs:
        log.close()
    if not (server_ok and clients_ok):
        for i in range(len(clients)):
            say((work / f"client-process-{i}.log").read_text())
        say("demo: the run did not finish")
        return False
    metrics = json.loads((run_dir / "metrics.json").read_text())
    say(f"\nTest on the last day: RMSE {metrics['test_rmse']:.2f} mph, MAE {metrics['test_mae']:.2f} mph "
        f"({metrics['clients_finished']} clients; {time.monotonic() - started:.0f} s in all)")
    report = audit_run(run_dir / "transcript.bin", sorted(client_dir.glob("client-*.bin")))
    say("\nAudit of the run's own transcripts (threat_model.md claims):")
    for check in report.checks:
        say(f"  [{'PASS' if check.passed else 'FAIL'}] {check.claim}: {check.evidence}")
    if report.passed:
        say("The server saw only masked uploads, and every aggregate it computed equals the plaintext sum." if options.backend == "mask"
            else "Audit passed.")
    return report.passed
