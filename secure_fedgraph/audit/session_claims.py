"""Checker of R-SESSION (threat_model.md, the gRPC runtime): every session id in the server's
transcript is the one its clients' nonces make (protocol/core/session.py), so the server did not
choose it, and reused none."""

from __future__ import annotations

from secure_fedgraph.audit.findings import Finding, checks, failed, not_applicable, passed
from secure_fedgraph.audit.replay import RunView
from secure_fedgraph.protocol.core.session import NONCE_BYTES, agreed_session, welcome_digest


@checks("R-SESSION")
def sessions_hash_every_clients_nonce(view: RunView) -> Finding:
    """Per session: the nonces the server sent back are the ones the clients answered the
    Welcome with, and the id every later message carries is the hash of the proposal, the
    Welcome and those nonces; no id repeats across the run's sessions."""
    if not view.openings:
        return not_applicable("R-SESSION", "the transcript holds no session opening (a run from before sessions were agreed)")
    agreed = []
    for opening in view.openings:
        request = opening.request
        if request is None:
            return failed("R-SESSION", f"session proposal {opening.proposal.hex()[:8]} was never opened: no nonces were sent back")
        listed = {c: request.nonces[i * NONCE_BYTES : (i + 1) * NONCE_BYTES] for i, c in enumerate(request.clients)}
        wrong = sorted(c for c, nonce in listed.items() if opening.joined.get(c) != nonce)
        if wrong or len(request.nonces) != NONCE_BYTES * len(request.clients):
            return failed("R-SESSION", f"the server sent back nonces of clients {wrong[:8]} that they did not answer the Welcome with",
                          clients=wrong)
        agreed.append(agreed_session(proposal=opening.proposal, welcome=welcome_digest(opening.welcome), nonces=listed))
    strange = [s for s in view.sessions if s not in agreed]
    if strange or len(set(agreed)) != len(agreed):
        return failed("R-SESSION", f"{len(strange)} session id(s) in the transcript are not the hash of their clients' nonces, or an id "
                                   "repeats", sessions=[s.hex() for s in strange])
    clients = sum(len(o.request.clients) for o in view.openings)
    return passed("R-SESSION", f"{len(agreed)} session(s), each id the hash of the proposal, the Welcome and the nonces of its "
                               f"{clients} client answer(s) (each as that client sent it); every message after the opening carries it",
                  sessions=len(agreed))
