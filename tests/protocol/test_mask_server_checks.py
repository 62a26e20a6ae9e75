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
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.secure_sum import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.secure_sum.messages import Share
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
    assert "do not rebuild its advertised key" in session.server.excluded.get(4, ""), session.server.excluded


@pytest.mark.parametrize(("stage", "kind", "drop"), [(Stage.UNMASK, "mask_key", {Stage.INPUT: {5}}), (Stage.RECOVER, "seed", {Stage.UNMASK: {5}})])
def test_a_holder_revealing_a_share_its_dealer_did_not_commit_to_is_named_with_its_lie(stage, kind, drop):
    """The run's record says who lied and how (metrics.json `excluded`); the sum goes on."""
    field = "mask_key_shares" if stage is Stage.UNMASK else "self_seed_shares"

    def change(response):
        return dataclasses.replace(response, **{field: tuple(Share(s.owner, bytes(len(s.value))) for s in getattr(response, field))})

    session, (result,), _ = _run(stage, change, drop=drop)
    assert session.server.excluded == {LIAR: f"revealed a {kind} share of client 5 that fails 5's commitment"}
    assert result.contributors == frozenset(range(N)) - ({5} if stage is Stage.UNMASK else set())  # its own input was masked honestly
