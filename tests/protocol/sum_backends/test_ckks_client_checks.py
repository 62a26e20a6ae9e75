"""The ckks client's checks on what a deviating server sends, one condition at a time (`make
mutate`): each test breaks exactly one rule of one request (to one client, unless the test says
otherwise), with every client on its default policy but for the backend (``CKKS_ONLY``: ckks is
an option a user must name), and asserts that the client refuses it, naming the rule, or, for the
checks of a decrypted aggregate, that it keeps nothing and tells the server which check failed.
Removing that one condition from the client makes its test fail. An honest run still delivers
the plaintext sum. The attacks the checks stop, end to end, are in test_attacks.py (section E);
the key set-up and the check lanes themselves in test_ckks_backend.py."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

from secure_fedgraph.crypto.ckks import CHECK_LANES
from secure_fedgraph.crypto.envelope import seal
from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.crypto.labels import Purpose, label
from secure_fedgraph.errors import ProtocolError, SumAbandoned
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends import ckks
from secure_fedgraph.protocol.sum_backends.messages import Sealed, Signature, VerifyRequest
from secure_fedgraph.protocol.sum_backends.signed import SignedContributions
from secure_fedgraph.protocol.core.spec import SumSpec
from tests.helpers import make_inputs, max_error, plain_sum

N = 5  # the run's floor is 3, and so is its majority
VICTIM = 0  # the client whose request the server rewrites; client 0 is also the one that deals the CKKS keys
INSTALLER = 2  # a client that installs the keys client 0 dealt (a dealer in no test)
LIAR = 2  # a client whose ciphertexts fail their check lanes, so that the server runs VERIFY
CKKS = SecureSumConfig(backend=Backend.CKKS)
CKKS_ONLY = ClientPolicy(backends=frozenset({Backend.CKKS}))  # the default policy, but for the backend
SHAPE = {"w": (6,)}
INPUTS = make_inputs(range(N), shapes=SHAPE)
replace = dataclasses.replace


def _cases(**rows):
    """Parameters by case name: ``name=(value, ...)``."""
    return [pytest.param(*values, id=name.replace("_", " ")) for name, values in rows.items()]


class _Deviating:
    """A session of N clients whose server rewrites messages: ``rules`` maps (direction, stage,
    client, or None for every client) to ``change(message) -> message`` (None: the message is
    lost); ``seen`` keeps every message, decoded, by (direction, stage, client), before any change."""

    def __init__(self, *, policy: ClientPolicy = CKKS_ONLY, **kwargs) -> None:
        self.session = local_session(CKKS, range(N), policy=policy, **kwargs)
        self.server, self.clients = self.session.server, self.session.clients
        self.rules: dict = {}
        self.seen: dict = {}
        self.session.runner.intercept = self._hook

    def _hook(self, direction, stage, client, data):
        message = codec.decode(data)
        self.seen.setdefault((direction, stage, client), []).append(message)
        change = self.rules.get((direction, stage, client)) or self.rules.get((direction, stage, None))
        if change is None:
            return data
        changed = change(message)
        return None if changed is None else codec.encode(changed)

    def sum(self, name: str = "s", inputs=INPUTS, **kwargs):
        return self.session.secure_sum(name, inputs, **kwargs)

    def run(self, steps):
        return self.session.runner.run(steps)


def _one_sum(rules: dict, **kwargs) -> _Deviating:
    run = _Deviating(**kwargs)
    run.rules.update(rules)
    run.session.start_round()
    run.sum()
    return run


def _shifted(context, blobs, offset: float) -> tuple[bytes, ...]:
    """``blobs`` with ``offset`` added to every check lane (a plaintext the server adds without any key)."""
    out = []
    for blob in blobs:
        v = context.load(blob)
        out.append((v + ([0.0] * (v.size() - CHECK_LANES) + [offset] * CHECK_LANES)).serialize())
    return tuple(out)


# --- an honest run ---------------------------------------------------------------------------


@pytest.mark.parametrize("clip_range", [None, 1e6], ids=["values clipped", "large statistics at a lowered scale"])
def test_an_honest_run_delivers_the_plaintext_sum_with_its_stated_bound_and_clipped_count(clip_range):
    """C-SUM at every client: the decrypted sum is the plaintext sum of the clipped inputs within
    the error bound the client states, which is the server's: a sum of large statistics is
    encoded at a lowered scale, whose larger error the bound must state. Every client also
    learns how many values were clipped (plans report it: fedrel's ``clipped``)."""
    inputs = make_inputs(range(N), shapes=SHAPE, scale=12.0, seed=3)  # about a third beyond the default clip range of 8
    run = _Deviating()
    run.session.start_round()
    server_view = run.sum(inputs=inputs, clip_range=clip_range)
    clip = 8.0 if clip_range is None else clip_range
    reference = plain_sum(inputs, range(N), clip_range=clip)
    clipped = sum(int((np.abs(inputs[c]["w"]) > clip).sum()) for c in range(N))
    _, scale = CKKS.ckks.encoding(SumSpec.of("s", inputs[0], clip_range=clip_range), N)
    assert (clipped > 0, scale < CKKS.ckks.params.scale_bits) == ((True, False) if clip_range is None else (False, True))
    for client in run.clients.values():
        result = client.last_result
        assert result.contributors == frozenset(range(N))
        assert result.error_bound == server_view.error_bound
        assert max_error(result.values, reference) <= result.error_bound
        assert result.clipped == clipped


# --- ADVERTISE and the key set-up ------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    _cases(
        out_of_order=(lambda r: replace(r, participants=tuple(reversed(r.participants))), "participant list must be sorted, unique"),
        without_the_client=(lambda r: replace(r, participants=r.participants[1:]), "participant list must be sorted, unique"),
        repeated=(lambda r: replace(r, participants=(0, *r.participants)), "participant list must be sorted, unique"),
        below_the_floor=(lambda r: replace(r, min_survivors=2), "announced min_survivors=2, below the 3 of the run's 5 clients"),
    ),
)
def test_a_client_advertises_no_key_for_a_key_set_up_that_breaks_one_rule(change, match):
    """ADVERTISE: the participant list fixes whose keys the client takes for a peer's, so it must
    be a set that holds this client; the announced min_survivors may not go below the floor of
    the client's policy."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: .*{match}"):
        _one_sum({("down", Stage.ADVERTISE, VICTIM): change})


@pytest.mark.parametrize("case", ["its own keys as a peer's", "a peer outside the participants"])
def test_a_dealer_seals_the_keys_to_no_one_but_its_peers(case):
    """KEY_DEAL: the dealer seals the CKKS secret only to the other participants it was shown:
    not to keys that claim to be its own, nor to a client left out of the participant list it
    was shown."""
    run = _Deviating()
    if case == "its own keys as a peer's":
        own = lambda: run.seen[("up", Stage.ADVERTISE, VICTIM)][0].keys  # noqa: E731
        run.rules[("down", Stage.KEY_DEAL, VICTIM)] = lambda r: replace(r, peers=(*r.peers, own()))
        stray = VICTIM
    else:
        run.rules[("down", Stage.ADVERTISE, VICTIM)] = lambda r: replace(r, participants=r.participants[:-1])  # the last one still advertises
        stray = N - 1
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: keys of client {stray} are not a peer's"):
        run.session.start_round()


@pytest.mark.parametrize("case", ["another holder's envelope", "an envelope naming another owner"])
def test_a_client_opens_only_the_envelope_from_the_dealer_to_itself(case):
    """KEY_INSTALL: the content key must come in the envelope the dealer sealed to this client;
    anything else is refused by name, before any opening is tried."""
    run = _Deviating()

    def swapped(request):
        if case == "another holder's envelope":
            (deal,) = run.seen[("up", Stage.KEY_DEAL, 0)]
            (other,) = [s for s in deal.sealed if s.holder == INSTALLER + 1]
            return replace(request, sealed=other)
        return replace(request, sealed=Sealed(INSTALLER + 1, INSTALLER, request.sealed.data))

    run.rules[("down", Stage.KEY_INSTALL, INSTALLER)] = swapped
    with pytest.raises(ProtocolError, match=f"client {INSTALLER}: key envelope is not from the dealer to this client"):
        run.session.start_round()


@pytest.fixture
def repeating_dealer(monkeypatch):
    """The dealers' randomness repeats (a cloned VM image, a broken entropy source): every deal
    seals its context under the same content key, which the test so knows. (Only the ckks module's
    os.urandom: the CKKS keys themselves come from SEAL, the X25519 keys from OpenSSL.)"""
    key = b"\x07" * 32
    monkeypatch.setattr(ckks, "os", types.SimpleNamespace(urandom=lambda n: key[:n]))
    return key


@pytest.mark.parametrize("other", ["session", "round", "epoch", "dealer"])
def test_a_sealed_context_is_bound_to_its_deal_even_under_a_repeated_content_key(repeating_dealer, other):
    """KEY_INSTALL: the sealed CKKS context is authenticated with (session, round, key epoch,
    dealer) (C-FRESH). Should a content key ever repeat, the server still cannot have a client
    install the context of another deal: one sealed in another session, round or key epoch, or
    by another dealer, is refused as a replay."""
    run = _Deviating(identities={c: IdentityKey.generate() for c in range(N)})
    if other == "dealer":  # client 0 deals, and is then silenced; client 1 deals next, in the same epoch
        run.rules[("up", Stage.KEY_DEAL, 0)] = run.rules[("down", Stage.KEY_INSTALL, 0)] = lambda r: None
        later = run
    else:
        run.session.start_round()  # the first deal: round 0, epoch 0, by client 0
        if other == "session":
            later = _Deviating(identities={c: run.clients[c].identity for c in range(N)})
        else:
            later = run
            later.server.context = None  # the server deals again...
            if other == "round":
                later.server._epoch = -1  # ... in round 1, as epoch 0 again
    first = lambda: run.seen[("up", Stage.KEY_DEAL, 0)][0].sealed_context  # noqa: E731  (client 0's)
    later.rules[("down", Stage.KEY_INSTALL, INSTALLER)] = lambda r: replace(r, sealed_context=first())
    with pytest.raises(ProtocolError, match=f"client {INSTALLER}: the sealed CKKS context fails authentication"):
        if other == "epoch":
            later.run(later.server._deal_keys(list(range(N))))  # round 0, epoch 1
        else:
            later.session.start_round()


def test_a_sealed_secret_without_room_for_a_context_is_refused(repeating_dealer):
    """KEY_INSTALL: the dealer seals the check key followed by the CKKS secret context; a sealed
    secret no longer than the check key holds no context, and is refused as such."""
    run = _Deviating()

    def short(request):
        aad = label(Purpose.CKKS_CONTEXT_AAD, run.server.session, request.header.round, run.server._epoch, 0)
        return replace(request, sealed_context=seal(repeating_dealer, b"\x01" * ckks.CHECK_KEY_BYTES, aad))

    run.rules[("down", Stage.KEY_INSTALL, INSTALLER)] = short
    with pytest.raises(ProtocolError, match=f"client {INSTALLER}: the sealed CKKS secret is too short to hold the check key"):
        run.session.start_round()


# --- INPUT -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    _cases(
        out_of_order=(lambda r: replace(r, live=tuple(reversed(r.live))),),
        without_the_client=(lambda r: replace(r, live=r.live[1:]),),
        repeated=(lambda r: replace(r, live=(0, *r.live)),),
    ),
)
def test_a_client_encrypts_no_input_for_a_live_set_that_breaks_one_rule(change):
    """INPUT: the live set keys the check lanes of the client's ciphertexts, so it must be a set
    (sorted, unique) that holds the client."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: the live set of sum 0 must be sorted, unique and include this client"):
        _one_sum({("down", Stage.INPUT, VICTIM): change})


