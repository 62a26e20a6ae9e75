"""nFedGNN's centralised reference: the whole PyG GCN or GAT trained on one citation graph with
every feature in one place (the paper's Fig. 4 "centralized" line), written as a run folder
like a plan's (``metrics.json``: per epoch the training loss and validation and test accuracy).

Usage (results/nfedgnn/run.sh)::

    python -m secure_fedgraph.runs.node_centralised --dataset Cora --model gcn --seed 0 --out RUN
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from secure_fedgraph.errors import ConfigError, DataNotFoundError


def run(dataset: str, config, data_dir: str | None, out: Path) -> dict:
    """Train ``config`` (a :class:`~secure_fedgraph.training.node_classification.CentralisedNodeConfig`)
    on ``dataset`` with row-normalised features (as nFedGNN's users normalise theirs); write and
    return the metrics."""
    from secure_fedgraph.data.planetoid import CitationGraph
    from secure_fedgraph.training.node_classification import normalise_rows, train_centralised

    started = time.perf_counter()
    graph = CitationGraph.load(dataset, data_dir)
    metrics = train_centralised(replace(graph, x=normalise_rows(graph.x)), config)
    metrics.update(dataset=dataset, config=asdict(config), seconds=time.perf_counter() - started, transport="centralised")
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    return metrics


def main(argv: list[str] | None = None) -> int:
    from secure_fedgraph.training.node_classification import CentralisedNodeConfig

    parser = argparse.ArgumentParser(prog="python -m secure_fedgraph.runs.node_centralised", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="Cora", choices=["Cora", "CiteSeer", "PubMed"])
    parser.add_argument("--model", default="gcn", choices=["gcn", "gat"])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="data folder (default: $SECURE_FEDGRAPH_DATA, else the packaged data)")
    parser.add_argument("--out", required=True, metavar="RUN_DIR")
    args = parser.parse_args(argv)
    try:
        config = CentralisedNodeConfig(model=args.model, epochs=args.epochs, seed=args.seed)
        metrics = run(args.dataset, config, args.data_dir, Path(args.out))
    except (ConfigError, DataNotFoundError) as exc:
        print(f"node_centralised: {exc}", file=sys.stderr)
        return 2
    print(f"node_centralised: {args.model} on {args.dataset}, {args.epochs} epochs: test accuracy {metrics['test_acc']:.3f} "
          f"({metrics['best_val_test_acc']:.3f} at the best validation epoch); metrics in {Path(args.out) / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
