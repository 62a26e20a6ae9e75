"""The ckks server's checks during a sum, one condition at a time (issue 29; `make mutate`): each
test has clients drop at one step, or one client break one rule in one answer, with every
client on its default policy, and asserts what the server does: it stops a sum too few clients
carry, saying at which step; it finds a contribution under another key by having each
contribution checked by 2C + 1 other contributors (VERIFY, threat_model.md C-LIAR), where C + 1
agreeing verdicts decide: the sender of a contribution found invalid is excluded, and so is a
checker that answered against a decided verdict; a split or missing verdict, or too few
checkers, convicts nobody; a complaint about a sum whose every contribution was found valid
excludes the complainer and the sum stands. Where a liar is caught, it is named and excluded,
and the honest clients' next sum is delivered and equal to the plaintext sum. The attacks, end
to end with each defence switched off, are in test_attacks.py; the key set-up's checks are in
test_ckks_checks.py."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from secure_fedgraph.crypto.ckks import SecretContext
from secure_fedgraph.errors import DropoutError, SumAbandoned
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends import ckks
from secure_fedgraph.protocol.sum_backends.messages import DeliverResponse, VerifyResponse
from tests.helpers import default_policy_session as local_session
from tests.helpers import make_inputs, max_error, plain_sum

CKKS = SecureSumConfig(backend=Backend.CKKS)
CKKS_ONLY = ClientPolicy(backends=frozenset({Backend.CKKS}))  # the clients' default policy, but for the backend
SHAPE = {"w": (16,)}
LIAR = 2  # with 5 clients (C = 1): its contribution goes to 3, 4 and 0 (VERIFY steps 1, 2, 3)
FAILED = "the aggregate is not the sum of its contributors' ciphertexts (check lanes)"  # what an honest client answers


@functools.cache
def _under_another_key() -> tuple[bytes, ...]:
    """Ciphertexts of one chunk of SHAPE under a key no client of the run holds (with check lanes
    of that key's own): they load and add like anyone's, and spoil the aggregate."""
    blobs, _ = SecretContext.generate(CKKS.ckks.params).encrypt(np.zeros(16), params=CKKS.ckks.params, clip_range=CKKS.ckks.clip_range)
    return tuple(blobs)


def _session(n: int, change=None, *, drop=None):
    """n ckks clients, round 0 set up; every message is recorded, decoded, as (direction, stage,
    client, message) in the returned log; ``change(direction, stage, client, message)`` may return
    another message to deliver instead, or None to drop it."""
    log: list = []

    def hook(direction, stage, client, data):
        message = codec.decode(data)
        changed = message if change is None else change(direction, stage, client, message)
        log.append((direction, stage, client, changed))
        return None if changed is None else data if changed is message else codec.encode(changed)

    session = local_session(CKKS, range(n), intercept=hook, drop=drop, policy=CKKS_ONLY)
    session.start_round()
    return session, log


def _garbage_from(sender: int, also=None):
    """``sender`` encrypts under a key of its own; ``also`` may change any other message."""

    def change(direction, stage, client, message):
        if (direction, stage, client) == ("up", Stage.INPUT, sender):
            return dataclasses.replace(message, ciphertexts=_under_another_key())
        return message if also is None else also(direction, stage, client, message)

    return change


def _verify_steps(log) -> list[dict[int, int]]:
    """The VERIFY requests, one {checker: owner} per step, in order."""
    steps: dict[int, dict[int, int]] = {}
    for direction, stage, client, message in log:
        if (direction, stage) == ("down", Stage.VERIFY):
            steps.setdefault(message.header.step, {})[client] = message.owner
    return [steps[s] for s in sorted(steps)]


def _asked(log, stage: Stage) -> set[int]:
    return {c for d, s, c, _ in log if (d, s) == ("down", stage)}


def _next_sum_is_right(session, clients) -> None:
    """A fresh sum over ``clients`` (every live client) is delivered to each and equals the plaintext sum."""
    inputs = make_inputs(sorted(clients), seed=7, shapes=SHAPE)
    result = session.secure_sum("next", inputs)
    assert result.contributors == frozenset(clients)
    for c in clients:
        mine = session.clients[c].last_result
        assert mine.spec.name == "next" and mine.contributors == frozenset(clients)
        assert max_error(mine.values, plain_sum(inputs, clients)) <= mine.error_bound


# --- too few clients: the sum stops, saying at which step ---------------------------------------

def test_a_new_sum_with_too_few_live_clients_is_refused_and_a_client_silent_at_delivery_is_not_live():
    """Clients 2-4 vanish when the first sum is delivered: that sum went out (the server needs no
    answer to it), but they are no longer live, so the next sum is refused before anyone is
    asked, with the reason an operator needs: too few clients remain live. Counted as live, the
    dead clients would carry the next sum past the floor check and it would fail at INPUT."""
    session, log = _session(5, drop={Stage.DELIVER: {2, 3, 4}})
    inputs = make_inputs(range(5), shapes=SHAPE)
    result = session.secure_sum("a", inputs)
    assert result.contributors == frozenset(range(5))
    assert max_error(session.clients[0].last_result.values, plain_sum(inputs, range(5))) <= result.error_bound
    assert session.server.live == {0, 1}
    asked = len(log)
    with pytest.raises(DropoutError, match=r"^round 0: only 2 clients remain live for a new sum, fewer than the 3 required "):
        session.secure_sum("b", make_inputs(range(5), shapes=SHAPE))
    assert session.server.log[-1] == "round 0: abort: remain live for a new sum: 2 < 3"
    assert len(log) == asked  # no one asked


@pytest.mark.parametrize(
    ("stage", "what", "not_reached"),
    [(Stage.INPUT, "sent encrypted inputs", Stage.CONSISTENCY), (Stage.CONSISTENCY, "signed the contributor set", Stage.DELIVER)],
    ids=["inputs", "signatures"],
)
def test_too_few_inputs_or_signatures_stop_the_sum_and_only_those_who_answered_stay_live(stage, what, not_reached):
    """Clients 2-4 vanish when asked for their input, or to sign the contributor set: two
    ciphertexts are not a sum the floor allows, and an aggregate vouched for by two clients would
    be accepted by none (it needs a majority's signatures). The server stops before the next
    step, says at which step, and keeps only the two that answered live."""
    session, log = _session(5, drop={stage: {2, 3, 4}})
    with pytest.raises(DropoutError, match=rf"^round 0: only 2 clients {what}, fewer than the 3 required "):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert session.server.log[-1] == f"round 0: abort: {what}: 2 < 3"
    assert session.server.live == {0, 1}
    assert not _asked(log, not_reached)


def test_a_dropout_abandons_a_streaming_sum_and_the_next_one_goes_on_without_the_client():
    """threat_model.md M-STREAM: a streaming sum is all-or-nothing on every backend, so that a
    plan's numbers do not depend on the backend: client 4 vanishes at INPUT, the sum is abandoned
    before anyone signs, 4 is no longer live, and the next streaming sum over the others is right."""
    session, log = _session(5, drop={Stage.INPUT: {4}})
    with pytest.raises(SumAbandoned, match=r"^streaming sum 'a': clients \[4\] dropped; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE), streaming=True)
    assert session.server.live == {0, 1, 2, 3}
    assert not _asked(log, Stage.CONSISTENCY)
    inputs = make_inputs(range(4), seed=3, shapes=SHAPE)
    session.secure_sum("b", inputs, streaming=True)
    result = session.clients[0].last_result
    assert result.contributors == frozenset(range(4))
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound


def test_the_servers_error_bound_is_the_clients_when_a_large_clip_range_lowers_the_scale():
    """A sum with clip_range 1e6 is encoded at a lower scale (so it cannot wrap), which widens the
    error: the bound the server reports (what a plan and the metrics see) must be the one the
    clients decrypted under, not the bound of the default scale."""
    session, _ = _session(4)
    inputs = make_inputs(range(4), shapes=SHAPE)
    result = session.secure_sum("big", inputs, clip_range=1e6)
    params = CKKS.ckks.params
    assert params.scale_for(n_clients=4, clip_range=1e6) < params.scale_bits
    assert result.error_bound > params.error_bound(4, clip_range=1e6)
    for client in session.clients.values():
        assert client.last_result.error_bound == result.error_bound
        assert max_error(client.last_result.values, plain_sum(inputs, range(4))) <= result.error_bound


# --- VERIFY: who checks what, and what convicts --------------------------------------------------

def test_each_contribution_goes_to_the_next_2c_plus_one_contributors_one_step_each():
    """Six clients, C = 2: after client 2's contribution under another key spoils the sum, VERIFY
    takes 2C + 1 = 5 steps; in step t the contribution of the i-th contributor goes to the
    (i + t)-th, so each is checked by 5 others, never by its owner, and each client checks one
    contribution per step. C + 1 = 3 agreeing verdicts decide (they hold an honest one), and with
    at most C liars among 5 checkers the honest ones always decide. All 5 find 2's invalid: 2
    is named and excluded, the sum is abandoned, and the next sum over the others is right."""
    session, log = _session(6, _garbage_from(LIAR))
    with pytest.raises(SumAbandoned, match=r"^sum 'a': the aggregate failed its check at 6 clients; senders \[2\] excluded; abandoned$"):
        session.secure_sum("a", make_inputs(range(6), shapes=SHAPE))
    assert _verify_steps(log) == [{(i + t) % 6: i for i in range(6)} for t in range(1, 6)]
    assert session.server.excluded == {LIAR: "sent ciphertexts for sum 'a' that fail their check lanes"}
    assert "round 0: sum 'a' failed its check at clients [0, 1, 2, 3, 4, 5]" in session.server.log
    assert session.server.live == {0, 1, 3, 4, 5}
    _next_sum_is_right(session, {0, 1, 3, 4, 5})


def test_exactly_2c_plus_two_live_checkers_judge_and_a_client_silent_at_delivery_checks_nothing():
    """Five clients, C = 1; client 4 vanishes at DELIVER, so 4 contributors remain to check,
    2C + 2, the fewest that give each contribution 2C + 1 checkers: they judge, 2 is caught, and
    the dead client is sent nothing to check."""
    session, log = _session(5, _garbage_from(LIAR), drop={Stage.DELIVER: {4}})
    with pytest.raises(SumAbandoned, match=r"senders \[2\] excluded; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert _verify_steps(log) == [{(i + t) % 4: i for i in range(4)} for t in (1, 2, 3)]
    assert session.server.excluded == {LIAR: "sent ciphertexts for sum 'a' that fail their check lanes"}
    assert session.server.live == {0, 1, 3}


def test_fewer_than_2c_plus_two_checkers_judge_nobody_and_say_so():
    """Six clients, C = 2; client 5 vanishes at DELIVER: the 5 contributors left cannot give a
    contribution 2C + 1 checkers, so the honest ones could be outvoted. Nobody is asked to
    check, nobody is excluded, the sum is abandoned, and the log says why."""
    session, log = _session(6, _garbage_from(LIAR), drop={Stage.DELIVER: {5}})
    with pytest.raises(SumAbandoned, match=r"^sum 'a': the aggregate failed its check at 5 clients; no sender identified; abandoned$"):
        session.secure_sum("a", make_inputs(range(6), shapes=SHAPE))
    assert "round 0: only 5 contributors can check each other, need 6: no sender judged" in session.server.log
    assert not _asked(log, Stage.VERIFY)
    assert session.server.excluded == {} and session.server.live == {0, 1, 2, 3, 4}


def test_the_server_checks_only_the_contributions_its_budget_kept(monkeypatch):
    """The server keeps ciphertexts to find a bad sender only up to VERIFY_BUDGET_BYTES per sum
    (a contribution is kept while its size times the number kept with it fits). With a budget of
    four times client 2's upload, it keeps 0, 1, 2 and 3 (the last fitting exactly): VERIFY checks
    those four, each by the other three (2C + 1 with 5 clients), and 2 is caught."""
    monkeypatch.setattr(ckks, "VERIFY_BUDGET_BYTES", 4 * sum(map(len, _under_another_key())))
    session, log = _session(5, _garbage_from(LIAR))
    with pytest.raises(SumAbandoned, match=r"^sum 'a': the aggregate failed its check at 5 clients; senders \[2\] excluded; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert _verify_steps(log) == [{(i + t) % 4: i for i in range(4)} for t in (1, 2, 3)]
    assert session.server.excluded == {LIAR: "sent ciphertexts for sum 'a' that fail their check lanes"}
    _next_sum_is_right(session, {0, 1, 3, 4})


def _covering_for(sender: int, *, also_lost: set[int] = frozenset()):
    """Client 3, asked to check ``sender``'s contribution, answers "valid" (a colluder covering
    for it); the verdicts on it of the clients in ``also_lost`` never arrive."""

    def change(direction, stage, client, message):
        if (direction, stage) == ("up", Stage.VERIFY) and message.owner == sender:
            if client == 3:
                return VerifyResponse(message.header, sender, True)
            if client in also_lost:
                return None
        return message

    return change


def test_a_checker_covering_for_a_bad_sender_is_outvoted_and_excluded():
    """Client 3 answers "valid" about client 2's contribution under another key; its other two
    checkers (4 and 0) find it invalid. C + 1 = 2 agreeing verdicts decide: 2 is excluded for
    its ciphertexts and 3 for answering against them (honest checkers always agree), and the
    next sum goes on without both."""
    session, log = _session(5, _garbage_from(LIAR, _covering_for(LIAR)))
    with pytest.raises(SumAbandoned, match=r"senders \[2\] excluded; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert [step.get(3) for step in _verify_steps(log)][0] == LIAR
    assert session.server.excluded == {LIAR: "sent ciphertexts for sum 'a' that fail their check lanes",
                                       3: "answered that client 2's ciphertexts are valid, against 2 other checkers"}
    _next_sum_is_right(session, {0, 1, 4})


def test_a_split_verdict_convicts_nobody():
    """Client 3 answers "valid" about client 2's contribution under another key and client 4's
    verdict on it never arrives: one "valid", one "invalid" (client 0's). Either may be a
    colluder's, and C + 1 = 2 agreeing verdicts are needed: nobody is excluded and the sum is
    abandoned (the aggregate is not known to be right, so the complaints stand)."""
    session, log = _session(5, _garbage_from(LIAR, _covering_for(LIAR, also_lost={4})))
    with pytest.raises(SumAbandoned, match=r"^sum 'a': the aggregate failed its check at 5 clients; no sender identified; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert session.server.excluded == {} and session.server.live == set(range(5))


def test_a_split_verdict_on_one_sender_does_not_stop_the_others_being_judged():
    """Clients 2 and 4 both encrypt under a key of their own. 2's verdict is split (client 3
    covers for it and 4's verdict on it is lost), so 2 is not convicted; 4's contribution is still
    judged: its three checkers (0, 1, 2) find it invalid, and 4 alone is excluded."""

    def also_4(direction, stage, client, message):
        if (direction, stage, client) == ("up", Stage.INPUT, 4):
            return dataclasses.replace(message, ciphertexts=_under_another_key())
        return _covering_for(LIAR, also_lost={4})(direction, stage, client, message)

    session, log = _session(5, _garbage_from(LIAR, also_4))
    with pytest.raises(SumAbandoned, match=r"senders \[4\] excluded; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert session.server.excluded == {4: "sent ciphertexts for sum 'a' that fail their check lanes"}


def test_a_false_complaint_backed_by_false_verdicts_costs_the_liar_and_the_sum_stands():
    """Client 3 says the honest aggregate failed its check and answers "invalid" about every
    contribution it checks (2's, 1's, 0's): each is found valid by its other two checkers, so 3 is
    outvoted, excluded for answering against them, its complaint refuted, and the sum stands
    (C-LIAR: a lie costs the liar only)."""

    def lie(direction, stage, client, message):
        if (direction, client) == ("up", 3) and stage is Stage.DELIVER:
            return DeliverResponse(message.header, False, FAILED)
        if (direction, stage, client) == ("up", Stage.VERIFY, 3):
            return VerifyResponse(message.header, message.owner, False)
        return message

    session, log = _session(5, lie)
    inputs = make_inputs(range(5), shapes=SHAPE)
    result = session.secure_sum("a", inputs)
    assert result.contributors == frozenset(range(5))
    assert [step[3] for step in _verify_steps(log)] == [2, 1, 0]
    assert set(session.server.excluded) == {3} and "are invalid, against 2 other checkers" in session.server.excluded[3]
    assert any("excluded client 3: complained about sum 'a'" in line for line in session.server.log)
    _next_sum_is_right(session, {0, 1, 2, 4})


def test_missing_verdicts_convict_nobody():
    """Two of the three verdicts on client 2's contribution under another key never arrive (from
    3 and 4): the one left (client 0's "invalid") may be a colluder's alone, so nobody is
    excluded and the sum is abandoned."""

    def lose(direction, stage, client, message):
        if (direction, stage) == ("up", Stage.VERIFY) and client in (3, 4) and message.owner == LIAR:
            return None
        return message

    session, log = _session(5, _garbage_from(LIAR, lose))
    with pytest.raises(SumAbandoned, match=r"no sender identified; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert [step[0] for step in _verify_steps(log)] == [4, 3, LIAR]
    assert session.server.excluded == {} and session.server.live == set(range(5))


def test_a_checker_answering_for_another_owner_is_refused():
    """Client 3, asked to check client 2's contribution, answers "invalid" about client 0's
    instead, one it was not sent: the server refuses the answer, naming 3, the owner it claimed
    and the one it was asked about, and counts no verdict from it (a verdict counts only on the
    contribution its checker was given). 2's contribution is still found valid by its other two
    checkers, so 3's complaint is refuted: 3 is excluded and the sum stands."""

    def lie(direction, stage, client, message):
        if (direction, client) == ("up", 3) and stage is Stage.DELIVER:
            return DeliverResponse(message.header, False, FAILED)
        if (direction, stage, client) == ("up", Stage.VERIFY, 3) and message.owner == LIAR:
            return VerifyResponse(message.header, 0, False)
        return message

    session, _ = _session(5, lie)
    result = session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert result.contributors == frozenset(range(5))
    assert "round 0 verify: 4 answered, rejected 3: verify: client 3 answered for client 0, not 2" in session.server.log
    assert session.server.excluded == {3: "complained about sum 'a', whose every contribution its checkers found valid"}


# --- a refuted complaint: the complainer goes, the sum stands ------------------------------------

def test_a_refuted_complaint_excludes_the_complainer_the_sum_stands_and_the_next_one_goes_on_without_it():
    """Client 3 says the honest aggregate failed its check. Every contribution is found valid by
    its 2C + 1 checkers, so the aggregate, their sum, is right: the server names and excludes 3
    for the lie, the sum stands (the other clients keep it), and 3 is asked for nothing more."""

    def lie(direction, stage, client, message):
        if (direction, stage, client) == ("up", Stage.DELIVER, 3):
            return DeliverResponse(message.header, False, FAILED)
        return message

    session, log = _session(5, lie)
    inputs = make_inputs(range(5), shapes=SHAPE)
    result = session.secure_sum("a", inputs)
    assert result.contributors == frozenset(range(5))
    assert len(_verify_steps(log)) == 3
    assert session.server.excluded == {3: "complained about sum 'a', whose every contribution its checkers found valid"}
    assert "round 0: sum 'a' failed its check at clients [3]" in session.server.log
    for c in (0, 1, 2, 4):
        assert max_error(session.clients[c].last_result.values, plain_sum(inputs, range(5))) <= result.error_bound
    assert session.server.live == {0, 1, 2, 4}
    _next_sum_is_right(session, {0, 1, 2, 4})


def test_a_complaint_is_not_refuted_while_a_contribution_goes_unchecked():
    """Client 3 complains about an honest aggregate, but client 4 vanished at DELIVER, so its
    contribution, part of the aggregate, is checked by nobody: the others' are all valid, yet
    the aggregate is not shown right (4's part could be the bad one). The complaint may be true:
    3 is not excluded, and the sum is abandoned."""

    def lie(direction, stage, client, message):
        if (direction, stage, client) == ("up", Stage.DELIVER, 3):
            return DeliverResponse(message.header, False, FAILED)
        return message

    session, log = _session(5, lie, drop={Stage.DELIVER: {4}})
    with pytest.raises(SumAbandoned, match=r"^sum 'a': the aggregate failed its check at 1 clients; no sender identified; abandoned$"):
        session.secure_sum("a", make_inputs(range(5), shapes=SHAPE))
    assert 4 not in {owner for step in _verify_steps(log) for owner in step.values()}
    assert session.server.excluded == {} and session.server.live == {0, 1, 2, 3}
