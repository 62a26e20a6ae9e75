"""Audit a run from its transcripts: what the server saw, checked against threat_model.md.

Inputs: the server's transcript (``--transcript``: every message it received and sent) and,
optionally, the clients' transcripts recorded with ``--audit`` (each client's own plaintext
contributions, kept on the client's disk). Checks:

* M-UNIFORM: every masked upload the server received is uniform over the ring (chi-square over
  its bytes) and, where the client's plaintext is known, uncorrelated with it;
* M-NOPLAIN (in transcripts): no message the server received carries an individual input in
  the clear (the only data-bearing messages are masked inputs, ciphertexts, or released sums);
* M-SUM: every aggregate the server delivered equals the plaintext sum of its contributors'
  inputs within the stated bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from secure_fedgraph.protocol.engine import RELEASE_PREFIX
from secure_fedgraph.protocol.messages import Ack, UploadResponse, tensors_of
from secure_fedgraph.protocol.secure_sum import messages as sm
from secure_fedgraph.protocol.transcript import AUDIT, RECEIVED, SENT, read_transcript

_PROTOCOL_ONLY = (sm.AdvertiseResponse, sm.GraphResponse, sm.ShareKeysResponse, sm.KeyDealResponse, sm.ConsistencyResponse,
                  sm.UnmaskResponse, sm.RecoverResponse, sm.DeliverResponse, sm.VerifyResponse, Ack)


@dataclass
class Check:
    claim: str
    passed: bool
    evidence: str


@dataclass
class AuditReport:
    checks: list[Check] = field(default_factory=list)
    uploads: int = 0
    sums: int = 0

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)


def audit_run(server_transcript: str | Path, client_transcripts: Iterable[str | Path] = ()) -> AuditReport:
    """Replay the transcripts and check the claims above."""
    inputs: dict[tuple[bytes, int], object] = {}  # (session, step) -> InputRequest the server sent
    delivers: list[object] = []
    uploads: list[tuple[tuple[bytes, int], int, object]] = []  # ((session, step), client, InputResponse)
    other_kinds: dict[str, int] = defaultdict(int)
    for record in read_transcript(server_transcript):
        message = record.message()
        if record.direction == SENT:
            if isinstance(message, sm.InputRequest):
                inputs[_at(message.header)] = message
            elif isinstance(message, sm.DeliverRequest):
                delivers.append(message)
        elif record.direction == RECEIVED:
            if isinstance(message, sm.InputResponse):
                uploads.append((_at(message.header), record.peer, message))
            elif isinstance(message, UploadResponse) and message.name.startswith(RELEASE_PREFIX):
                other_kinds["released sum"] += 1
            elif not isinstance(message, _PROTOCOL_ONLY):
                other_kinds[type(message).__name__] += 1
    plaintext: dict[tuple[tuple[bytes, int], int], np.ndarray] = {}
    for path in client_transcripts:
        for record in read_transcript(path):
            if record.direction == AUDIT:
                message = record.message()
                tensors = tensors_of(message.tensors)
                spec = inputs.get(_at(message.header))
                if spec is not None:
                    plaintext[(_at(message.header), record.peer)] = spec.spec.flatten(tensors).astype(np.float64)
    report = AuditReport(uploads=len(uploads))
    _check_uploads(report, uploads, inputs, plaintext)
    report.checks.append(Check(
        "M-NOPLAIN", not [k for k in other_kinds if k != "released sum"],
        "the server received only secure-sum protocol messages"
        + (f" and {other_kinds['released sum']} released sums (aggregates, by the plan's choice)" if other_kinds.get("released sum") else "")
        + ("" if len(other_kinds) <= ("released sum" in other_kinds) else f"; unexpected: {dict(other_kinds)}"),
    ))
    _check_sums(report, delivers, inputs, plaintext)
    return report


def _at(header) -> tuple[bytes, int]:
    """Where a message belongs: its session and step (a resumed run's transcript holds several
    sessions, each numbering its steps from 1)."""
    return header.session, header.step


def _check_uploads(report: AuditReport, uploads, inputs, plaintext) -> None:
    """Per sum, pool every client's masked upload: a chi-square over all their bytes, and the
    correlation of the masked values with the clients' own plaintexts (pooled, so small sums of
    many clients are tested as well as large ones)."""
    masked = [(step, client, m) for step, client, m in uploads if inputs.get(step) is not None and inputs[step].encoding is not None]
    if not masked:
        kinds = "ciphertexts" if any(m.ciphertexts for _, _, m in uploads) else "plain tensors"
        report.checks.append(Check("M-UNIFORM", kinds == "ciphertexts", f"{len(uploads)} uploads were {kinds}, not masked ring elements"))
        return
    by_step: dict[tuple[bytes, int], list] = defaultdict(list)
    for step, client, message in masked:
        by_step[step].append((client, message.payload))
    worst_p, worst_ratio, tested_r, tested_p = 1.0, 0.0, 0, 0
    for step, entries in by_step.items():
        pooled = np.concatenate([np.frombuffer(y.tobytes(), dtype=np.uint8) for _, y in entries])
        if pooled.size >= 256 * 20:  # at least ~20 expected counts per byte value
            worst_p = min(worst_p, float(stats.chisquare(np.bincount(pooled, minlength=256)).pvalue))
            tested_p += 1
        pairs = [(y[: plaintext[(step, c)].size].astype(np.float64), plaintext[(step, c)]) for c, y in entries if (step, c) in plaintext]
        if pairs:
            ys, xs = np.concatenate([y for y, _ in pairs]), np.concatenate([x for _, x in pairs])
            if xs.size >= 100 and xs.std() > 0:
                r = float(np.corrcoef(ys, xs)[0, 1])
                worst_ratio = max(worst_ratio, abs(r) * np.sqrt(xs.size))  # in standard errors of r
                tested_r += 1
    passed = worst_p > 1e-6 and worst_ratio < 5
    evidence = (f"{len(masked)} masked uploads in {len(by_step)} sums; smallest chi-square p-value over a sum's bytes "
                f"{worst_p:.3g} ({tested_p} sums large enough to test)")
    if tested_r:
        evidence += f"; largest correlation with the clients' plaintexts {worst_ratio:.2f} standard errors ({tested_r} sums; limit 5)"
    report.checks.append(Check("M-UNIFORM", bool(passed), evidence))


def _check_sums(report: AuditReport, delivers, inputs, plaintext) -> None:
    if not plaintext:
        report.checks.append(Check("M-SUM", False, "no client audit records: run clients with --transcript DIR --audit to check sums"))
        return
    checked, worst, failures = 0, 0.0, []
    unique = {_at(d.header): d for d in delivers}.values()  # the same aggregate goes to every contributor
    for deliver in unique:
        session, step = _at(deliver.header)
        request = max((r for (sess, s), r in inputs.items() if sess == session and s < step and r.sum_index == deliver.sum_index
                       and r.header.round == deliver.header.round), key=lambda r: r.header.step, default=None)
        if request is None or deliver.aggregate is None:
            continue
        parts = [plaintext.get((_at(request.header), c)) for c in deliver.contributors]
        if any(p is None for p in parts):
            continue
        size = request.spec.size
        if request.encoding is not None:
            clip = request.encoding.clip_range
            truth = np.sum([np.clip(p, -clip, clip) for p in parts], axis=0)
            values = request.encoding.decode_sum(np.ascontiguousarray(deliver.aggregate[:size]))
            bound = request.encoding.error_bound(len(parts))
        else:
            truth, values, bound = np.sum(parts, axis=0), np.asarray(deliver.aggregate, np.float64), 1e-9 * max(1.0, float(np.abs(np.sum(parts, axis=0)).max()))
        error = float(np.max(np.abs(values - truth), initial=0.0))
        worst = max(worst, error / bound if bound else 0.0)
        checked += 1
        if error > bound:
            failures.append(f"{request.spec.name} (round {request.header.round}): error {error:.3g} > bound {bound:.3g}")
    report.sums = checked
    if not checked and not failures:
        report.checks.append(Check("M-SUM", False, "no delivered aggregate had audit records from all its contributors"))
        return
    report.checks.append(Check(
        "M-SUM", not failures,
        f"{checked} delivered aggregates equal the plaintext sums of their contributors (largest error {worst:.2f} of its bound)"
        if not failures else "; ".join(failures[:3]),
    ))
