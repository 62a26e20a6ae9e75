"""Benchmark: 1,000 logical clients over gRPC across 4 client processes (issue 14, item 6).

Workload: the ``fedavg-vector`` plan (benchmarks/fedavg_round.py's; the server broadcasts a
length-L float32 model, every client returns it plus a seeded update through a secure sum), 5
rounds at L = 1e5, one server and 4 client processes of 250 logical clients each on 127.0.0.1,
every logical client on its own mutually authenticated TLS connection. mask runs at the secure
defaults: a fresh key set-up every round, and the sparse graph whose degree and threshold hold
against the default adversary (a third of the clients colluding with an active server, a tenth
dropping, 40-bit security; protocol/sum_backends/adversary.py): at n = 1,000 that is degree 310,
threshold 236 (complete below n = 100). The baseline, measured in the same run on the same
processes and sockets, is the plain backend: the mask/plain ratio is what the secure sum costs
at this size, the rest of a round being gRPC, TLS and Python moving the same bytes.

Measured, per backend:
- seconds per round (the server's ``round_seconds``: key set-up, broadcast and secure sum;
  start-up and joining are ``join_seconds``), every round and their median;
- peak RSS of the server and of each client process, exact: ``ru_maxrss`` from ``os.wait4``
  when the benchmark reaps each process;
- open files and threads: the server's before any client starts (``/proc/PID/fd`` once it
  listens), at their peak (sampled every ``--sample-s``), and after the run (the server's own
  count once every connection is closed, metrics.json ``process.after``); each client
  process's before connecting and after the run (its own count, its last line) and its
  sampled peak;
- the slowest step of each stage (against ``--step-timeout``), bytes up and down per client
  and round, and the load average of the machine before and after (it may be shared).

Run:
    .venv/bin/python benchmarks/load.py | tee benchmarks/results-load.txt     # about 20 minutes on 2 cores
    .venv/bin/python benchmarks/load.py --n 100 --rounds 2                    # a quick look

Prints one JSON line per run (``record: run``) after a ``meta`` line (versions, hardware, limits,
arguments), a ``record: floor`` line for the mask run (benchmarks/floor.py: what its round's
cryptography must cost on this machine, over the plain round of the same run; a fresh key
set-up every round), then a table with the mask round ÷ that floor. This is a benchmark, not a
test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from floor import cpu_model, floor_cell, floor_of_run, mask_plan_of_run, ratio_to_floor
from progress import follow, running

MiB = 2**20


@dataclass
class Watched:
    """One process: sampled from /proc while it runs, reaped with its exact peak RSS."""

    name: str
    process: subprocess.Popen
    peak_open_files: int = 0
    peak_threads: int = 0
    peak_rss_bytes: int | None = None  # ru_maxrss, once reaped
    cpu_seconds: float | None = None  # user + system, once reaped
    samples: int = 0

    def sample(self) -> dict | None:
        pid = self.process.pid
        try:
            open_files = len(os.listdir(f"/proc/{pid}/fd"))
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:  # gone, or a zombie
            return None
        threads = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads:")), 0)
        self.peak_open_files, self.peak_threads = max(self.peak_open_files, open_files), max(self.peak_threads, threads)
        self.samples += 1
        return {"open_files": open_files, "threads": threads}

    def reap(self) -> int | None:
        """The exit status once the process has ended (None while it runs); records its peak RSS."""
        if self.process.returncode is not None:
            return self.process.returncode
        pid, status, rusage = os.wait4(self.process.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        self.peak_rss_bytes = rusage.ru_maxrss * 1024  # KiB on Linux
        self.cpu_seconds = rusage.ru_utime + rusage.ru_stime
        return self.process.returncode


@dataclass
class Sampler:
    """Samples every watched process every ``interval_s`` in a thread."""

    interval_s: float
    watched: list[Watched] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            for w in list(self.watched):
                if w.process.returncode is None:
                    w.sample()


def _machine_busy_seconds() -> float:
    """CPU seconds every core of this machine has spent busy since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _wait_all(watched: list[Watched], timeout_s: float) -> None:
    """Reap every process (the server first to finish the run), or stop them past the deadline."""
    deadline = time.monotonic() + timeout_s
    while any(w.reap() is None for w in watched):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run did not finish within {timeout_s:g} s")
        time.sleep(0.2)


def _client_line(log: Path) -> dict:
    """The client process's own account of itself (clients/runtime.py's last line)."""
    for line in reversed(log.read_text().splitlines()):
        if "open files" in line and "before connecting" in line:
            words = line.replace(",", "").replace(";", "").split()
            at = words.index("files")
            return {"open_files_before": int(words[at + 1]), "open_files_after": int(words[at + 4]), "line": line}
    return {}


def _joined_in(log: Path) -> float | None:
    """Seconds from listening to the last client's Hello ("server: 1000 of 1000 clients joined in 22.7 s")."""
    match = re.search(r"clients joined in ([0-9.]+) s", log.read_text())
    return float(match.group(1)) if match else None


