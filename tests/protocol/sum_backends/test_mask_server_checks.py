"""The mask server's checks on what a malicious client sends, one condition at a time (issue 29
item 9; `make mutate`): each test has one client break one rule in one answer, with every client
on its default policy, and asserts that the server refuses that answer (naming the client) and
that the honest clients' sum is still delivered. The attacks, end to end with each defence
switched off, are in test_attacks.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from secure_fedgraph.crypto.keys import RoundKeys
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage, keyring, mask_client
from secure_fedgraph.protocol.sum_backends.mask_format import DEALT_BODY_BYTES
from secure_fedgraph.protocol.sum_backends.messages import Complaint, DealtToNeighbours, GraphResponse, Share
from tests.helpers import default_policy_session as local_session
from tests.helpers import make_inputs, plain_sum

N = 10  # threshold 7 of 9 neighbours: one answer refused still leaves enough shares
LIAR = 2
MASK = SecureSumConfig(backend=Backend.MASK)
SHAPE = {"w": (5,)}


def _run(stage: Stage, change, *, drop, sums: int = 1):
    """N clients; LIAR rewrites its answer at ``stage`` with ``change(response) -> response``."""

    def hook(d, s, c, data):
        if (d, s, c) == ("up", stage, LIAR):
            return codec.encode(change(codec.decode(data)))
        return data

    session = local_session(MASK, range(N), intercept=hook, drop=drop)
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    return session, [session.secure_sum(f"s{i}", inputs) for i in range(sums)], inputs


def _refused(session, stage: Stage, what: str) -> bool:
    return any(f"{stage.value}: " in line and what in line and f"client {LIAR}" in line for line in session.server.log)


@pytest.mark.parametrize(("case", "what"), [("a short self-mask key", "malformed answer"), ("one share twice", "malformed answer"),
                                           ("a share of a survivor", "which it does not hold"),
                                           ("a share of the wrong length", "which it does not hold")])
def test_the_server_refuses_an_unmask_answer_that_breaks_one_rule(case, what):
    """Client 5 drops before its input; LIAR's answer at UNMASK breaks one rule. The server
    refuses it, and the sum over the survivors is still right (LIAR's self-mask is rebuilt from
    its seed shares, 5's mask key from the other holders')."""

    def change(response):
        shares = list(response.mask_key_shares)
        if case == "a short self-mask key":
            return dataclasses.replace(response, self_mask_key=response.self_mask_key[:-1])
        if case == "one share twice":
            shares.append(shares[0])
        elif case == "a share of a survivor":
            shares.append(Share(0, shares[0].value))
        else:
            shares[0] = Share(shares[0].owner, shares[0].value[:-1])
        return dataclasses.replace(response, mask_key_shares=tuple(shares))

    session, (result,), inputs = _run(Stage.UNMASK, change, drop={Stage.INPUT: {5}})
    assert any("rejected" in line and f"{LIAR}:" in line and what in line for line in session.server.log), session.server.log
    contributors = set(range(N)) - {5}
    assert result.contributors == frozenset(contributors)
    assert np.allclose(result.values["w"], plain_sum(inputs, contributors)["w"], atol=1e-5)


@pytest.mark.parametrize(("case", "what"), [("one share twice", "shares it does not hold"), ("a share of a client not missing", "shares it does not hold"),
                                           ("a share of the wrong length", "shares it does not hold")])
def test_the_server_refuses_a_recovery_answer_that_breaks_one_rule(case, what):
    """Client 5 goes silent after its input, so its seed is recovered; LIAR's answer at RECOVER
    breaks one rule. The server refuses it and rebuilds the seed from the other holders."""

    def change(response):
        shares = list(response.self_seed_shares)
        if case == "one share twice":
            shares.append(shares[0])
        elif case == "a share of a client not missing":
            shares.append(Share(0, shares[0].value))
        else:
            shares[0] = Share(shares[0].owner, shares[0].value[:-1])
        return dataclasses.replace(response, self_seed_shares=tuple(shares))

    session, (result,), inputs = _run(Stage.RECOVER, change, drop={Stage.UNMASK: {5}})
    assert any("rejected" in line and f"{LIAR}:" in line and what in line for line in session.server.log), session.server.log
    assert result.contributors == frozenset(range(N))
    assert np.allclose(result.values["w"], plain_sum(inputs, range(N))["w"], atol=1e-5)


def test_a_client_silent_at_delivery_is_no_longer_live():
    session, _, _ = _run(Stage.DELIVER, lambda r: r, drop={Stage.DELIVER: {4}})
    assert 4 not in session.server.live and {0, 1, 2, 3, 5} <= session.server.live


def test_a_dealer_whose_mask_key_shares_rebuild_another_key_is_excluded():
    """Client 4 Shamir-shares a mask key other than the one it advertised, then drops before its
    input. The shares match its commitments (it committed to them), but the key they rebuild is
    not its advertised one: the server names 4, cancels nothing with that key, and abandons the
    sum rather than release one its masks did not cancel from."""
    from secure_fedgraph.errors import SecureFedGraphError

    def swap_key(d, s, c, data):
        if (d, s, c) == ("down", Stage.SHARE_KEYS, 4):
            other = RoundKeys.generate()
            session.clients[4]._epoch.keys.mask_private_bytes = other.mask_private_bytes
        return data

    session = local_session(MASK, range(N), intercept=swap_key, drop={Stage.INPUT: {4}})
    session.start_round()
    with pytest.raises(SecureFedGraphError):
        session.secure_sum("s", make_inputs(range(N), shapes=SHAPE))
    assert session.server.excluded == {4: "dealt mask-key shares that do not rebuild its advertised key"}


@pytest.mark.parametrize(("stage", "kind", "drop"), [(Stage.UNMASK, "mask_key", {Stage.INPUT: {5}}), (Stage.RECOVER, "seed", {Stage.UNMASK: {5}})])
def test_a_holder_revealing_a_share_its_dealer_did_not_commit_to_is_named_with_its_lie(stage, kind, drop):
    """The run's record says who lied and how (metrics.json `excluded`); the sum goes on."""
    field = "mask_key_shares" if stage is Stage.UNMASK else "self_seed_shares"

    def change(response):
        return dataclasses.replace(response, **{field: tuple(Share(s.owner, bytes(len(s.value))) for s in getattr(response, field))})

    session, (result,), _ = _run(stage, change, drop=drop)
    assert session.server.excluded == {LIAR: f"revealed a {kind} share of client 5 that fails 5's commitment"}
    assert result.contributors == frozenset(range(N)) - ({5} if stage is Stage.UNMASK else set())  # its own input was masked honestly


