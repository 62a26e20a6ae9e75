"""Attack error against epsilon over several audited runs (one per noise level): the figure a
privacy sweep attaches per epsilon. Reads each run's ``audit.json``; draws one panel per attack,
its error at each run's epsilon, with the references the audits measured beside it (the
random guess; the same attack on the clean activations, i.e. without DP).

``python -m secure_fedgraph.audit.curves OUT.png RUN/audit/audit.json ...`` draws it from the
command line; a sweep calls :func:`leakage_against_epsilon` with its runs' audit.json files.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def attack_points(audit_jsons: Iterable[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """attack name -> one point per run: epsilon (inf without noise), sigma and the errors."""
    points: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in audit_jsons:
        report = json.loads(Path(path).read_text())
        sigma = float(report["run"].get("dp_sigma") or 0.0)
        epsilon = next((float(a["details"]["epsilon"]) for c in report["claims"] for a in c["attacks"] if "epsilon" in a["details"]), math.inf)
        for claim in report["claims"]:
            for attack in claim["attacks"]:
                points[attack["name"]].append({"epsilon": epsilon, "sigma": sigma, "errors": attack["errors"], "unit": attack["unit"],
                                               "claim": attack["claim"], "run": str(path)})
    return {name: sorted(p, key=lambda q: (q["epsilon"], -q["sigma"])) for name, p in points.items()}


def leakage_against_epsilon(audit_jsons: Iterable[str | Path], out: str | Path) -> Path:
    """Draw every attack's error against epsilon into ``out`` (a PNG); runs without noise sit
    at the right edge, marked "no DP". Returns ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = attack_points(audit_jsons)
    if not points:
        raise ValueError("no attack results in the given audit.json files")
    fig, axes = plt.subplots(1, len(points), figsize=(6.2 * len(points), 4.2), squeeze=False, layout="constrained")
    for ax, (name, runs) in zip(axes[0], sorted(points.items()), strict=True):
        finite = [r["epsilon"] for r in runs if math.isfinite(r["epsilon"])]
        right = max(finite) * 4 if finite else 1.0
        xs = [r["epsilon"] if math.isfinite(r["epsilon"]) else right for r in runs]
        for series in sorted({k for r in runs for k in r["errors"]}, key=lambda k: ("guess" in k, "no-DP" in k, k)):
            pairs = [(x, r["errors"][series]) for x, r in zip(xs, runs, strict=True) if series in r["errors"]]
            style = "k--" if "guess" in series else ("g.:" if "no-DP" in series or "without" in series else "r-o")
            ax.plot([p[0] for p in pairs], [p[1] for p in pairs], style, label=series, ms=4)
        ax.set_xscale("log")
        if any(not math.isfinite(r["epsilon"]) for r in runs):
            ax.axvline(right, color="gray", lw=0.6)
            ax.annotate("no DP", (right, ax.get_ylim()[1]), ha="right", va="top", fontsize=8, color="gray")
        ax.set(title=f"{name} ({runs[0]['claim']})", xlabel="epsilon per client (delta from the run)", ylabel=textwrap.fill(runs[0]["unit"], 42))
        ax.legend(fontsize=8)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m secure_fedgraph.audit.curves OUT.png AUDIT_JSON [AUDIT_JSON ...]", file=sys.stderr)
        return 2
    print(f"curves: {leakage_against_epsilon(args[1:], args[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
