"""Attacks as tests run them: ``defence_stops`` (the attack fails against the real code and
succeeds with one defence switched off) and deviating servers, as subclasses of the real roles."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from secure_fedgraph.protocol.sum_backends import GraphKind
from secure_fedgraph.protocol.sum_backends.config import MaskPlan
from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer


def defence_stops(attack: Callable[[], bool], monkeypatch: pytest.MonkeyPatch, target: object, name: str, replacement: object) -> None:
    """Run ``attack`` against the real code, where it must fail, then against the same code with
    exactly one defence switched off (``target.name`` replaced), where it must succeed. A test
    that passes with its defence removed proves nothing; tests/test_threat_model.py requires
    this helper in every test a claim against a deviating server, colluders or a malicious
    client cites.

    ``attack()`` returns True when it obtained what it was after (an honest input, a corrupt
    sum released, an honest client excluded); a refusal by an honest party (a
    SecureFedGraphError) counts as the attack failing, but only while the defence is on.
    """
    from secure_fedgraph.errors import SecureFedGraphError

    try:
        stopped = not attack()
    except SecureFedGraphError:
        stopped = True
    assert stopped, "the attack succeeded against the real code"
    with monkeypatch.context() as switched_off:
        switched_off.setattr(target, name, replacement)
        assert attack(), f"the attack failed with {getattr(target, '__name__', target)}.{name} switched off: the test proves nothing"


class ServerThatNeverRekeys(MaskServer):
    """A curious server: after a dropout it asks for the mask-key shares of a client that had
    already contributed (whose self-mask it knows) instead of its neighbours' pair seeds of the
    sum with it (or a re-key)."""

    @property
    def _exposed(self):
        return set()

    @_exposed.setter
    def _exposed(self, value):
        pass


class WeakServer(MaskServer):
    """Announces whatever graph, threshold and survivor floor suits it (a round of two)."""

    weak = MaskPlan(GraphKind.COMPLETE, 1, 2, 2, 1, False)

    def _plan_for(self, n):
        return dataclasses.replace(self.weak, degree=n - 1, max_dropped=n - 1)

    def _require(self, count, needed, what):
        pass


class SplicingCkksServer:
    """Attack E2 (issue 29), as a mixin over CkksServer (:func:`splicing_ckks_server`): a plan's
    releasable sum ``target`` runs honestly in the plan's first round, but the server keeps every
    client's ciphertexts of it. From the next round on it labels every request round 0 again and
    gives ``target`` the sum index it had then; it asks every live client for its input (the live
    set of the first time, so only the reuse of the label differs), claims ``victim`` dropped,
    has the others sign their set, and delivers the first round's ciphertexts of the others as
    the aggregate. Released, that is the first round's total without the victim: the first
    round's released total minus it is the victim's contribution."""

    target, victim = "validation", 3

    def setup(self, round_index, participants=None):
        index = getattr(self, "_sum_index", 0)
        yield from super().setup(round_index, participants)
        if round_index > 0:
            self.seq.round, self._sum_index = 0, index  # later rounds reuse the first round's labels
            self.relabelled_after = getattr(self, "relabelled_after", self.seq.current)  # the last step labelled honestly

    def aggregate(self, spec):
        from secure_fedgraph.crypto.ckks import PublicContext
        from secure_fedgraph.protocol.sum_backends.messages import ConsistencyRequest, DeliverRequest, InputRequest, Signature
        from secure_fedgraph.protocol.core.spec import SumResult
        from secure_fedgraph.protocol.core.stages import Stage

        if spec.name != self.target:
            return (yield from super().aggregate(spec))
        first = not hasattr(self, "kept")
        if first:
            self.kept_index = self._sum_index
        index = self.kept_index
        self._sum_index = max(self._sum_index, index + 1)
        live = tuple(sorted(self.live))
        inputs: dict = {}
        outcome = yield self._step(Stage.INPUT, lambda h: self._per_client(h, live, InputRequest, lambda c: (index, spec, None, live)),
                                   lambda c, r: inputs.__setitem__(c, [self.context.load(b) for b in r.ciphertexts]))
        contributors = tuple(c for c in sorted(outcome.accepted) if first or c != self.victim)
        if first:
            self.kept = inputs
        signatures: dict = {}
        yield self._step(Stage.CONSISTENCY, lambda h: self._per_client(h, contributors, ConsistencyRequest, lambda c: (contributors,)),
                         lambda c, r: signatures.__setitem__(c, r.signature))
        total = None
        for c in contributors:
            total = PublicContext.add(total, self.kept[c])
        blobs = tuple(v.serialize() for v in total)
        signed = tuple(Signature(c, sig) for c, sig in sorted(signatures.items()))
        yield self._step(Stage.DELIVER, lambda h: self._per_client(h, contributors, DeliverRequest,
                                                                   lambda c: (index, contributors, None, blobs, None, signed)), lambda c, r: None)
        self.live = set(contributors)
        clip_range, scale_bits = self.config.ckks.encoding(spec, len(self.clients))
        bound = self.config.ckks.params.error_bound(len(contributors), clip_range=clip_range, scale_bits=scale_bits)
        return SumResult(spec, None, frozenset(contributors), None, bound)


def splicing_ckks_server(target: str = "validation", victim: int = 3) -> type:
    """A CkksServer class running attack E2 on sum ``target`` against client ``victim``."""
    from secure_fedgraph.protocol.sum_backends.ckks import CkksServer

    return type("Splicing", (SplicingCkksServer, CkksServer), {"target": target, "victim": victim})


def moved_record(pair, **change):
    """An envelope and its commitments (one of ``DealtShares.pairs()``), both moved: a dealt
    record holds one owner and holder for the two."""
    return tuple(dataclasses.replace(x, **change) for x in pair)
