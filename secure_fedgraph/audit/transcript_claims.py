"""Checkers of what the clients' transcripts can show about the server's (threat_model.md
R-TRANSCRIPT), and of the claims whose evidence is what the server's transcript says it sent:
C-CHECK, C-CONSISTENCY, M-CONSISTENCY.

The server writes its own transcript. Against a deviating server, whatever the audit reads
from it alone is the server's word: it can write the transcript of an honest run (issue 29: a
server that recovered a client's validation totals by splicing ckks ciphertexts passed the
audit). Given the clients' transcripts, replay.py compares every message each client received
or sent with the server's record of it at the same (session, step), byte for byte; a mismatch
fails R-TRANSCRIPT and every claim judged on the stage it happened in (:data:`BROKEN_BY`,
applied by audit/run.py).
"""

from __future__ import annotations

import dataclasses

from secure_fedgraph.audit.findings import Finding, Verdict, checks, failed, not_applicable, passed
from secure_fedgraph.audit.replay import EVEN_STAGES, RunView

SERVER_ONLY_LIMITS = (
    "From the server's transcript alone the audit shows what the server says it received, sent and computed. Against a deviating "
    "server that is its word: it writes that transcript, and can write one of an honest run. What the clients actually received "
    "(keys relayed, live and survivor sets, contributor sets, deliveries, requests to release) and sent (inputs, answers, releases) "
    "is shown only by comparing their transcripts with the server's (R-TRANSCRIPT), message by message; give every client's "
    "transcript to check it for every client. What a party killed mid-step never wrote cannot be compared either way, and signatures "
    "and CKKS check lanes are verified inside the clients, under keys no transcript holds.")

# stage of a mismatched message -> the claims judged on what the server's transcript shows of that stage ("*": every claim)
_CONFIG = "*"
BROKEN_BY: dict[str, frozenset[str] | str] = {
    "welcome": _CONFIG,
    "session": frozenset({"R-SESSION"}),
    "advertise": frozenset({"M-CONSISTENCY", "M-BOTH", "M-DROPOUT", "C-PUBLIC"}),
    "graph": frozenset({"M-CONSISTENCY", "M-BOTH"}),
    "share_keys": frozenset({"M-CONSISTENCY", "M-BOTH"}),
    "key_deal": frozenset({"C-PUBLIC", "C-CHECK"}),
    "key_install": frozenset({"C-PUBLIC", "C-CHECK"}),
    "input": frozenset({"M-UNIFORM", "M-NOPLAIN", "M-SUM", "M-ONCE", "M-RANGE", "M-STREAM", "P-CLEAR", "C-CHECK", "C-SUM", "DDP-NOISE",
                        "DDP-RANGE", "DDP-ACCOUNT", "ST-SUMS", "FR-SUMS", "NF-LATENT"}),
    "consistency": frozenset({"M-CONSISTENCY", "C-CONSISTENCY"}),
    "pair_seeds": frozenset({"M-CONSISTENCY", "M-BOTH", "M-SUM"}),
    "unmask": frozenset({"M-CONSISTENCY", "M-BOTH", "M-SUM"}),
    "recover": frozenset({"M-CONSISTENCY", "M-BOTH", "M-SUM"}),
    "deliver": frozenset({"M-SUM", "M-DROPOUT", "M-STREAM", "M-RANGE", "M-CONSISTENCY", "C-CHECK", "C-CONSISTENCY", "C-SUM", "DDP-NOISE",
                          "DDP-ACCOUNT"}),
    "verify": frozenset({"C-CHECK"}),
    "upload release:": frozenset({"C-SUM", "M-SUM"}),  # a client's release of a sum it decrypted (ckks)
    "upload": frozenset({"M-NOPLAIN", "SL-NORAW", "DP-CLIENT", "DP-ACCOUNT", "DP-SGD", "DP-UNIT", "NF-LATENT", "NF-DP", "NF-LINK", "ST-SUMS",
                         "FR-SUMS"}),
    "scatter": frozenset({"DP-UNIT", "NF-LATENT"}),
}
ALWAYS = frozenset({"R-TRANSCRIPT", "R-AUDIT"})


def broken_by(stage: str, claims) -> frozenset[str]:
    """The claims a mismatch at ``stage`` (WireCheck.stages' keys) breaks, among ``claims``."""
    key = "upload release:" if stage.startswith("upload release:") else "upload" if stage.startswith("upload") else stage
    found = BROKEN_BY.get(key, frozenset())
    return frozenset(claims) if found == _CONFIG else frozenset(found) & frozenset(claims)


# the claims whose support depends on the comparison whenever the clients' transcripts are given
COVERED = ALWAYS | frozenset().union(*(found for found in BROKEN_BY.values() if found != _CONFIG))


def with_broken_claims(view: RunView, findings: dict[str, Finding]) -> dict[str, Finding]:
    """Fail every passing claim a mismatch between the clients' transcripts and the server's breaks."""
    wire = view.wire
    if wire is None or not wire.mismatched:
        return findings
    by_claim: dict[str, list[str]] = {}
    for stage in wire.stages:
        for claim in broken_by(stage, findings):
            by_claim.setdefault(claim, []).append(stage)
    out = dict(findings)
    for claim, stages in by_claim.items():
        finding = out[claim]
        if finding.verdict is not Verdict.PASS:
            continue
        example = next((e for e in wire.examples if e.where in stages), wire.examples[0])
        out[claim] = dataclasses.replace(finding, verdict=Verdict.FAIL, evidence=(
            f"the clients' transcripts disagree with the server's at {', '.join(sorted(stages))} (R-TRANSCRIPT; e.g. {example.describe()}): "
            f"this claim was judged on what the server's transcript shows, which is not what the clients saw. As judged: {finding.evidence}"))
    return out