def test_a_second_input_under_the_label_of_the_first_is_refused():
    """INPUT: one contribution per (round, sum index) of a session, so that no check-lane label
    covers two of a client's contributions (issue 29, E2): the second sum of a round labelled as
    the first is refused."""
    run = _Deviating()
    run.rules[("down", Stage.INPUT, VICTIM)] = lambda r: replace(r, sum_index=0)
    run.session.start_round()
    run.sum("a")
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: input request for sum 0 of round 0 does not come after sum 0 of round 0"):
        run.sum("b")


def test_a_client_requiring_distributed_dp_noise_encrypts_no_private_sum_with_ckks():
    """INPUT with --min-ddp-noise: ckks adds no distributed DP noise, so a client that requires it
    on its model refuses to encrypt a sum its plan marked private (before anything leaves it),
    and goes on contributing its other sums."""
    run = _Deviating(policy=replace(CKKS_ONLY, min_ddp_noise=1.0))
    run.session.start_round()
    run.sum("err")
    assert all(c.last_result.spec.name == "err" for c in run.clients.values())
    with pytest.raises(ProtocolError, match=r"^sum 'model' of this client's model or data carries distributed DP noise multiplier 0 "
                                            r".*below 1 .*\(--min-ddp-noise\)$"):
        run.session.secure_sum("model", INPUTS, private=True)
    assert not run.clients[VICTIM].exposed("model")


