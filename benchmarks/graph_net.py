"""Benchmark: CNFGNN's server Graph Network, the plain concatenate-then-MLP formulation (PyG
MetaLayer, as before) against ``secure_fedgraph.models.GraphNet`` (split first Linear).

What is measured
----------------
One forward (under ``torch.no_grad``, as the server's inference) and one forward + backward (as a
server training step) on one batch of windows: node features (N, B, F) drawn from a seeded normal,
the METR-LA sensor graph (the packaged adjacency of the first N sensors, self-loops included;
``edge_index`` = its nonzeros, ``edge_weight`` = their values, as the CNFGNN plan builds them) and
the default sizes (F = 64, hidden 256, update 128, 2 layers). Both formulations use the same
parameters. Each repeat times the reference then the new one, so both see the same machine
state; the table gives the median over repeats (min in brackets) and the ratio of the medians,
all from this run. Before timing, the outputs and parameter gradients of the two are compared
(max |difference| over max |value|).

Threads: ``torch.set_num_threads(--threads)``, 1 by default, as the server runs it.

How to run
----------
    .venv/bin/python benchmarks/graph_net.py                # N = 207, B = 48, 5 repeats
    .venv/bin/python benchmarks/graph_net.py --batch 12 --repeats 3

This file is a benchmark, not a test: pytest does not collect it (no test_ names).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable

import torch

from secure_fedgraph.models import GraphNet
from secure_fedgraph.models.graph_net import reference_forward as reference
from secure_fedgraph.data.metr_la import load_cached

Forward = Callable[[GraphNet, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def split(gn: GraphNet, x: torch.Tensor, edge_index: torch.Tensor, edge_weight: torch.Tensor) -> torch.Tensor:
    return gn(x, edge_index, edge_weight)


FORMULATIONS: dict[str, Forward] = {"reference": reference, "split": split}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time the server Graph Network: concatenate-then-MLP against the split computation.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sensors", type=int, default=207, help="first N METR-LA sensors (207: all)")
    p.add_argument("--batch", type=int, default=48, help="windows per batch (B)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per formulation (after one warm-up)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=0, help="seed of the parameters and inputs")
    args = p.parse_args(argv)
    if min(args.sensors, args.batch, args.repeats, args.threads) < 1:
        p.error("--sensors, --batch, --repeats and --threads must be >= 1")
    return args


def _forward(gn: GraphNet, run: Forward, inputs: tuple[torch.Tensor, ...]) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        run(gn, *inputs)
    return time.perf_counter() - start


def _forward_backward(gn: GraphNet, run: Forward, inputs: tuple[torch.Tensor, ...]) -> float:
    gn.zero_grad(set_to_none=True)
    start = time.perf_counter()
    y = run(gn, *inputs)
    y.backward(torch.ones_like(y))
    return time.perf_counter() - start


def _difference(gn: GraphNet, inputs: tuple[torch.Tensor, ...]) -> tuple[float, float]:
    """max |split - reference| / max |reference| for the output and over the parameter gradients."""
    results = []
    for run in (reference, split):
        gn.zero_grad(set_to_none=True)
        y = run(gn, *inputs)
        y.backward(torch.ones_like(y))
        results.append((y.detach(), [p.grad for p in gn.parameters()]))
    (y_ref, g_ref), (y_new, g_new) = results
    out = ((y_new - y_ref).abs().max() / y_ref.abs().max()).item()
    grad = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(g_new, g_ref, strict=True) if b is not None)
    return out, grad


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    adjacency = torch.as_tensor(load_cached(None).adjacency[: args.sensors, : args.sensors])
    edge_index = adjacency.nonzero().t().contiguous()
    edge_weight = adjacency[edge_index[0], edge_index[1]].float()
    torch.manual_seed(args.seed)
    gn = GraphNet()
    x = torch.randn(args.sensors, args.batch, gn.node_input)
    inputs = (x, edge_index, edge_weight)
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, {args.threads} thread(s); "
          f"N={args.sensors}, E={edge_index.shape[1]}, B={args.batch}, {sum(p.numel() for p in gn.parameters()):,} parameters", flush=True)
    out_diff, grad_diff = _difference(gn, inputs)
    print(f"# split vs reference: output {out_diff:.1e}, parameter gradients {grad_diff:.1e} (max relative |difference|)", flush=True)

    times: dict[tuple[str, str], list[float]] = {}
    for measure in (_forward, _forward_backward):
        for name, run in FORMULATIONS.items():
            measure(gn, run, inputs)  # warm-up
        for _ in range(args.repeats):
            for name, run in FORMULATIONS.items():
                times.setdefault((measure.__name__, name), []).append(measure(gn, run, inputs))
            print(".", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    print("| step | reference s | split s | reference / split |")
    print("|---|---|---|---|")
    for measure, label in (("_forward", "forward (no_grad)"), ("_forward_backward", "forward + backward")):
        ref, new = times[(measure, "reference")], times[(measure, "split")]
        cells = [f"{statistics.median(t):.3f} ({min(t):.3f})" for t in (ref, new)]
        print(f"| {label} | {cells[0]} | {cells[1]} | {statistics.median(ref) / statistics.median(new):.2f}x |")
    print(f"\nMedian (min) of {args.repeats} repeats, reference and split interleaved; ratios of medians from this run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
