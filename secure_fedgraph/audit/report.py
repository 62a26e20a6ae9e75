"""An audit written out: ``audit.md`` (for people), ``audit.json`` (for tools: the sweep reads
attack errors per epsilon from it) and one PNG per figure, into one folder."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from secure_fedgraph.audit.findings import AttackResult, Finding, Verdict
from secure_fedgraph.audit.run import AuditReport


def write_report(report: AuditReport, out: str | Path) -> dict[str, Path]:
    """Write audit.md, audit.json and the PNGs into ``out``; returns them by name."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = _draw(report, out)
    paths = {"json": out / "audit.json", "md": out / "audit.md"}
    paths["json"].write_text(json.dumps(as_json(report, figures), indent=2, default=_jsonable))
    paths["md"].write_text(markdown(report, figures))
    return {**paths, **{name: out / name for names in figures.values() for name in names}}


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value)


def _finite(value: Any) -> Any:
    """JSON has no infinity: epsilon without noise is written "inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else "nan"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def as_json(report: AuditReport, figures: dict[str, list[str]] | None = None) -> dict[str, Any]:
    figures = figures or {}
    return _finite({
        "passed": report.passed,
        "failed": report.failed,
        "run": report.run,
        "claims": [{"claim": f.claim, "verdict": f.verdict.value, "checked_from": f.basis or None, "evidence": f.evidence, "details": f.details,
                    "figures": figures.get(f.claim, []),
                    "attacks": [_attack_json(a) for a in f.attacks]} for f in report.findings],
        "server_only_limits": report.server_only_limits,
        "not_in_transcripts": report.not_in_transcripts,
        "sums": report.sums,
        "dropouts": report.dropouts,
        "rekeys": report.rekeys,
        "seen": report.seen,
    })


def _attack_json(a: AttackResult) -> dict[str, Any]:
    return {"name": a.name, "claim": a.claim, "summary": a.summary, "unit": a.unit, "errors": a.errors, "details": a.details}


def lines(report: AuditReport, *, applicable_only: bool = False) -> list[str]:
    """One line per claim (and per attack beside it), as the command prints them; the demo
    leaves out the claims that do not apply to its run and says how many."""
    out = []
    for f in report.findings:
        if applicable_only and f.verdict is Verdict.NOT_APPLICABLE and not f.attacks:
            continue
        out.append(f"  [{f.verdict.value}] {f.claim}: {f.evidence}")
        out.extend(f"      attack: {a.summary}" for a in f.attacks)
    skipped = len(report.findings) - sum(1 for f in report.findings if f.verdict is not Verdict.NOT_APPLICABLE or f.attacks)
    if applicable_only and skipped:
        out.append(f"  ({skipped} claims do not apply to this run, and {len(report.not_in_transcripts)} no transcript can show: see audit.md)")
    return out


def markdown(report: AuditReport, figures: dict[str, list[str]]) -> str:
    run = report.run
    md = [f"# Audit of a {run['plan']} run ({run['backend']} backend)", "",
          f"{'PASSED' if report.passed else 'FAILED: ' + ', '.join(report.failed)}. Mode: {run['mode']} "
          f"({run['client_transcripts']} client transcripts); {run['clients']} clients, {run['rounds']} rounds, {run['sessions']} session(s).", "",
          "## Claims", "", "| claim | verdict | checked from | evidence |", "|---|---|---|---|"]
    md += [f"| {f.claim} | {f.verdict.value} | {f.basis or '-'} | {_cell(f.evidence)} |" for f in report.findings]
    md += ["", "## What the server's transcript alone cannot show", "", report.server_only_limits, "",
           f"This audit compared {run.get('clients_compared', 0)} client transcripts with the server's (R-TRANSCRIPT)."
           if run.get("clients_compared") else "This audit had no client transcripts: every claim above was checked from the server's "
           "transcript alone, and R-TRANSCRIPT was not checked."]
    attacked = [f for f in report.findings if f.attacks]
    if attacked:
        md += ["", "## Attacks (beside the claims they test)", ""]
        for f in attacked:
            for a in f.attacks:
                md += [f"### {a.name} ({a.claim}: {f.verdict.value})", "", a.summary, "", f"| | {a.unit} |", "|---|---|"]
                md += [f"| {k} | {v:.4g} |" for k, v in a.errors.items()]
                md += [""]
    shown = [(claim, name) for claim, names in figures.items() for name in names]
    if shown:
        md += ["## Figures", ""] + [f"![{claim}]({name})" for claim, name in shown] + [""]
    md += ["## Sums the server started", "", "One row per session, round, sum name and outcome (audit.json lists every sum).", "",
           "| session | round | sum | sums | key epochs | asked | inputs | contributors | status | server learned the sum |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    md += [_sum_row(group) for group in _grouped(report.sums)]
    md += ["", "## Dropouts", ""]
    md += ["| session | client | round | stage | how | reason (metrics.json) |", "|---|---|---|---|---|---|"] if report.dropouts else ["None."]
    md += [f"| {d['session']} | {d['client']} | {d['round']} | {d['stage']} | {d['how']} | {_cell(d['reason'])} |" for d in report.dropouts]
    md += ["", "## Key set-ups and re-keys", ""]
    md += ["| session | round | key set-ups | re-keys | participants | threshold | graph | min survivors |", "|---|---|---|---|---|---|---|---|"] \
        if report.rekeys else ["No key set-up (plain backend)."]
    md += [f"| {r['session']} | {r['round']} | {r['key_setups']} | {r['rekeys']} | {r['participants']} | {r['threshold']} | {r['graph']} | "
           f"{r['min_survivors']} |" for r in report.rekeys]
    md += ["", "## Who saw what", "", "The server:", "", "| what | messages | clients | form |", "|---|---|---|---|"]
    md += [f"| {s['what']} | {s['messages']} | {s['clients']} | {s['form']} |" for s in report.seen["server"]]
    if report.seen["clients"]:
        md += ["", "The clients (from their transcripts):", "", "| what a client received | clients | messages |", "|---|---|---|"]
        md += [f"| {s['what']} | {s['clients']} | {s['messages']} |" for s in report.seen["clients"]]
    md += ["", "## Claims no transcript can show", "", "Checked by the tests threat_model.md names.", "", "| claim | why not here |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in report.not_in_transcripts.items()]
    return "\n".join(md) + "\n"


def _grouped(sums: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in sums:
        groups.setdefault((row["session"], row["round"], row["name"], row["status"], row["streaming"], row["server_learned_sum"]), []).append(row)
    return list(groups.values())


def _span(values: list[int]) -> str:
    return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"


def _sum_row(group: list[dict[str, Any]]) -> str:
    first = group[0]
    return (f"| {first['session']} | {first['round']} | {first['name']} | {len(group)} | {_span([g['epoch'] for g in group])} | "
            f"{_span([g['asked'] for g in group])} | {_span([g['inputs'] for g in group])} | {_span([g['contributors'] for g in group])} | "
            f"{first['status']}{' (streaming)' if first['streaming'] else ''} | {'yes' if first['server_learned_sum'] else 'no'} |")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _draw(report: AuditReport, out: Path) -> dict[str, list[str]]:
    """claim -> the PNGs drawn for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn: dict[str, list[str]] = {}
    for f in report.findings:
        names = []
        if f.plot is not None:
            kind, data = f.plot
            name = f"{f.claim.lower()}-{kind}.png"
            fig = _DRAWERS[kind](plt, data, f)
            fig.savefig(out / name, dpi=110, bbox_inches="tight")
            plt.close(fig)
            names.append(name)
        for i, attack in enumerate(f.attacks):
            name = f"{f.claim.lower()}-attack-{i}.png"
            fig = _attack_figure(plt, attack)
            fig.savefig(out / name, dpi=110, bbox_inches="tight")
            plt.close(fig)
            names.append(name)
        if names:
            drawn[f.claim] = names
    if report.sums:
        fig = _sums_figure(plt, report.sums)
        fig.savefig(out / "sums.png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        drawn["sums"] = ["sums.png"]
    return drawn


def _uniformity(plt, data, finding: Finding):
    pooled, pairs = data
    fig, axes = plt.subplots(1, 2 if pairs else 1, figsize=(10 if pairs else 5, 3.6), squeeze=False)
    ax = axes[0][0]
    ax.bar(np.arange(256), np.bincount(pooled, minlength=256), width=1.0, color="tab:blue")
    if pooled.size:
        ax.axhline(pooled.size / 256, color="k", lw=1, label="uniform")
    ax.set(title=f"{finding.claim}: bytes of the masked uploads", xlabel="byte value", ylabel="count")
    ax.legend()
    if pairs:
        ys = np.concatenate([y for y, _ in pairs])
        xs = np.concatenate([x for _, x in pairs])
        ax = axes[0][1]
        ax.scatter(xs, ys, s=2, alpha=0.3)
        ax.set(title="masked value vs the client's plaintext", xlabel="plaintext input (z-score within its sum)",
               ylabel="masked ring element / ring size")
    return fig


def _dp_residuals(plt, data, finding: Finding):
    residuals, scale = data
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.hist(residuals, bins=120, density=True, color="tab:blue", alpha=0.7, label="upload - clipped clean row")
    grid = np.linspace(-4 * scale, 4 * scale, 200)
    ax.plot(grid, np.exp(-0.5 * (grid / scale) ** 2) / (scale * math.sqrt(2 * math.pi)), "k", lw=1.2, label="N(0, (sigma clip)^2)")
    ax.set(title=f"{finding.claim}: the noise the clients added", xlabel="value", ylabel="density")
    ax.legend(fontsize=8)
    return fig


def _dp_norms(plt, data, finding: Finding):
    squared, floor_, clean_max = data
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.hist(squared, bins=120, color="tab:blue", alpha=0.7, label="uploaded rows")
    ax.axvline(floor_, color="k", lw=1.2, label="noise alone: d (sigma clip)^2")
    ax.axvline(clean_max, color="tab:red", lw=1.2, label="a clean clipped row, at most")
    ax.set(title=f"{finding.claim}: squared norms of the uploaded rows", xlabel="squared L2 norm", ylabel="rows")
    ax.legend(fontsize=8)
    return fig


_DRAWERS = {"uniformity": _uniformity, "dp-residuals": _dp_residuals, "dp-norms": _dp_norms}


def _attack_figure(plt, attack: AttackResult):
    example = attack.details.get("example")
    fig, axes = plt.subplots(1, 2 if example else 1, figsize=(10.5 if example else 5.5, 3.6), squeeze=False)
    ax = axes[0][0]
    labels = list(attack.errors)
    ax.barh(labels, [attack.errors[k] for k in labels], color=["tab:red"] + ["tab:gray"] * (len(labels) - 1))
    ax.invert_yaxis()
    ax.set(title=f"{attack.name} ({attack.claim})", xlabel=attack.unit)
    if example:
        ax = axes[0][1]
        ax.plot(example["truth"], "k-o", ms=3, label="truth")
        ax.plot(example["reconstruction"], "r--o", ms=3, label="reconstructed from the upload")
        ax.set(title="one window of a private sensor", xlabel="input step (5 min)", ylabel="speed (mph)")
        ax.legend(fontsize=8)
    return fig


def _sums_figure(plt, sums: list[dict[str, Any]]):
    fig, ax = plt.subplots(figsize=(max(6.0, min(16.0, 0.06 * len(sums) + 4)), 3.4))
    colours = {"delivered": "tab:green", "redone": "tab:orange", "abandoned": "tab:red"}
    x = np.arange(len(sums))
    ax.bar(x, [s["asked"] for s in sums], color="lightgray", width=1.0, label="asked")
    for status, colour in colours.items():
        picked = [i for i, s in enumerate(sums) if s["status"] == status]
        if picked:
            ax.bar(picked, [sums[i]["contributors"] if status == "delivered" else sums[i]["inputs"] for i in picked], color=colour, width=1.0,
                   label=f"{status} ({len(picked)})" + ("" if status == "delivered" else ": inputs in"))
    ax.set(title="every secure sum the server started", xlabel="sum, in order", ylabel="clients")
    ax.legend(fontsize=8, loc="lower right")
    return fig
