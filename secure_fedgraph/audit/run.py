"""``secure-fedgraph audit RUN_DIR [CLIENT_TRANSCRIPTS...]``: replay, check every claim, run the
attacks, and put each attack's measurement beside the claim it tests.

Server-only (no client transcripts): what the server says it saw and could compute (its own
transcript: against a deviating server, its word; transcript_claims.SERVER_ONLY_LIMITS). With
client transcripts: every message each client received and sent is compared with the server's
record of it (R-TRANSCRIPT), and a mismatch fails the claims judged on that stage; and ground
truth (the clients' plaintext contributions and their uploads before the DP hook), so sums, the
plaintext probe and the DP residuals are checked exactly. Each finding says which it was checked
from.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from secure_fedgraph.audit import plan_claims, privacy_claims, session_claims, sum_claims, transcript_claims  # noqa: F401  (registers the checkers)
from secure_fedgraph.audit.attacks import ATTACKS, AttackContext
from secure_fedgraph.audit.findings import (
    CHECKERS,
    NOT_IN_TRANSCRIPTS,
    SERVER_ONLY,
    WITH_CLIENTS,
    AttackResult,
    Finding,
    Verdict,
    not_applicable,
    verdict,
)
from secure_fedgraph.audit.replay import RunView, load_run
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.ticker import every


@dataclass
class AuditReport:
    """Every claim's finding, with the run's sums, dropouts, re-keys and who saw what."""

    run: dict[str, Any]
    findings: list[Finding]
    sums: list[dict[str, Any]]
    dropouts: list[dict[str, Any]]
    rekeys: list[dict[str, Any]]
    seen: dict[str, list[dict[str, Any]]]
    not_in_transcripts: dict[str, str] = field(default_factory=lambda: dict(NOT_IN_TRANSCRIPTS))
    server_only_limits: str = transcript_claims.SERVER_ONLY_LIMITS  # what the server's transcript alone cannot show

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    @property
    def failed(self) -> list[str]:
        return [f.claim for f in self.findings if f.verdict is Verdict.FAIL]

    def finding(self, claim: str) -> Finding:
        return next(f for f in self.findings if f.claim == claim)

    @property
    def attacks(self) -> list[AttackResult]:
        return [a for f in self.findings for a in f.attacks]


def audit(run_dir: str | os.PathLike, client_transcripts: Iterable[str | os.PathLike] = (), *, data_dir: str | os.PathLike | None = None,
          attacks: bool = True, seed: int = 0, say: Callable[[str], None] | None = None) -> AuditReport:
    """Audit the run in ``run_dir`` (its ``transcript.bin``, and ``metrics.json`` if there).

    Raises:
        ConfigError: no transcript in ``run_dir``, a client transcript missing.
    """
    run_dir = Path(run_dir)
    view = load_run(run_dir / "transcript.bin", client_transcripts, metrics=run_dir / "metrics.json")
    return audit_view(view, data_dir=data_dir, attacks=attacks, seed=seed, say=say)


def audit_view(view: RunView, *, data_dir=None, attacks: bool = True, seed: int = 0, say: Callable[[str], None] | None = None) -> AuditReport:
    findings, read_clients = {}, set()
    for claim, check in CHECKERS.items():
        before = view.client_reads
        findings[claim] = check(view)
        if view.client_reads > before:
            read_clients.add(claim)
    findings = transcript_claims.with_broken_claims(view, findings)
    findings["R-AUDIT"] = _r_audit(view, findings)
    compared = transcript_claims.COVERED if view.wire is not None else frozenset()
    findings = {claim: dataclasses.replace(f, basis="" if f.verdict is Verdict.NOT_APPLICABLE else
                                           WITH_CLIENTS if claim in read_clients | compared else SERVER_ONLY)
                for claim, f in findings.items()}
    if attacks:
        context = AttackContext(view, data_dir=data_dir, seed=seed)
        chosen = [attack for attack in ATTACKS if attack.applies(view)]
        for i, attack in enumerate(chosen, 1):
            if say is not None:
                say(f"audit: running the attack '{attack.name}' ({i} of {len(chosen)})")
            began, name = time.monotonic(), attack.name
            ticking = nullcontext() if say is None else every(ATTACK_TICK_S, say, lambda: f"audit: the attack '{name}' runs, {time.monotonic() - began:.0f} s")
            with ticking:  # an attack trains models for minutes: a line every ATTACK_TICK_S while it goes
                result = attack.run(context)
            if result is not None:
                f = findings[attack.claim]
                findings[attack.claim] = dataclasses.replace(f, attacks=(*f.attacks, result))
    return AuditReport(run=_summary(view), findings=list(findings.values()), sums=_sums(view), dropouts=_dropouts(view), rekeys=_rekeys(view),
                       seen=_seen(view))


ATTACK_TICK_S = 30.0  # seconds between "the attack runs" lines

R_AUDIT_PARTS = {"mask": ("M-UNIFORM", "M-NOPLAIN", "M-CONSISTENCY", "M-SUM"), "ckks": ("C-PUBLIC", "C-CHECK", "C-CONSISTENCY", "C-SUM")}


def _r_audit(view: RunView, findings: dict[str, Finding]) -> Finding:
    """R-AUDIT is the claims it names for the run's backend, together, and with client
    transcripts R-TRANSCRIPT: what the clients saw is what the server's transcript shows."""
    if view.backend not in R_AUDIT_PARTS:
        return not_applicable("R-AUDIT", f"{view.backend} backend (R-AUDIT is about mask and ckks runs)")
    if not view.sums:
        return not_applicable("R-AUDIT", "the run has no secure sums")
    names = R_AUDIT_PARTS[view.backend] + (("R-TRANSCRIPT",) if view.wire is not None else ())
    parts = [findings[c] for c in names]
    bad = [p.claim for p in parts if p.verdict is Verdict.FAIL]
    shown = [p.claim for p in parts if p.verdict is Verdict.PASS]
    sum_claim = R_AUDIT_PARTS[view.backend][-1]
    alone = "" if view.with_clients else (f" (from the server's transcript alone: {sum_claim} needs the clients' records, and what the "
                                          "clients received needs their transcripts, R-TRANSCRIPT)")
    return verdict("R-AUDIT", not bad, f"{', '.join(shown) or 'none of ' + ', '.join(names)} pass" + (f"; {', '.join(bad)} fail" if bad else "")
                   + alone)


