"""The contributor sets a client signed its contributions into, kept across the sessions of one
run (threat_model.md R-RESUME).

A resumed run (``server --resume``) starts a new session at a checkpointed round, and every
client's plan recomputes that round's contributions from the same state: the same values. A
server that "restarts" could therefore ask for a contribution that an earlier session already
summed, now over another set of clients, and subtract. What stops it: before a client signs a
contributor set (mask: the survivor set, before it reveals anything; the streaming variant: the
live set, before its input leaves; ckks: the contributor set, before anyone decrypts), it looks
the contribution up here. A contribution signed into a set in an earlier session goes only into
that same set again; one signed into more than one set (a re-key inside a session) goes nowhere
again. Contributions first made in this session are recorded, never refused (a re-key redoes a
sum among fewer clients before anything was revealed: M-ONCE). The plain backend binds nothing:
its server sees every input anyway (P-CLEAR).

Why that suffices: every sum a server can learn has honest signers among its contributors (it
needs t of them per client, M-CONSISTENCY; a majority of the run with ckks). They are bound to
that set, so two different sets never share an honest signer, and the difference of two sums
over different sets always holds some honest signer's input that no other sum holds: a sum of
at least t - c honest inputs, as any released sum is. Contributions a client sent without
signing a set (the server died between the inputs and the consistency step) are not bound.

Only digests are kept (SHA-256 of the contribution), with the plan round they belong to, so
entries of rounds a client can no longer resume are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from secure_fedgraph.errors import ProtocolError


@dataclass
class _Signed:
    before: set[frozenset[int]]  # the sets earlier sessions signed this contribution into
    now: set[frozenset[int]]  # ... and those the current session signed it into
    session: bytes
    plan_round: int


@dataclass
class SignedContributions:
    """One logical client's signed contributions, by (sum name, contribution digest); used by that
    client's thread only."""

    plan_round: int = 0  # the round the client's plan is in (set at each of its checkpoints)
    _entries: dict[tuple[str, bytes], _Signed] = field(default_factory=dict)

    def sign(self, name: str, digest: bytes, contributors: frozenset[int], *, session: bytes, client: int) -> None:
        """Record that this client signs ``contributors`` for its contribution ``digest`` to sum
        ``name`` in ``session``.

        Raises:
            ProtocolError: an earlier session signed that contribution into another set (or
                into more than one).
        """
        entry = self._entries.setdefault((name, digest), _Signed(set(), set(), session, self.plan_round))
        if entry.session != session:
            entry.before |= entry.now
            entry.now, entry.session = set(), session
        if entry.before and entry.before != {contributors}:
            before = " and ".join(_show(s) for s in sorted(entry.before, key=sorted))
            raise ProtocolError(
                f"client {client}: sum {name!r} asks again, in a new session, for a contribution this client signed into a "
                f"sum over clients {before} before the server restarted; refusing to sign it into a sum over "
                f"{_show(contributors)} (the difference of the two sums would reveal inputs; threat_model.md R-RESUME)")
        entry.now.add(contributors)

    def forget_before(self, plan_round: int) -> None:
        """Drop the entries of plan rounds before ``plan_round`` (rounds this client can no
        longer be asked to resume)."""
        self._entries = {k: e for k, e in self._entries.items() if e.plan_round >= plan_round}

    def __len__(self) -> int:
        return len(self._entries)


def _show(clients: frozenset[int]) -> str:
    ids = sorted(clients)
    return "[" + ", ".join(map(str, ids[:12])) + (f", ... ({len(ids)} in all)" if len(ids) > 12 else "") + "]"
