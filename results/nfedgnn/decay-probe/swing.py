"""The decay probe's table (README.md here): per way of decaying the users' W_i, Cora GCN's
test accuracy at the last round and at the best validation round, and the round-to-round
change of test accuracy over rounds 100-199 (mean and largest), mean over seeds. Run from the
repository root: .venv/bin/python results/nfedgnn/decay-probe/swing.py"""

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
RUNS = {"torch's Adam, L2 in the gradient (commit ce632ca)": [HERE / f"torch-l2-s{s}" for s in range(3)],
        "L2 in the gradient, only where it is non-zero (commit 7101dcd)": [HERE / f"l2-where-touched-s{s}" for s in range(3)],
        "decoupled (AdamW), only where the gradient is non-zero (the table's runs)": [HERE.parent / "Cora" / f"gcn-nfedgnn-s{s}" for s in range(3)]}


def row(folder: Path) -> tuple[float, float, float, float]:
    m = json.loads((folder / "metrics.json").read_text())
    acc = [r["test_acc"] for r in m["rounds"] if "test_acc" in r][100:200]
    swings = [abs(a - b) for a, b in zip(acc, acc[1:])]
    return 100 * m["test_acc"], 100 * m["best_val_test_acc"], 100 * statistics.mean(swings), 100 * max(swings)


print("| users' decay | test acc. %, last round | at best val. | swing, rounds 100-199: mean | largest | seeds |")
print("|---|---|---|---|---|---|")
for name, folders in RUNS.items():
    rows = [row(f) for f in folders if (f / "metrics.json").exists()]
    if rows:
        cols = [statistics.mean(c) for c in zip(*rows)]
        sds = [statistics.stdev(c) if len(rows) > 1 else 0.0 for c in zip(*rows)]
        print(f"| {name} | " + " | ".join(f"{m:.1f} ± {s:.1f}" for m, s in zip(cols, sds)) + f" | {len(rows)} |")
