"""``secure-fedgraph demo``: the run a new user sees first.

It makes throwaway certificates, starts a server process and several client processes on
127.0.0.1, runs secure FedAvg of per-sensor GRU forecasters on the packaged first week of
METR-LA (one logical client per sensor), shows the server's progress, and then audits the
run from its own transcripts as ``secure-fedgraph audit RUN_DIR CLIENT_DIR`` does: the
server's (every message it received and sent) and the clients' (with their own plaintext
contributions, which never left them); the report goes to ``<folder>/audit/``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from secure_fedgraph.audit import audit, lines, write_report
from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.data.sources import SOURCES, load_series, node_count
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.runs.launch import LaunchError, id_ranges, start_clients, start_server


@dataclass(frozen=True)
class DemoOptions:
    clients: int = 207
    processes: int = 3
    rounds: int = 3
    local_steps: int = 2
    backend: str = "mask"
    keep: Path | None = None
    data_dir: str | None = None
    dataset: str = "metr-la"

    def __post_init__(self) -> None:
        if not 2 <= self.clients <= node_count(self.dataset):
            raise ConfigError(f"--clients must be between 2 and {node_count(self.dataset)} ({self.dataset}'s sensors), got {self.clients}")
        if not 1 <= self.processes <= self.clients:
            raise ConfigError(f"--processes must be between 1 and --clients, got {self.processes}")
        if self.rounds < 1 or self.local_steps < 1:
            raise ConfigError("--rounds and --local-steps must be at least 1")


def run_demo(options: DemoOptions, *, say: Callable[[str], None] = print) -> bool:
    """Run the demo; True when the run finished and every audit check passed.

    The run folder (metrics.json, transcripts, client logs) stays for the user to read; the
    throwaway keys are deleted unless ``keep`` names the folder.

    Raises:
        DataNotFoundError: ``data_dir`` lacks the dataset's files (checked once, before any process starts).
    """
    load_series(options.dataset, options.data_dir)  # bad data is reported here, once, not by every client process
    work = options.keep or Path(tempfile.mkdtemp(prefix="secure-fedgraph-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _run(options, work, say)
    finally:
        if options.keep is None:
            shutil.rmtree(work / "keys", ignore_errors=True)  # throwaway CA and client keys: nothing to keep them for
        say(f"demo: run folder {work} (metrics.json, transcripts, client logs)")


def _absolute(dataset: str) -> str:
    """A dataset folder as an absolute path (the server and client processes start elsewhere); a name as it is."""
    return dataset if dataset in SOURCES else str(Path(dataset).expanduser().resolve())


def _run(options: DemoOptions, work: Path, say) -> bool:
    started = time.monotonic()
    n = options.clients
    say(f"secure-fedgraph demo: secure FedAvg ({options.backend}) of per-sensor GRU forecasters (hidden 100, 12 steps in, "
        f"12 out, Adam 1e-3) on {'the first week of METR-LA' if options.dataset == 'metr-la' else options.dataset}, {n} clients "
        f"(one per sensor) in {options.processes} processes")
    keys = init_keys(work / "keys", clients=n)
    say(f"  made a throwaway CA, server certificate and {n} client certificates with identity keys")
    run_dir, client_dir = work / "run", work / "clients"
    try:
        run = start_server(work, "--plan", "fedavg-gru", "--clients", str(n), "--backend", options.backend, "--transcript",
                           "--join-timeout", "90", "--set", f"rounds={options.rounds}", "--set", f"max_local_steps={options.local_steps}",
                           "--set", f"dataset={_absolute(options.dataset)}",
                           certs=keys.root, out=run_dir)
    except LaunchError as exc:
        say(f"demo: {exc}")
        return False
    try:
        extra = ["--transcript", str(client_dir), "--audit", "--backend", options.backend]
        if options.data_dir:
            extra += ["--data-dir", options.data_dir]
        if options.dataset not in SOURCES:  # a folder: the clients are given it themselves (R-DATASET)
            extra += ["--dataset", _absolute(options.dataset)]
        start_clients(run, id_ranges(n, options.processes), *extra, logs=work / "logs")
        for line in run.server.stdout:
            say("  " + line.rstrip())
        server_ok = run.server.wait() == 0
        clients_ok = all(c.wait(timeout=60) == 0 for c in run.clients)
    finally:
        run.stop()
    if not (server_ok and clients_ok):
        for log in sorted((work / "logs").glob("client-process-*.log")):
            say(f"{log.name}:\n{log.read_text()}")
        say("demo: the run did not finish")
        return False
    metrics = json.loads((run_dir / "metrics.json").read_text())
    unit = " mph" if options.dataset in ("metr-la", "pems-bay") else ""
    say(f"\nTest on the last day: RMSE {metrics['test_rmse']:.2f}{unit}, MAE {metrics['test_mae']:.2f}{unit} "
        f"({metrics['clients_finished']} clients; {time.monotonic() - started:.0f} s in all)")
    say(f"\nAudit of the run's own transcripts against threat_model.md: secure-fedgraph audit {run_dir} {client_dir}")
    report = audit(run_dir, sorted(client_dir.glob("client-*.bin")), data_dir=options.data_dir)
    for line in lines(report, applicable_only=True):
        say(line)
    paths = write_report(report, work / "audit")
    say(f"audit: {'passed' if report.passed else 'FAILED (' + ', '.join(report.failed) + ')'}; report in {paths['md']}")
    if report.passed:
        say("The server saw only masked uploads, and every aggregate it computed equals the plaintext sum." if options.backend == "mask"
            else "Audit passed.")
    return report.passed
