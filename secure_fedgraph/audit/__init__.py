"""The leakage audit of a run against threat_model.md (``secure-fedgraph audit``).

- replay.py: transcripts -> :class:`RunView` (sums from start to delivery, uploads, steps, key set-ups);
- findings.py: verdicts, the registry of claim checkers, the claims no transcript can show;
- sum_claims.py, plan_claims.py, privacy_claims.py: one checker per claim ID;
- transcript_claims.py: the clients' transcripts against the server's (R-TRANSCRIPT), the
  claims a mismatch breaks, and what the server's transcript alone cannot show;
- attacks/: attacks that measure leakage, reported beside the claims they test;
- run.py: the audit itself; report.py: audit.md, audit.json, PNGs; curves.py: attack error
  against epsilon over several audited runs (for a sweep).
"""

from secure_fedgraph.audit.findings import AttackResult, Finding, Verdict
from secure_fedgraph.audit.report import as_json, lines, write_report
from secure_fedgraph.audit.run import AuditReport, audit, audit_view

__all__ = ["AttackResult", "AuditReport", "Finding", "Verdict", "as_json", "audit", "audit_view", "lines", "write_report"]