def _rejected_at(session, stage: Stage, what: str) -> bool:
    return any(line.startswith(f"round 0 {stage.value}:") and f"rejected {LIAR}: " in line and what in line for line in session.server.log)


def _changed(field: str, change):
    return lambda response: dataclasses.replace(response, **{field: change(getattr(response, field))})


@pytest.mark.parametrize(
    ("stage", "case", "change", "what"),
    [
        (Stage.ADVERTISE, "keys claiming another client", _changed("keys", lambda k: dataclasses.replace(k, client=3)), "malformed keys"),
        (Stage.ADVERTISE, "a short key", _changed("keys", lambda k: dataclasses.replace(k, mask_public=k.mask_public[:-1])), "malformed keys"),
        (Stage.SHARE_KEYS, "an envelope missing", _changed("dealt", lambda d: DealtToNeighbours(d.records[DEALT_BODY_BYTES:])),
         "one share pair to each"),
        (Stage.SHARE_KEYS, "an envelope too many", _changed("dealt", lambda d: DealtToNeighbours(d.records + d.records[:DEALT_BODY_BYTES])),
         "one share pair to each"),
        (Stage.INPUT, "one complaint twice", _changed("complaints", lambda _: (Complaint(0, bytes(32)), Complaint(0, bytes(32)))),
         "complained about envelopes it was not dealt"),
        (Stage.INPUT, "a complaint about a dealer it has no envelope of", _changed("complaints", lambda _: (Complaint(N + 4, bytes(32)),)),
         "complained about envelopes it was not dealt"),
        (Stage.INPUT, "a complaint with a short key", _changed("complaints", lambda _: (Complaint(0, bytes(31)),)),
         "complained about envelopes it was not dealt"),
    ],
    ids=lambda x: x if isinstance(x, str) else None,
)
def test_the_server_refuses_a_key_set_up_answer_that_breaks_one_rule(stage, case, change, what):
    """LIAR breaks one rule at one step of the key set-up or of its input; the server refuses its
    answer and the sum goes on over the others."""
    session, (result,), inputs = _run(stage, change, drop=None)
    assert _rejected_at(session, stage, what), (case, session.server.log)
    assert LIAR not in result.contributors and len(result.contributors) == N - 1