# --- CONSISTENCY -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    _cases(
        out_of_order=(lambda r: replace(r, survivors=tuple(reversed(r.survivors))), "a contributor set must be sorted, unique and include"),
        without_the_client=(lambda r: replace(r, survivors=r.survivors[1:]), "a contributor set must be sorted, unique and include"),
        repeated=(lambda r: replace(r, survivors=(0, *r.survivors)), "a contributor set must be sorted, unique and include"),
        below_the_floor=(lambda r: replace(r, survivors=r.survivors[:2]), "contributor set of 2 is below this client's floor of 3"),
    ),
)
def test_a_client_signs_no_contributor_set_that_breaks_one_rule(change, match):
    """CONSISTENCY: what the client signs is the one set its sum may be decrypted over
    (C-CONSISTENCY): a set (sorted, unique) that holds the client, no smaller than its floor."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: {match}"):
        _one_sum({("down", Stage.CONSISTENCY, VICTIM): change})


def _resumed(first: tuple[str, list[int]], second: tuple[str, list[int]]):
    """Two sessions of one run (the server "restarts" between them): the clients keep their
    identity keys and what they signed, and their plans recompute the same contributions. Each
    argument names a sum and its participants; returns the second sum's result."""
    identities = {c: IdentityKey.generate() for c in range(N)}
    signed = {c: SignedContributions() for c in range(N)}
    result = None
    for name, clients in (first, second):
        run = _Deviating(identities=identities, signed=signed)
        run.run(run.server.setup(0, participants=clients))
        result = run.sum(name, {c: INPUTS[c] for c in clients})
    return result


