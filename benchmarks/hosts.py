"""Benchmark: one secure FedAvg round across hosts with their own addresses, on links of 100 Mbit/s.

The workload and the round are fedavg_round.py's (``fedavg-vector``: the server broadcasts a
length-L float32 model, every client returns it plus a seeded update in [-1, 1) through a secure
sum; a round is timed by the server from its start to the end of the sum; the median of all
rounds but the first). Here the server and each client process run on a host of their own: a
Linux network namespace with its own address on one bridge (secure_fedgraph/runs/netns.py), the
clients checking the server's certificate under its address. Each (n, L) runs plain and mask
twice: on unshaped links (veth, no limit) and with every link shaped both ways by

    tc qdisc add dev X root tbf rate 100mbit burst 32kbit latency 400ms

(the host's side shapes what it sends, the switch side what it receives). The burst of 32 kbit
(4 KB) is below one 64 KB segment, but tbf splits such segments, and a 40 MiB TCP transfer
between two shaped hosts measured 94.9 Mbit/s here, the same as with 64 KB or 256 kbit bursts;
the latency of 400 ms only bounds the queue (at most 5 MB waiting), it adds no delay.

The wire floor of a round is the bytes the busiest link must carry over 100 Mbit/s: the
server's link carries every client's upload one way and every download the other, so the floor
is max(n x up, n x down) / 12.5 MB/s, with up and down the bytes per client and round the run
counted (the round's set-up and Welcome included; payload bytes, without TLS, HTTP/2 or TCP
headers, so the true floor is a few percent higher).

Run (as root; about 5 minutes):
    .venv/bin/python benchmarks/hosts.py | tee -a benchmarks/results-hosts.txt
    .venv/bin/python benchmarks/hosts.py --n 10 --L 1e5,1e6 --processes 2 --rounds 3

Prints one JSON line per run (fedavg_round.py's fields plus ``link``) and a table. This is a
benchmark, not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from fedavg_round import measure  # noqa: E402
from progress import running  # noqa: E402
from floor import int_list  # noqa: E402

RATE_BITS_S = 100e6
SHAPE = {"rate": "100mbit", "burst": "32kbit", "latency": "400ms"}


def main(argv: list[str] | None = None) -> int:
    from secure_fedgraph.runs import netns

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--n", type=int_list, default=int_list("10"), help="comma list of client counts")
    p.add_argument("--L", type=int_list, default=int_list("1e5,1e6"), help="comma list of vector lengths")
    p.add_argument("--backends", default="plain,mask", help="comma list among plain,mask,ckks")
    p.add_argument("--processes", type=int, default=2, help="client hosts (one client process each)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per run; the median of all but the first is reported")
    p.add_argument("--graph", choices=("auto", "complete", "sparse"), default="sparse", help="mask neighbour graph, as fedavg_round.py")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.degree, args.extra = "auto", ""  # what fedavg_round.measure reads besides
    reason = netns.unavailable()
    if reason is not None:
        print(f"hosts.py: {reason}", file=sys.stderr)
        return 2
    backends = [b for b in args.backends.split(",") if b]
    print(json.dumps({"record": "meta", "benchmark": "hosts", "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "python": platform.python_version(), "platform": platform.platform(), "cores": os.cpu_count(),
                      "shape": SHAPE, "args": vars(args)}), flush=True)
    rows: dict[tuple[int, int, str, str], dict] = {}
    labels = ["server", *(f"h{i}" for i in range(args.processes))]
    with tempfile.TemporaryDirectory(prefix="hosts-bench-") as tmp:
        for link in ("unshaped", "100mbit"):
            with netns.network(labels) as hosts:
                if link != "unshaped":
                    for label in labels:
                        hosts.shape(label, **SHAPE)
                for n in args.n:
                    for length in args.L:
                        for backend in backends:
                            with running(f"{link} {backend} n={n} L={length:g}"):
                                row = {**measure(backend, n, length, args, Path(tmp) / link, hosts=hosts), "link": link}
                            row.pop("mask_plan", None)
                            rows[(n, length, backend, link)] = row
                            print(json.dumps(row), flush=True)
    print("\n| n | L | backend | round s: unshaped | round s: 100 Mbit/s | shaped ÷ unshaped | per client and round: up / down MB | "
          "wire floor s (server link) | 100 Mbit/s ÷ floor | shaped ÷ plain shaped |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for length in args.L:
            for backend in backends:
                free, shaped = rows[(n, length, backend, "unshaped")], rows[(n, length, backend, "100mbit")]
                up, down = shaped["upload_bytes_per_client"], shaped["download_bytes_per_client"]
                floor = max(n * up, n * down) * 8 / RATE_BITS_S
                plain = rows.get((n, length, "plain", "100mbit"), {}).get("round_seconds")
                print(f"| {n} | {length:g} | {backend} | {free['round_seconds']:.2f} | {shaped['round_seconds']:.2f} | "
                      f"{shaped['round_seconds'] / free['round_seconds']:.2f}x | {up / 1e6:.2f} / {down / 1e6:.2f} | {floor:.2f} | "
                      f"{shaped['round_seconds'] / floor:.2f}x | {format(shaped['round_seconds'] / plain, '.2f') + 'x' if plain else '—'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