def test_a_dealer_sending_its_envelopes_in_each_others_places_costs_only_itself(monkeypatch):
    """LIAR swaps the envelopes (and commitments) it deals to its first two neighbours: the server
    addresses records by their place (messages.DealtToNeighbours), so each goes to the other
    holder. Neither opens there (each direction of a pair has its own envelope key, and the AAD
    names the holder), so both holders set LIAR's shares aside without complaining, nobody is
    excluded, and the sum over all N is right. With envelopes bound to no holder (one key for
    all, no holder in the AAD) the same swap opens at the wrong holders, who complain: the test
    can tell the two apart."""
    size = DEALT_BODY_BYTES
    swapped = _changed("dealt", lambda d: DealtToNeighbours(d.records[size:2 * size] + d.records[:size] + d.records[2 * size:]))
    session, (result,), inputs = _run(Stage.SHARE_KEYS, swapped, drop=None)
    first, second = sorted(session.clients[LIAR]._epoch.peers)[:2]
    assert all(LIAR in session.clients[h]._epoch.bad_dealers and LIAR not in session.clients[h]._epoch.held for h in (first, second))
    assert not session.server.excluded
    assert result.contributors == frozenset(range(N))
    assert np.allclose(result.values["w"], plain_sum(inputs, range(N))["w"], atol=1e-5)

    aad = keyring._aad
    with monkeypatch.context() as unbound:
        unbound.setattr(mask_client, "envelope_key", lambda pair, **_: bytes(32))
        unbound.setattr(keyring, "_aad", lambda owner, holder, *hashes, **labels: aad(owner, 0, *hashes, **labels))
        session, _, _ = _run(Stage.SHARE_KEYS, swapped, drop=None)
    assert LIAR in session.server.excluded  # opened where it was not sealed to: a complaint, and the server's judgement


def test_the_server_stops_a_round_past_its_own_re_key_bound():
    """The server's --max-rekeys: one re-key is allowed, the second ends the round with no
    aggregate (whatever the clients would accept)."""
    from secure_fedgraph.errors import DropoutError
    from secure_fedgraph.protocol.sum_backends import MaskConfig

    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(max_rekeys_per_round=1))
    session = local_session(config, range(N))
    session.start_round()
    session.runner.run(session.server._key_setup(set(range(N - 1))))
    with pytest.raises(DropoutError, match="no key set-up held within 1 re-keys"):
        session.runner.run(session.server._key_setup(set(range(N - 2))))


