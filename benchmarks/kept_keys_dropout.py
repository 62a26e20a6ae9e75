"""Benchmark: a contributor dropping in the middle of a kept key epoch, pair seeds against a re-key.

Workload: one mask round in one process (in-process transport, every message encoded and decoded
as on the wire), n clients, a length-L float32 sum. Sum "a" holds every client (so every client
has contributed in this key epoch); then client 1 goes silent at the input of sum "b". Measured,
for sum "b" alone, in the same sitting:

* ``pair seeds``: the protocol as it is (issue 31 item 3): client 1 keeps its mask key, each
  surviving neighbour reveals its pair seed of "b" with it (step 4b), the key epoch goes on;
* ``re-key``: the rule before it, restored in a server subclass (``_rekey_reason`` returns
  "dropped after contributing earlier", the lines the change removed): advertise, graph, share
  keys among the n - 1 others, then sum "b" again under the new keys;
* ``no dropout``: sum "b" with every client, the floor of a kept-keys sum.

Reported per mode: wall seconds, CPU seconds of this process (every party runs in it), bytes up
and down over all clients, and the steps the sum took; the median of ``--repeats`` sessions. One
table, and one JSON line per measurement with the configuration, versions and hardware.

Run:
    .venv/bin/python benchmarks/kept_keys_dropout.py                     # n = 100, L in {1e4, 1e5}
    .venv/bin/python benchmarks/kept_keys_dropout.py --n 200 --L 1e4     # the sparse graph

This is a benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from secure_fedgraph import __version__
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer
from secure_fedgraph.protocol.transports.common import Traffic

MODES = ("no dropout", "pair seeds", "re-key")
DROPPED = 1


class RekeyingServer(MaskServer):
    """The rule before issue 31 item 3: a dropped client that contributed earlier in the key epoch
    makes the server re-key the others and ask for the sum again."""

    def _rekey_reason(self, live, survivors, vouchers):
        dropped = live - survivors
        if dropped & self._exposed:
            return f"clients {sorted(dropped & self._exposed)} dropped after contributing earlier"
        return super()._rekey_reason(live, survivors, vouchers)


def _inputs(n: int, L: int, seed: int) -> dict[int, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {c: {"w": rng.uniform(-1, 1, L).astype(np.float32)} for c in range(n)}


def measure(mode: str, n: int, L: int) -> dict:
    """One session: sum "a" over all, then sum "b" in ``mode``; the costs of "b"."""
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(n))
    if mode == "re-key":
        session.server.__class__ = RekeyingServer
    session.start_round()
    session.secure_sum("a", _inputs(n, L, 0))
    epoch = session.server._epoch
    session.runner.traffic = Traffic()
    if mode != "no dropout":
        session.runner.drop = {Stage.INPUT: {DROPPED}}
    steps_before = len(session.server.log)
    wall, cpu = time.perf_counter(), time.process_time()
    result = session.secure_sum("b", _inputs(n, L, 1))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    traffic = session.runner.traffic
    expected = n - (mode != "no dropout")
    if len(result.contributors) != expected:
        raise RuntimeError(f"{mode}: {len(result.contributors)} contributors, expected {expected}")
    return {"mode": mode, "n": n, "L": L, "wall_s": wall, "cpu_s": cpu, "bytes_up": sum(traffic.up.values()),
            "bytes_down": sum(traffic.down.values()), "key_epochs_added": session.server._epoch - epoch,
            "steps": [line.split(":")[0].split(" ", 2)[-1] for line in session.server.log[steps_before:] if " answered" in line],
            "graph": session.server.describe()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100])
    parser.add_argument("--L", type=float, nargs="+", default=[1e4, 1e5])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    machine = {"python": platform.python_version(), "numpy": np.__version__, "secure_fedgraph": __version__,
               "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    rows = []
    for n in args.n:
        for L in map(int, args.L):
            medians = {}
            for mode in MODES:
                runs = [measure(mode, n, L) for _ in range(args.repeats)]
                median = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "bytes_up", "bytes_down")}
                medians[mode] = {**runs[0], **median}
                print(json.dumps({"record": "run", **medians[mode], "repeats": args.repeats, "machine": machine}), flush=True)
            rows.append((n, L, medians))
    print("\n| n | L | mode | sum b wall s | CPU s | MB up | MB down | key epochs added | steps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, L, medians in rows:
        for mode in MODES:
            m = medians[mode]
            ratio = f" ({m['wall_s'] / medians['pair seeds']['wall_s']:.2f}x pair seeds)" if mode == "re-key" else ""
            print(f"| {n} | {L:.0e} | {mode} | {m['wall_s']:.3f}{ratio} | {m['cpu_s']:.3f} | {m['bytes_up'] / 1e6:.2f} | "
                  f"{m['bytes_down'] / 1e6:.2f} | {m['key_epochs_added']} | {' '.join(m['steps'])} |")


if __name__ == "__main__":
    main()
