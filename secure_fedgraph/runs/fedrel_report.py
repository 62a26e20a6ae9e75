"""FedRel's results from a folder of runs: a table like the paper's Table IV (participants against
the best test score and the round it was first reached, mean and spread over seeds, FedRel beside
FedAvg and centralised) and a curve like its Fig. 2 (test macro-F1 over rounds) as a PNG.

Runs are ``results/fedrel/<dataset>/<method>-k<K>-s<seed>/metrics.json`` (``centralised-s<seed>``
for the one-party runs), as ``results/fedrel/run.sh`` writes them. ``python -m
secure_fedgraph.runs.fedrel_report results/fedrel`` writes ``table.md`` and ``f1_over_rounds.png``
there. The PNG needs matplotlib (the ``plots`` extra: ``pip install -e ".[plots]"``); the table
does not.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

RUN = re.compile(r"^(?P<method>fedrel|fedavg|centralised)(?:-k(?P<k>\d+))?-s(?P<seed>\d+)$")
LABELS = {"fedrel": "FedRel", "fedavg": "FedAvg", "centralised": "centralised"}


def collect(root: Path) -> dict[tuple[str, str, int], list[dict]]:
    """(dataset, method, K) -> the metrics of its seeds, sorted by seed."""
    runs: dict[tuple[str, str, int], list[tuple[int, dict]]] = defaultdict(list)
    for path in sorted(root.glob("*/*/metrics.json")):
        match = RUN.match(path.parent.name)
        if match:
            k = int(match["k"] or 1)
            runs[(path.parent.parent.name, match["method"], k)].append((int(match["seed"]), json.loads(path.read_text())))
    return {key: [m for _, m in sorted(values, key=lambda v: v[0])] for key, values in runs.items()}


def _mean_sd(values: list[float], digits: int) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def table(runs: dict[tuple[str, str, int], list[dict]]) -> str:
    """Markdown: one row per dataset, method and K."""
    lines = ["| dataset | method | K | seeds | best acc | round | best macro-F1 | round | final acc | final macro-F1 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    order = {"fedrel": 0, "fedavg": 1, "centralised": 2}
    for (dataset, method, k), metrics in sorted(runs.items(), key=lambda item: (item[0][0], item[0][2] if item[0][1] != "centralised" else 99, order[item[0][1]])):
        cell = lambda key, digits=3: _mean_sd([float(m[key]) for m in metrics], digits)  # noqa: E731
        lines.append(f"| {dataset} | {LABELS[method]} | {k} | {len(metrics)} | {cell('best_acc')} | {cell('best_acc_round', 0)} | "
                     f"{cell('best_f1')} | {cell('best_f1_round', 0)} | {cell('test_acc')} | {cell('test_f1')} |")
    return "\n".join(lines) + "\n"


def plot(runs: dict[tuple[str, str, int], list[dict]], path: Path, *, k: int = 3) -> None:
    """Fig. 2's curve: mean test macro-F1 over seeds against rounds, per dataset, for FedRel and
    FedAvg at ``k`` participants and the centralised run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit(f"the PNG needs matplotlib, a dependency of secure_fedgraph: pip install matplotlib ({exc})") from None
    datasets = sorted({key[0] for key in runs})
    figure, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4), squeeze=False)
    for axis, dataset in zip(axes[0], datasets):
        for method, style in (("fedrel", "-"), ("fedavg", "--"), ("centralised", ":")):
            metrics = runs.get((dataset, method, 1 if method == "centralised" else k))
            if not metrics:
                continue
            rounds = [r["round"] for r in metrics[0]["rounds"]]
            mean = [statistics.mean(m["rounds"][i]["f1"] for m in metrics) for i in range(len(rounds))]
            label = LABELS[method] + ("" if method == "centralised" else f" (K={k})")
            axis.plot(rounds, mean, style, label=f"{label}, {len(metrics)} seeds")
        axis.set(title=dataset, xlabel="communication round", ylabel="test macro-F1", ylim=(0, 1.02))
        axis.grid(alpha=0.3)
        axis.legend(loc="best")  # upper left where the curves stay low (JapaneseVowels), lower right where they rise
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else "results/fedrel")
    runs = collect(root)
    if not runs:
        raise SystemExit(f"no runs under {root} (expected <dataset>/<method>-k<K>-s<seed>/metrics.json)")
    (root / "table.md").write_text(table(runs))
    print(table(runs))
    plot(runs, root / "f1_over_rounds.png")
    print(f"wrote {root / 'table.md'} and {root / 'f1_over_rounds.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