def test_a_resumed_run_cannot_sign_a_contribution_into_another_set():
    """CONSISTENCY in a resumed run (R-RESUME): a contribution signed into the set of all five
    before the restart goes into no other set after it (the sum without client 4 would give
    client 4's input away, by difference)."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: sum 's' asks again, in a new session, for a contribution this client "
                                            r"signed into a sum over clients \[0, 1, 2, 3, 4\] before the server restarted"):
        _resumed(("s", list(range(N))), ("s", list(range(N - 1))))


def test_a_resumed_run_binds_each_contribution_to_its_own_sum():
    """R-RESUME binds (sum, contribution): another sum that happens to carry the same values can
    still be summed over fewer clients after the restart."""
    result = _resumed(("a", list(range(N))), ("b", [0, 1, 2]))
    assert result.contributors == frozenset({0, 1, 2})


# --- DELIVER ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    _cases(
        another_sum_index=(lambda r: replace(r, sum_index=1), "delivered sum 1 is not the one this client contributed to"),
        without_the_client=(lambda r: replace(r, contributors=r.contributors[1:]), "delivered sum 0 is not the one this client contributed to"),
        another_contributor_set=(lambda r: replace(r, contributors=r.contributors[:-1]),
                                 "delivered sum 0 is not over the contributor set this client signed"),
        too_few_signatures=(lambda r: replace(r, signatures=r.signatures[:2]), "only 2 contributors signed the set of sum 0, need 3"),
        a_signature_repeated=(lambda r: replace(r, signatures=(*r.signatures[:1] * 3, r.signatures[1])),
                              "only 2 contributors signed the set of sum 0, need 3"),
    ),
)
def test_a_client_decrypts_no_delivered_sum_that_breaks_one_rule(change, match):
    """DELIVER: the client decrypts only the sum it contributed to, over the set it signed, and
    only when a majority of the run's clients signed that set too: no two clients then decrypt
    sums over sets that differ by one client (C-CONSISTENCY)."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: {match}"):
        _one_sum({("down", Stage.DELIVER, VICTIM): change})