def _summary(view: RunView) -> dict[str, Any]:
    clients = sorted({c for s in view.steps for c in s.asked})
    return {"plan": view.plan, "backend": view.backend, "sessions": len(view.sessions), "clients": len(clients),
            "rounds": 1 + max((s.round for s in view.steps), default=0), "mode": "with client transcripts" if view.with_clients else "server-only",
            "client_transcripts": len(view.clients), "clients_compared": len(view.wire.clients) if view.wire is not None else 0,
            "dp_sigma": view.plan_config.get("dp_sigma"), "plan_config": view.plan_config}


def _sums(view: RunView) -> list[dict[str, Any]]:
    """Every sum the server started: delivered, redone after a re-key, or abandoned; and whether
    the server learned its value (mask, plain: every delivered sum; ckks: only released ones)."""
    rows = []
    for a in view.sums:
        learned = bool(a.released) if view.backend == "ckks" else (a.deliver is not None and a.deliver.aggregate is not None)
        rows.append({"session": view.sessions.index(a.session), "round": a.round, "name": a.name, "sum_index": a.sum_index, "epoch": a.epoch,
                     "asked": len(a.asked), "inputs": len(a.inputs), "contributors": len(a.contributors), "status": a.status,
                     "streaming": a.streaming, "server_learned_sum": learned})
    return rows


def _dropouts(view: RunView) -> list[dict[str, Any]]:
    """Who left, where: silent at a step (asked, never answered), or not asked again after one
    (the server rejected or excluded it); metrics.json's reason where the run recorded one."""
    reasons = (view.metrics or {}).get("dropped", {})
    out = []
    for session in view.sessions:
        steps = [s for s in view.steps if s.session == session]
        if not steps:
            continue
        final = steps[-1]
        last: dict[int, Any] = {}
        for s in steps:
            for c in s.asked:
                last[c] = s
        for client, step in sorted(last.items()):
            if step is final or (final.stage is Stage.END and client in final.asked):
                continue
            how = "silent" if client not in step.answered else "not asked again after answering"
            out.append({"session": view.sessions.index(session), "client": client, "round": step.round, "stage": step.stage.value, "how": how,
                        "reason": reasons.get(str(client), "")})
    return out


def _rekeys(view: RunView) -> list[dict[str, Any]]:
    per_round: dict[tuple[bytes, int], list] = defaultdict(list)
    for session, round_index, request in view.advertised:
        per_round[(session, round_index)].append(request)
    return [{"session": view.sessions.index(s), "round": r, "key_setups": len(reqs), "rekeys": len(reqs) - 1,
             "participants": [len(q.participants) for q in reqs], "threshold": [q.threshold for q in reqs], "graph": reqs[0].graph,
             "min_survivors": reqs[0].min_survivors}
            for (s, r), reqs in per_round.items()]


def _seen(view: RunView) -> dict[str, list[dict[str, Any]]]:
    """Who saw what: the server's received and sent messages by kind, and each kind a client received."""
    from secure_fedgraph.audit.plan_claims import dp_settings, is_activation

    sigma = (dp_settings(view) or (0.0, 0.0))[0]
    server: list[dict[str, Any]] = []
    inputs = [(a, m) for a in view.sums for m in a.inputs.values()]
    if inputs:
        kind = {"plain": "individual, in the clear", "mask": "individual, masked (uniform ring elements)", "ckks": "individual, encrypted"}[view.backend]
        server.append({"what": "secure-sum inputs", "messages": len(inputs), "clients": len({c for a in view.sums for c in a.inputs}), "form": kind})
    learned = [a for a in view.sums if (a.released if view.backend == "ckks" else a.deliver is not None and a.deliver.aggregate is not None)]
    if learned:
        server.append({"what": "sums (aggregates)", "messages": len(learned), "clients": "-",
                       "form": "released by the clients" if view.backend == "ckks" else "computed by the server"})
    for name in sorted({u.name for u in view.uploads}):
        group = view.uploads_named(name)
        noised = is_activation(name) and sigma > 0
        form = f"individual, DP-noised (sigma {sigma:g})" if noised else "individual, in the clear"
        server.append({"what": f"upload {name}", "messages": len(group), "clients": len({u.client for u in group}), "form": form})
    for kind, names in sorted(view.sent.items()):
        for name, n in sorted(names.items()):
            server.append({"what": f"sent {kind} {name}", "messages": n, "clients": "-", "form": "the server's own"})
    clients: dict[str, dict[str, int]] = defaultdict(lambda: {"clients": 0, "messages": 0})
    for record in view.clients.values():
        for what, n in record.received.items():
            clients[what]["clients"] += 1
            clients[what]["messages"] += n
    return {"server": server, "clients": [{"what": k, **v} for k, v in sorted(clients.items())]}
