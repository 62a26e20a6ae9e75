"""nFedGNN's results from a folder of runs: a table like the paper's Fig. 4 (test accuracy per
dataset and method, mean and spread over seeds) with its Table 1 communication cost, and the
command of each row.

Runs are ``results/nfedgnn/<dataset>/<model>-<method>-s<seed>/metrics.json``, as
``results/nfedgnn/run.sh`` writes them. ``python -m secure_fedgraph.runs.nfedgnn_report
results/nfedgnn`` writes ``table.md`` there.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from secure_fedgraph.runs.fedrel_report import _mean_sd  # mean ± sd over seeds, as FedRel's table writes it

RUN = re.compile(r"^(?P<model>gcn|gat)-(?P<method>centralised|nfedgnn-lap|nfedgnn|cnfgnn|fedsgd)-s(?P<seed>\d+)$")
METHODS = {"centralised": "centralised (PyG, all features in one place)", "nfedgnn-lap": "nFedGNN, with the Laplacian term",
           "nfedgnn": "nFedGNN, without the Laplacian term", "fedsgd": "one shared W, the users' gradients summed (FedSGD)",
           "cnfgnn": "CNFGNN, as the paper adapts it (each user's own Adam step, the W_i averaged)"}
# Table 1 of the paper: MB (MiB, float32) over 200 rounds; its CNFGNN column did not survive the text
PAPER_TABLE1 = {("Cora", "gcn"): 34.06, ("Cora", "gat"): 264.45, ("CiteSeer", "gcn"): 40.61, ("CiteSeer", "gat"): 324.90}


def collect(root: Path) -> dict[tuple[str, str, str], list[dict]]:
    """(dataset, model, method) -> the metrics of its seeds, sorted by seed."""
    runs: dict[tuple[str, str, str], list[tuple[int, dict]]] = defaultdict(list)
    for path in sorted(root.glob("*/*/metrics.json")):
        match = RUN.match(path.parent.name)
        if match:
            runs[(path.parent.parent.name, match["model"], match["method"])].append((int(match["seed"]), json.loads(path.read_text())))
    return {key: [m for _, m in sorted(seeds, key=lambda s: s[0])] for key, seeds in runs.items()}


def _percent(values: list[float]) -> str:
    return _mean_sd([100 * v for v in values], 1)


def table(runs: dict[tuple[str, str, str], list[dict]]) -> str:
    lines = ["| dataset | model | method | λ | test acc. %, last round | test acc. % at best val. | seeds | MiB over the run (Table 1's count) | paper Table 1 MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (dataset, model, method) in sorted(runs, key=lambda k: (k[0], k[1], list(METHODS).index(k[2]))):
        seeds = runs[(dataset, model, method)]
        lam = seeds[0].get("laplacian", "")
        mib = f"{seeds[0]['paper_table1_mib']:.2f}" if "paper_table1_mib" in seeds[0] else ""
        paper = PAPER_TABLE1.get((dataset, model), "") if method.startswith("nfedgnn") else ("not in the text" if method in ("cnfgnn", "fedsgd") else "")
        lines.append(f"| {dataset} | {model.upper()} | {METHODS[method]} | {lam if lam != 0 else '0'} | {_percent([m['test_acc'] for m in seeds])} "
                     f"| {_percent([m['best_val_test_acc'] for m in seeds])} | {len(seeds)} | {mib} | {paper} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "results/nfedgnn")
    runs = collect(root)
    if not runs:
        print(f"nfedgnn_report: no run under {root}", file=sys.stderr)
        return 2
    text = table(runs)
    (root / "table.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