@checks("R-TRANSCRIPT")
def clients_saw_what_the_server_recorded(view: RunView) -> Finding:
    """Every message each client's transcript shows it received or sent equals, byte for byte, the
    server's record of it at the same (session, step); nothing the clients saw is missing from
    the server's transcript, and the server's shows nothing from a client that the client did
    not send (replay.compare_wire says what is tolerated: what a party stopped mid-step loses)."""
    wire = view.wire
    if wire is None:
        return not_applicable("R-TRANSCRIPT", "needs the clients' transcripts: the server's alone cannot show what the clients received "
                                              "and sent (a deviating server writes its own transcript)")
    unconfirmed = (f"; {wire.unconfirmed} messages not compared, lost where a party stopped mid-step (e.g. "
                   f"{wire.unconfirmed_examples[0].describe()})" if wire.unconfirmed else "")
    if wire.mismatched:
        stages = ", ".join(f"{stage} {n}" for stage, n in sorted(wire.stages.items()))
        return failed("R-TRANSCRIPT", f"{wire.mismatched} messages in {len(wire.clients)} client transcripts disagree with the server's "
                                      f"transcript ({stages}): " + "; ".join(e.describe() for e in wire.examples[:3]) + unconfirmed,
                      mismatched=wire.mismatched, stages=dict(wire.stages), clients=len(wire.clients), compared=wire.compared,
                      examples=[dataclasses.asdict(e) for e in wire.examples])
    return passed("R-TRANSCRIPT", f"{wire.compared} messages in {len(wire.clients)} client transcripts equal the server's record of them at "
                                  f"their (session, step), byte for byte{unconfirmed}", compared=wire.compared, clients=len(wire.clients),
                  unconfirmed=wire.unconfirmed)


def _as_shown(view: RunView) -> str:
    if view.wire is None:
        return " (as the server's transcript shows them; that the clients got these needs their transcripts, R-TRANSCRIPT)"
    return f" (and {len(view.wire.clients)} client transcripts show the same, R-TRANSCRIPT)"


@checks("C-CHECK", backends={"ckks"})
def deliveries_are_their_contributors_ciphertexts(view: RunView) -> Finding:
    """Every delivered aggregate is, byte for byte, the ciphertext sum of one input of each
    contributor it lists, received at that sum's own input step, recomputed with the run's public
    context (CKKS addition is exact on the ciphertexts: the same sum in any order has the same
    bytes). Copies, another sum's or another round's ciphertexts (issue 29, E2) fail it. The
    check lanes themselves are verified inside the clients."""
    delivered = [a for a in view.sums if a.deliver is not None]
    if not delivered:
        return not_applicable("C-CHECK", "no sum was delivered")
    if not view.key_deals:
        return not_applicable("C-CHECK", "no key deal in the transcript (no public context to add the inputs with)")
    from secure_fedgraph.crypto.ckks import PublicContext
    from secure_fedgraph.errors import ProtocolError

    context = PublicContext(view.key_deals[0].public_context)  # parameters only: every session's deal has the same
    bad = []
    for attempt in delivered:
        where = f"{attempt.name} (session {view.sessions.index(attempt.session)}, round {attempt.round}, sum {attempt.sum_index})"
        missing = [c for c in attempt.contributors if c not in attempt.inputs]
        if missing or len(set(attempt.contributors)) != len(attempt.contributors):
            bad.append(f"{where} lists contributors {missing or list(attempt.contributors)} without one input each to it")
            continue
        try:
            total = None
            for c in attempt.contributors:
                total = PublicContext.add(total, [context.load(b) for b in attempt.inputs[c].ciphertexts])
            same = total is not None and tuple(v.serialize() for v in total) == tuple(attempt.deliver.ciphertexts)
        except ProtocolError:
            same = False
        if not same:
            bad.append(f"{where} delivered ciphertexts that are not the sum of its contributors' inputs to it")
    if bad:
        return failed("C-CHECK", "; ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""), sums=len(delivered), bad=len(bad))
    return passed("C-CHECK", f"{len(delivered)} delivered aggregates are each the ciphertext sum of one input of each of their contributors "
                             f"to that sum{_as_shown(view)}; the check lanes are verified inside the clients", sums=len(delivered))


def _same_requests(view: RunView, claim: str, what: str) -> Finding:
    steps = [s for s in view.steps if s.stage in EVEN_STAGES]
    if not steps:
        return not_applicable(claim, "no consistency or deliver step in the run")
    uneven = view.uneven_steps
    if uneven:
        shown = ", ".join(f"session {s}, step {step} ({stage})" for s, step, stage in uneven[:3])
        return failed(claim, f"clients asked at one step got different {what}: {shown}" + (f" and {len(uneven) - 3} more" if len(uneven) > 3 else ""),
                      uneven=len(uneven))
    return passed(claim, f"every client asked at each of {len(steps)} consistency and deliver steps got the same {what}{_as_shown(view)}; "
                         "the signatures on them are verified inside the clients", steps=len(steps))


@checks("C-CONSISTENCY", backends={"ckks"})
def one_contributor_set_per_sum(view: RunView) -> Finding:
    """No two clients of one sum are shown different contributor sets (or deliveries)."""
    return _same_requests(view, "C-CONSISTENCY", "contributor set and delivery")


@checks("M-CONSISTENCY", backends={"mask"})
def one_survivor_set_per_sum(view: RunView) -> Finding:
    """No two clients of one sum are asked to sign different survivor sets (or get different deliveries)."""
    return _same_requests(view, "M-CONSISTENCY", "survivor set and delivery")