def test_a_dealer_whose_seed_shares_rebuild_another_seed_is_excluded():
    """Client 4 Shamir-shares (and masks with) a seed other than the one it committed to at
    ADVERTISE, then goes silent after its input. The rebuilt seed fails 4's commitment: the
    server names 4 and abandons the sum rather than release one whose self-mask it cannot trust."""
    import os

    from secure_fedgraph.errors import SecureFedGraphError

    def swap_seed(d, s, c, data):
        if (d, s, c) == ("down", Stage.SHARE_KEYS, 4):
            session.clients[4]._epoch.seed = os.urandom(len(session.clients[4]._epoch.seed))
        return data

    session = local_session(MASK, range(N), intercept=swap_seed, drop={Stage.UNMASK: {4}})
    session.start_round()
    with pytest.raises(SecureFedGraphError, match="client 4's seed shares are inconsistent"):
        session.secure_sum("s", make_inputs(range(N), shapes=SHAPE))
    assert session.server.excluded == {4: "dealt seed shares that do not rebuild its committed seed"}


def _sparse_run(hook=None, drop=None, prepare=None):
    """A sparse key epoch of 12 clients (small: the clients opt into a weaker adversary);
    ``prepare(session)`` runs before the round starts."""
    from secure_fedgraph.protocol.sum_backends.policy import ClientPolicy
    from tests.helpers import sparse_config

    config = sparse_config(4)
    session = local_session(config, range(12), intercept=hook, drop=drop, policy=ClientPolicy.accepting(config))
    if prepare is not None:
        prepare(session)
    session.start_round()
    inputs = make_inputs(range(12), shapes=SHAPE)
    return session, session.secure_sum("s", inputs), inputs


@pytest.mark.parametrize("stage", [Stage.ADVERTISE, Stage.GRAPH])
def test_a_sparse_epoch_that_loses_a_client_before_its_graph_is_fixed_re_keys_without_it(stage):
    """The graph's degree and threshold were announced for every participant, and every
    committed nonce seeds it: a client silent at ADVERTISE or GRAPH means a new key epoch among
    the others, and the sum is delivered over them."""
    session, result, inputs = _sparse_run(drop={stage: {7}})
    assert result.contributors == frozenset(range(12)) - {7}
    assert np.allclose(result.values["w"], plain_sum(inputs, result.contributors)["w"], atol=1e-5)
    assert any("re-keying" in line and "[7]" in line for line in session.server.log)


def test_a_graph_nonce_of_the_wrong_length_is_refused_even_when_committed_to():
    """LIAR commits to a 31-byte nonce and reveals it: the commitment matches, but a short nonce
    would make every honest client refuse the epoch's nonce list. The server refuses LIAR, re-keys
    without it, and the sum is delivered over the others."""
    from secure_fedgraph.protocol.sum_backends import keyring

    short = bytes(31)

    def hook(d, s, c, data):
        if (d, s, c) == ("up", Stage.ADVERTISE, LIAR):
            response = codec.decode(data)
            h = response.header
            committed = keyring.graph_commitment(short, keyring.keys_hash(response.keys), session=h.session, round=h.round, epoch=0, client=LIAR)
            return codec.encode(dataclasses.replace(response, graph_commitment=committed))
        return data

    def lie(session):  # the liar's own code reveals the short nonce it committed to
        role = session.clients[LIAR]
        role._on_graph = lambda request: GraphResponse(role._header(request), short)

    session, result, _ = _sparse_run(hook, prepare=lie)
    assert any("rejected 2: graph: client 2's nonce does not match its commitment" in line for line in session.server.log), session.server.log
    assert result.contributors == frozenset(range(12)) - {LIAR}


def test_a_sum_too_few_survivors_sign_for_is_redone_under_new_keys_among_the_signers():
    """All ten clients send their inputs, but four go silent at CONSISTENCY: six signatures are
    fewer than the threshold of 7 every client needs before it reveals anything, so unmasking
    now would stall the run on honest refusals. Nothing is revealed yet, so the server re-keys
    the six that signed and asks for the sum again: the run goes on and delivers their sum."""
    silent = {6, 7, 8, 9}
    session = local_session(MASK, range(N), drop={Stage.CONSISTENCY: silent})
    session.start_round()
    inputs = make_inputs(range(N), shapes=SHAPE)
    result = session.secure_sum("s", inputs)
    signers = set(range(N)) - silent
    assert any("too few of client" in line and "re-keying" in line for line in session.server.log), session.server.log
    assert result.contributors == frozenset(signers)
    assert np.allclose(result.values["w"], plain_sum(inputs, signers)["w"], atol=1e-5)