def measure(backend: str, args: argparse.Namespace, keys: Path, work: Path) -> dict:
    from secure_fedgraph.runs.launch import id_ranges, start_clients, start_server

    label = f"{backend}-{args.n}"
    out = work / f"run-{label}"
    load_before, busy_before = os.getloadavg(), _machine_busy_seconds()
    started = time.monotonic()
    with open(work / f"server-{label}.log", "w") as server_log:
        follow(work / f"server-{label}.log")
        run = start_server(work / label, "--plan", "fedavg-vector", "--clients", str(args.n), "--set", f"length={args.length}",
                           "--set", f"rounds={args.rounds}", "--set", f"seed={args.seed}", "--backend", backend,
                           *shlex.split(args.server_extra), *shlex.split(args.extra), certs=keys, out=out, stdout=server_log,
                           env={"PYTHONUNBUFFERED": "1"})
    server = Watched("server", run.server)
    try:
        before = server.sample()  # listening, no client started yet
        with Sampler(args.sample_s, [server]) as sampler:
            processes = start_clients(run, id_ranges(args.n, args.processes), "--backend", backend, *shlex.split(args.extra), logs=work / label)
            clients = [Watched(f"clients {ids}", p) for ids, p in zip(id_ranges(args.n, args.processes), processes, strict=True)]
            sampler.watched.extend(clients)
            _wait_all([server, *clients], args.timeout_s)
    finally:
        run.stop()
    total = time.monotonic() - started
    busy = _machine_busy_seconds() - busy_before
    ours = sum(w.cpu_seconds or 0.0 for w in [server, *clients])
    if server.process.returncode != 0:
        raise RuntimeError(f"{backend}: the server exited with {server.process.returncode}: {(work / f'server-{label}.log').read_text()[-3000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    seconds = [r["round_seconds"] for r in metrics["rounds"]]
    process = metrics["process"]
    client_rows = []
    for i, w in enumerate(clients):
        own = _client_line(work / label / f"client-process-{i}.log")
        client_rows.append({"ids": w.name.split()[-1], "exit": w.process.returncode, "peak_rss_bytes": w.peak_rss_bytes,
                            "open_files_before": own.get("open_files_before"), "open_files_peak": w.peak_open_files,
                            "open_files_after": own.get("open_files_after"), "threads_peak": w.peak_threads, "samples": w.samples})
    rounds = args.rounds
    return {
        "record": "run", "backend": backend, "n": args.n, "L": args.length, "processes": args.processes, "rounds": rounds,
        "round_seconds": seconds, "round_seconds_median": statistics.median(seconds),
        "round_wall_seconds": [r["seconds"] for r in metrics["round_log"]],  # as the round lines print them (the first includes the Welcome)
        "join_seconds": _joined_in(work / f"server-{label}.log"),  # from the server's start, with the client processes' start-up
        "run_seconds": metrics["seconds"], "total_seconds": total,
        "clients_finished": metrics["clients_finished"], "dropped": metrics["dropped"],
        "key_setup": metrics.get("key_setup") or None,
        "mask_plan": mask_plan_of_run(metrics, n=args.n, L=args.length),  # degree, threshold, ring bits: for its floor
        "bytes_up_per_client_round": metrics["bytes_up_total"] / args.n / rounds,
        "bytes_down_per_client_round": metrics["bytes_down_total"] / args.n / rounds,
        "bytes_down_welcome_total": metrics["bytes_down_by_stage"].get("welcome"),
        "wall_seconds_by_stage": metrics["wall_seconds_by_stage"],
        "slowest_step_seconds_by_stage": metrics["slowest_step_seconds_by_stage"],
        # the machine may be shared: cores busy with other work while this run ran
        "cpu_seconds": {"server": server.cpu_seconds, "clients": [w.cpu_seconds for w in clients], "machine": busy,
                        "other_cores_busy": max(0.0, busy - ours) / total},
        "server": {"peak_rss_bytes": server.peak_rss_bytes, "open_files_before_join": before and before["open_files"],
                   "threads_before_join": before and before["threads"], "open_files_peak": server.peak_open_files,
                   "threads_peak": server.peak_threads, "own": process},
        "clients": client_rows,
        "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
    }


def _meta(args: argparse.Namespace) -> dict:
    import resource

    def version(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], capture_output=True, text=True, cwd=Path(__file__).parent)
        return done.stdout.strip()

    memory = next((line.split(":", 1)[1].strip() for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), None)
    return {
        "record": "meta", "benchmark": "load", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name if sys.argv else "load.py", *sys.argv[1:]]),
        "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "python": platform.python_version(), "platform": platform.platform(), "cpu": cpu_model(), "cores": os.cpu_count(), "memory": memory,
        "versions": {p: version(p) for p in ("secure-fedgraph", "grpcio", "cryptography", "numpy", "torch")},
        "nofile_limit": resource.getrlimit(resource.RLIMIT_NOFILE), "loadavg": os.getloadavg(),
        "args": vars(args),
    }


