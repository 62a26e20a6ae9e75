"""The audit's vocabulary: a verdict per threat_model.md claim, with its evidence, and the
registry of claim checkers (one function per claim ID, each reading a :class:`RunView`).

Claims no transcript can show (a property of running code, of key handling, of the wire) are
listed in :data:`NOT_IN_TRANSCRIPTS` with the reason; the report names them too, so every
claim of threat_model.md appears in it (tests/audit/test_audit.py,
test_every_threat_model_claim_is_checked_or_said_to_be_out_of_a_transcripts_reach, checks
both lists against threat_model.md).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from secure_fedgraph.audit.replay import RunView


class Verdict(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    NOT_APPLICABLE = "NOT APPLICABLE"


@dataclass(frozen=True)
class AttackResult:
    """What an attack measured, reported beside the claim it tests.

    ``errors``: name -> number (e.g. "attack on the uploads", "no-DP reference", "random guess"),
    in ``unit``, which says which way leaks (an error: lower means the attack learned more; a
    precision or an AUC: higher). ``figure``: the PNG's file name, if drawn."""

    name: str
    claim: str
    summary: str
    unit: str
    errors: dict[str, float]
    details: dict[str, Any] = field(default_factory=dict)
    figure: str | None = None


@dataclass(frozen=True)
class Finding:
    claim: str
    verdict: Verdict
    evidence: str
    details: dict[str, Any] = field(default_factory=dict)
    figures: tuple[str, ...] = ()
    attacks: tuple[AttackResult, ...] = ()
    plot: tuple[str, Any] | None = field(default=None, repr=False, compare=False)  # (figure kind, data) the report draws
    basis: str = ""  # what it was checked from (audit/run.py): SERVER_ONLY or WITH_CLIENTS; "" where it does not apply

    @property
    def passed(self) -> bool:
        """Not a failure (a claim that does not apply to this run passes trivially)."""
        return self.verdict is not Verdict.FAIL


SERVER_ONLY = "the server's transcript"
WITH_CLIENTS = "the server's and the clients' transcripts"


def passed(claim: str, evidence: str, **details: Any) -> Finding:
    return Finding(claim, Verdict.PASS, evidence, details)


def failed(claim: str, evidence: str, **details: Any) -> Finding:
    return Finding(claim, Verdict.FAIL, evidence, details)


def not_applicable(claim: str, evidence: str) -> Finding:
    return Finding(claim, Verdict.NOT_APPLICABLE, evidence)


def verdict(claim: str, ok: bool, evidence: str, **details: Any) -> Finding:
    return Finding(claim, Verdict.PASS if ok else Verdict.FAIL, evidence, details)


def with_plot(finding: Finding, kind: str, data: Any) -> Finding:
    """``finding`` with the data of a figure the report draws (report.py: one drawer per kind)."""
    return dataclasses.replace(finding, plot=(kind, data))


Checker = Callable[[RunView], Finding]
CHECKERS: dict[str, Checker] = {}


def checks(claim: str, *, backends: frozenset[str] | set[str] | None = None, plans: set[str] | None = None) -> Callable[[Checker], Checker]:
    """Register the checker of ``claim`` (one per claim ID). A claim about some backends or
    plans only is NOT APPLICABLE to other runs, saying which."""

    def register(function: Checker) -> Checker:
        if claim in CHECKERS:
            raise ValueError(f"claim {claim} has two checkers")

        def check(view: RunView) -> Finding:
            if backends is not None and view.backend not in backends:
                return not_applicable(claim, f"{view.backend} backend")
            if plans is not None and view.plan not in plans:
                return not_applicable(claim, f"plan {view.plan}")
            return function(view)

        CHECKERS[claim] = check
        return function

    return register


# claim -> why a transcript cannot show it (each is checked by the tests threat_model.md names)
NOT_IN_TRANSCRIPTS: dict[str, str] = {
    "M-PRG": "the masks' PRG and key sizes are properties of the code, not of the messages",
    "M-SIGN": "signature checks happen inside the clients; a transcript shows signed keys, not a refused forgery",
    "M-POLICY": "a client's own minimums are in its options, not on the wire",
    "NF-UNIT": "a statement of what the reported epsilon protects, checked against the accountant by the tests threat_model.md names",
    "NF-SAME": "a property of two runs (in one process and over gRPC), not of one transcript",
    "DDP-FLOOR": "a client's --min-ddp-noise is in its options, not on the wire; a refusal ends its run before it sends the sum",
    "ST-DDP-FLOOR": "a client's --min-ddp-noise is in its options, not on the wire; a refusal ends its run before it sends the sum",
    "ST-DDP": "what a transcript shows of it is checked under DDP-NOISE (every sum of the windows noised at its bound) and "
              "DDP-ACCOUNT (the run's one epsilon); what the server plus the other clients learn is the tests' attack",
    "DP-SGD-FLOOR": "a client's --min-dpsgd-sigma is in its options, not on the wire; a refusal happens at the Welcome",
    "M-REPLAY": "refused replays never reach a transcript",
    "M-WRAP": "a client refuses a sum that could wrap before it sends anything",
    "M-INPUT": "rejected client messages are logged by the runtime (metrics.json events), not judged from the transcript",
    "M-LIAR": "share commitments are checked inside the server and clients",
    "M-GARBAGE": "the count lane is checked inside the server before release",
    "M-GRAPH-COMPLETE": "the bound 2t > n + c depends on the colluders, which no transcript shows",
    "M-THRESHOLD": "the bound 2t > g + c depends on the colluders, which no transcript shows (the announced thresholds are in the report)",
    "M-GRAPH-SPARSE": "the graph's guarantees are probabilistic bounds over its seed, not observable per run",
    "C-FRESH": "key freshness is a property of the dealer's code; the sealed context is opaque to the server",
    "C-RELEASE": "whether a released sum was marked releasable is the client's plan's decision, not on the wire",
    "C-LIAR": "the verify step's outcome is the clients' judgement",
    "C-RANGE": "capacity checks happen before anything is sent",
    "C-COLLUDE": "a stated limitation, not a protection",
    "NF-INIT": "a user's W^(0) and dropout masks never leave it: the Welcome shows what was announced, not what the users drew",
    "R-MTLS": "TLS happens below the transcript",
    "R-HOST": "which stream a client's frames came on is below the transcript",
    "R-PKI": "certificate checks happen in the clients",
    "R-DATASET": "which folder a client reads is its own option, on its own disk, not on the wire",
    "R-INPUT": "malformed messages never decode into a transcript record that the audit replays",
    "R-CRASH": "a property of the server's handling code",
    "R-STREAMS": "stream limits act before a Hello is recorded",
    "R-FLOOD": "flow control acts below the transcript",
    "R-RESUME": "a restarted server's refused requests are the clients' decisions",
    "R-DROP": "the equivalence with an in-process run is a test's comparison; the audit lists dropouts and re-keys instead",
    "SL-SAME": "an equivalence between two runs, not a property of one run's messages",
    "ST-SAME": "an equivalence between two runs, not a property of one run's messages",
    "FR-SAME": "an equivalence between two runs, not a property of one run's messages",
    "FR-EQUAL": "compares the aggregate with the paper's formulas computed from every individual vector",
    "ST-EMBED": "node embeddings enter the sums only inside products; a transcript cannot separate them",
}