def test_a_signature_of_a_client_outside_the_set_does_not_count():
    """DELIVER: only the contributors' signatures count towards the majority. Client 4 dropped out
    before its input; colluding with the server, it signs the set of 0-3, which the server passes
    off as the third signature the victim needs."""
    run = _Deviating(drop={Stage.INPUT: {N - 1}})
    outsider, members = run.clients[N - 1].identity, tuple(range(N - 1))

    def padded(request):
        statement = ckks.contributor_statement(run.server.session, 0, run.server._epoch, 0, "s", members)
        return replace(request, signatures=(*request.signatures[:2], Signature(N - 1, outsider.sign(statement))))

    run.rules[("down", Stage.DELIVER, VICTIM)] = padded
    run.session.start_round()
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: only 2 contributors signed the set of sum 0, need 3"):
        run.sum(inputs={c: INPUTS[c] for c in members})


def test_a_bad_signature_does_not_hide_the_good_ones():
    """DELIVER: every valid signature counts, wherever it stands among bad ones: a junk signature
    in front of them does not make the client refuse an honest sum."""
    junk = Signature(1, b"\x00" * 64)
    run = _one_sum({("down", Stage.DELIVER, VICTIM): lambda r: replace(r, signatures=(junk, *r.signatures))})
    result = run.clients[VICTIM].last_result
    assert max_error(result.values, plain_sum(INPUTS, range(N))) <= result.error_bound


def _twice(run, request):
    """The aggregate with client 1's ciphertexts added once more."""
    context = run.server.context
    (upload,) = run.seen[("up", Stage.INPUT, 1)]
    total = context.add([context.load(b) for b in request.ciphertexts], [context.load(b) for b in upload.ciphertexts])
    return replace(request, ciphertexts=tuple(v.serialize() for v in total))


CHECK_LANES_FAILED = "the aggregate is not the sum of its contributors' ciphertexts (check lanes)"


@pytest.mark.parametrize(
    ("change", "reason"),
    _cases(
        a_contribution_twice=(_twice, "CKKS aggregate failed its integrity check: count lane decrypts to 6, expected 5 contributors "
                                      "(wrong key, or corrupted ciphertexts)"),
        a_ciphertext_too_many=(lambda run, r: replace(r, ciphertexts=(*r.ciphertexts, r.ciphertexts[0])), CHECK_LANES_FAILED),
        check_lanes_moved=(lambda run, r: replace(r, ciphertexts=_shifted(run.server.context, r.ciphertexts, 1.0)), CHECK_LANES_FAILED),
    ),
)
def test_a_client_keeps_no_doctored_aggregate_and_says_which_check_it_failed(change, reason):
    """DELIVER: an aggregate that is not exactly one ciphertext of each contributor (C-CHECK) is
    refused, with the check it failed (the count lane; the check lanes, which also cover the
    number of ciphertexts, since no check reads the lanes of an extra one) in the answer the
    server, and its transcript, get. The server changes the aggregate for every client here, and
    asks for no verdicts after: each client refuses it, and the sum is abandoned."""
    run = _Deviating()
    run.session.start_round()
    run.rules[("down", Stage.DELIVER, None)] = lambda r: change(run, r)
    run.rules[("down", Stage.VERIFY, None)] = lambda r: None
    with pytest.raises(SumAbandoned, match="no sender identified"):
        run.sum()
    answers = [run.seen[("up", Stage.DELIVER, c)][0] for c in range(N)]
    assert [(a.accepted, a.reason) for a in answers] == [(False, reason)] * N
    assert all(c.last_result is None for c in run.clients.values())


# --- VERIFY ----------------------------------------------------------------------------------


def _verify(rules=lambda run: {}, *, clip_range: float | None = None) -> _Deviating:
    """One sum in which client LIAR's check lanes are off (it changes its upload), so every client
    refuses the aggregate and the server has each contribution checked alone by the next
    contributor (VICTIM checks client N - 1's). ``rules(run)`` are added once the keys are installed."""
    run = _Deviating()
    run.session.start_round()
    run.rules[("up", Stage.INPUT, LIAR)] = lambda r: replace(r, ciphertexts=_shifted(run.server.context, r.ciphertexts, 1.0))
    run.rules.update(rules(run))
    with pytest.raises(SumAbandoned, match="failed its check"):
        run.sum(clip_range=clip_range)
    return run