def test_a_recovery_request_carries_the_signatures_of_the_missing_clients_groups_and_no_others():
    """Sparse graph: client 5 goes silent after its input, so its seed is recovered from its
    neighbours. A neighbour reveals its share of 5's seed only after t signatures from 5's group
    (5 and its neighbours) vouch for 5, so its request carries that group's signatures, whatever
    it was shown at UNMASK; a helper that holds no share of 5 gets none. A request then grows
    with the degree, not with the number of clients (the point of the sparse graph). The sum
    over all twelve is delivered."""
    requests = {}

    def hook(d, s, c, data):
        if (d, s) == ("down", Stage.RECOVER):
            requests[c] = codec.decode(data)
        return data

    session, result, inputs = _sparse_run(hook, drop={Stage.UNMASK: {5}})
    assert result.contributors == frozenset(range(12))
    assert np.allclose(result.values["w"], plain_sum(inputs, range(12))["w"], atol=1e-5)
    assert sorted(requests) == [c for c in range(12) if c != 5]
    graph = session.clients[0]._epoch.graph  # a client's own graph, from the epoch's view
    for helper, request in requests.items():
        assert request.missing == (5,)
        expected = graph.closed(5) if 5 in graph.of(helper) else frozenset()
        assert [s.client for s in request.signatures] == sorted(expected), helper


@pytest.mark.parametrize(("stage", "kind"), [(Stage.INPUT, "mask_key"), (Stage.UNMASK, "seed")])
def test_a_dealer_whose_shares_do_not_interpolate_is_named_and_the_run_goes_on(stage, kind, monkeypatch):
    """Client 4 deals shares of no 32-byte secret (every limb on the polynomial 2**24 + x, whose
    value at 0 is beyond any limb's range; committed to as dealt, so no holder can tell), then
    drops before its input (its mask key is rebuilt) or goes silent after it (its seed is
    rebuilt). The rebuild fails: the server names 4, not a holder, and abandons that sum; the
    run goes on, and its next sum is delivered over the clients still live."""
    from secure_fedgraph.crypto import shamir
    from secure_fedgraph.errors import SumAbandoned

    def packed(value: int) -> bytes:  # a share is LIMBS values of VALUE_BITS bits, packed big-endian
        return sum(value << (shamir.VALUE_BITS * i) for i in range(shamir.LIMBS)).to_bytes(shamir.SHARE_BYTES, "big")

    def no_secret(secrets, *, xs, threshold):
        return [{x: packed((2**24 + x) % shamir.PRIME) for x in xs} for _ in secrets]

    session = local_session(MASK, range(N), drop={stage: {4}})
    dealer = session.clients[4]
    honest = dealer._on_share_keys

    def deal_garbage(request):
        with monkeypatch.context() as m:
            m.setattr(shamir, "split_many", no_secret)
            return honest(request)

    dealer._on_share_keys = deal_garbage
    session.start_round()
    with pytest.raises(SumAbandoned, match=f"client 4's {'mask key' if kind == 'mask_key' else 'self-mask'} could not be rebuilt"):
        session.secure_sum("s0", make_inputs(range(N), shapes=SHAPE))
    assert session.server.excluded == {4: f"dealt {kind} shares that do not interpolate"}
    others = set(range(N)) - {4}
    inputs = make_inputs(others, seed=1, shapes=SHAPE)
    result = session.secure_sum("s1", inputs)
    assert result.contributors == frozenset(others)
    assert np.allclose(result.values["w"], plain_sum(inputs, others)["w"], atol=1e-5)