def _mib(x: int | None) -> str:
    return "—" if x is None else f"{x / MiB:,.0f}"


def floors(rows: list[dict]) -> dict[str, dict]:
    """backend -> the floor of its run (mask only), over the plain round of the same run."""
    base = next((r["round_seconds_median"] for r in rows if r["backend"] == "plain"), None)
    found = {r["backend"]: floor_of_run(r["mask_plan"], n=r["n"], L=r["L"], plain_s=base, fresh_keys=True, hosts=r["processes"]) for r in rows}
    return {backend: floor for backend, floor in found.items() if floor is not None}


def table(rows: list[dict], floor_by_backend: dict[str, dict]) -> str:
    base = next((r for r in rows if r["backend"] == "plain"), None)
    lines = [
        "| backend | graph | s / round: median (min-max) | ratio to plain | floor s | ÷ floor | joined and welcomed, s | up / down per client and round | "
        "server peak RSS MiB | client process peak RSS MiB (max of each) | server open files: before join / peak / after | "
        "client process open files: before / peak / after | threads at peak: server / client process | slowest step s (stage) | CPU s: server / clients | other work, cores |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["round_seconds"]
        ks = r["key_setup"]
        graph = f"{ks['graph']}, degree {ks['degree']}, threshold {ks['threshold']}" if ks and ks.get("graph") == "sparse" else (
            f"{ks['graph']}, threshold {ks['threshold']}" if ks else "—")
        ratio = f"{r['round_seconds_median'] / base['round_seconds_median']:.1f}x" if base else "—"
        floor = floor_by_backend.get(r["backend"])
        srv, cls = r["server"], r["clients"]
        stage, slowest = max(r["slowest_step_seconds_by_stage"].items(), key=lambda kv: kv[1])
        span = lambda key: f"{min(c[key] or 0 for c in cls)}-{max(c[key] or 0 for c in cls)}"  # noqa: E731
        lines.append(
            f"| {r['backend']} | {graph} | {r['round_seconds_median']:.1f} ({min(s):.1f}-{max(s):.1f}) | {ratio} | "
            f"{floor_cell(floor, '.1f')} | {ratio_to_floor(r['round_seconds_median'], floor)} | "
            f"{r['join_seconds']:.1f} + {r['round_wall_seconds'][0] - s[0]:.1f} | "
            f"{r['bytes_up_per_client_round'] / 1e6:.2f} / {r['bytes_down_per_client_round'] / 1e6:.2f} MB | "
            f"{_mib(srv['peak_rss_bytes'])} | {' / '.join(_mib(c['peak_rss_bytes']) for c in cls)} | "
            f"{srv['open_files_before_join']} / {srv['open_files_peak']} / {srv['own']['after']['open_files']} | "
            f"{span('open_files_before')} / {span('open_files_peak')} / {span('open_files_after')} | "
            f"{srv['threads_peak']} / {max(c['threads_peak'] for c in cls)} | {slowest:.1f} ({stage}) | "
            f"{r['cpu_seconds']['server']:.0f} / {sum(r['cpu_seconds']['clients']):.0f} | {r['cpu_seconds']['other_cores_busy']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int, default=1000, help="logical clients")
    p.add_argument("--processes", type=int, default=4, help="client processes to spread them over")
    p.add_argument("--rounds", type=int, default=5, help="FedAvg rounds per run")
    p.add_argument("--length", type=lambda t: int(float(t)), default=100_000, help="L, the model's length (float32 values)")
    p.add_argument("--backends", default="plain,mask", help="comma list among plain,mask,ckks; plain is the baseline of the ratio")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra", default="", help="options for the server and every client process, e.g. \"--corrupt-fraction 0.1\"")
    p.add_argument("--server-extra", default="", help="options for the server only, e.g. \"--step-timeout 600\"")
    p.add_argument("--sample-s", type=float, default=0.5, help="seconds between samples of open files and threads")
    p.add_argument("--timeout-s", type=float, default=3 * 3600, help="give up on a run after this long")
    args = p.parse_args(argv)
    print(json.dumps(_meta(args)), flush=True)
    from secure_fedgraph.crypto.pki import init_keys

    rows = []
    with tempfile.TemporaryDirectory(prefix="load-") as tmp:
        work = Path(tmp)
        began = time.monotonic()
        keys = init_keys(work / "keys", clients=args.n).root
        print(json.dumps({"record": "keys", "n": args.n, "seconds": time.monotonic() - began}), flush=True)
        for backend in [b for b in args.backends.split(",") if b]:
            with running(f"{backend}: n={args.n}, L={args.length:g}, {args.rounds} rounds, {args.processes} client processes"):
                row = measure(backend, args, keys, work)
            rows.append(row)
            print(json.dumps(row), flush=True)
    floor_by_backend = floors(rows)
    for backend, floor in floor_by_backend.items():
        print(json.dumps({"record": "floor", "backend": backend, **floor}), flush=True)
    print()
    print(table(rows, floor_by_backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())