def test_verify_finds_the_liar_and_only_the_liar():
    """VERIFY (C-LIAR): each contribution is checked alone by another contributor, which answers
    valid for the honest ones and not for the liar's: the liar is excluded, and nobody else."""
    run = _verify()
    verdicts = {answer.owner: answer.valid for c in range(N) for answer in run.seen[("up", Stage.VERIFY, c)]}
    assert verdicts == {c: c != LIAR for c in range(N)}
    assert set(run.server.excluded) == {LIAR}


@pytest.mark.parametrize(
    ("change", "match"),
    _cases(
        another_sum_index=(lambda r: replace(r, sum_index=1), f"asked to verify sum 1 of client {N - 1}"),
        its_own_contribution=(lambda r: replace(r, owner=VICTIM), f"asked to verify sum 0 of client {VICTIM}"),
    ),
)
def test_a_client_verifies_only_another_contributor_of_its_pending_sum(change, match):
    """VERIFY: a verdict says whether ciphertexts are a contributor's own for the sum this client
    waits for; asked about another sum, or about its own contribution, the client refuses."""
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: {match}, not another contributor of the sum this client has pending"):
        _verify(lambda run: {("down", Stage.VERIFY, VICTIM): change})


def test_a_client_that_accepted_its_sum_still_checks_ciphertexts_for_a_complaint():
    """VERIFY: a client that accepted its sum keeps it pending until its next input, so that when
    another contributor complains it can still check contributions against it (a complaint alone
    must not make the clients that accepted refuse, and leave the run: C-LIAR); it checks only
    other contributors' ciphertexts, and only for that sum."""
    run = _one_sum({})
    (upload,) = run.seen[("up", Stage.INPUT, 1)]
    verdicts = {}

    def ask(index: int, owner: int):
        yield run.server._step(Stage.VERIFY, lambda h: {VICTIM: VerifyRequest(h, index, owner, upload.ciphertexts)},
                               lambda c, r: verdicts.__setitem__(c, (r.owner, r.valid)))

    run.run(ask(0, 1))
    assert verdicts == {VICTIM: (1, True)}
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: asked to verify sum 1 of client 1, not another contributor"):
        run.run(ask(1, 1))


@pytest.mark.parametrize(
    ("clip_range", "bounds", "valid"),
    _cases(
        within_the_noise=(None, 1.0, True),
        within_the_noise_at_a_lowered_scale=(1e6, 1.0, True),
        beyond_three_error_bounds_of_one_contribution=(None, 3.5, False),
    ),
)
def test_verify_judges_one_contribution_by_the_error_bound_of_one(clip_range, bounds, valid):
    """VERIFY: a contribution checked alone is judged against three error bounds of one
    contribution at the scale it was encoded at. Honest noise (up to the stated error) never gets
    its sender excluded, even for large statistics encoded at a lowered scale; a deviation beyond
    three bounds of one contribution does (three bounds of a sum of several would let it pass).
    The server moves the check lanes of client N - 1's ciphertexts it asks VICTIM to check."""
    clip, scale = CKKS.ckks.encoding(SumSpec.of("s", INPUTS[0], clip_range=clip_range), N)
    offset = bounds * CKKS.ckks.params.error_bound(1, clip_range=clip, scale_bits=scale)
    run = _verify(lambda run: {("down", Stage.VERIFY, VICTIM): lambda r: replace(r, ciphertexts=_shifted(run.server.context, r.ciphertexts, offset))},
                  clip_range=clip_range)
    answers = {answer.owner: answer.valid for answer in run.seen[("up", Stage.VERIFY, VICTIM)]}
    assert answers[N - 1] is valid
    assert answers[LIAR] is False and LIAR in run.server.excluded
    # this server altered what VICTIM checked, so the other checkers outvote it: an honest server sends every checker the same
    assert (VICTIM in run.server.excluded) is not valid and N - 1 not in run.server.excluded


def test_a_request_labelled_before_the_first_round_is_refused():
    """Rounds start at 0: a session's first request labelled round -1 (below which a client's
    "last input" bookkeeping starts) is refused before its content is looked at, so no label of a
    contribution can sit before the first round."""
    run = _Deviating()
    run.rules[("down", Stage.ADVERTISE, VICTIM)] = lambda r: replace(r, header=replace(r.header, round=-1))
    with pytest.raises(ProtocolError, match=f"client {VICTIM}: request for round -1 at stage advertise"):
        run.session.start_round()
