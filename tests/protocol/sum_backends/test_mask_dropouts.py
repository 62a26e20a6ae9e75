"""Mask backend: the round completes when clients drop at ANY stage, down to the threshold.

Flower's SecAgg+ aborts when a client drops during its first two stages; these tests drop
1 and n - t clients at each stage (advertise, share keys, masked input, consistency,
unmask, recover, deliver) and check the sum over the survivors. With 7 clients the default
adversary has 2 colluders: t = (7 + 2) // 2 + 1 = 5, and a sum needs 4 contributors.
"""

from __future__ import annotations

import numpy as np
import pytest

from secure_fedgraph.errors import DropoutError, SecureFedGraphError, SumAbandoned
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, MaskConfig, SecureSumConfig, Stage
from tests.helpers import make_inputs, max_error, plain_sum, sparse_config

N = 7
T = MaskConfig().resolve(N, None).threshold  # 5
FLOOR = MaskConfig().resolve(N, None).min_survivors  # 4
EARLY = (Stage.ADVERTISE, Stage.SHARE_KEYS, Stage.INPUT)  # dropped before their input was summed
LATE = (Stage.CONSISTENCY, Stage.UNMASK)  # dropped after it: their input is in the sum


def _run(drop, *, n=N, config=None, sums=1):
    session = local_session(config or SecureSumConfig(backend=Backend.MASK), range(n), drop=drop)
    session.start_round()
    results = []
    for k in range(sums):
        inputs = make_inputs(range(n), seed=k)
        result = session.secure_sum(f"s{k}", inputs)
        assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound + 1e-12
        results.append(result)
    return session, results


def _dropped_sets(n=N, t=T):
    return {"one": {3}, "n-t": set(range(0, 2 * (n - t), 2))}


@pytest.mark.parametrize("stage", EARLY + LATE, ids=lambda s: s.value)
@pytest.mark.parametrize("which", ["one", "n-t"])
def test_dropout_at_each_stage(stage, which):
    dropped = _dropped_sets()[which]
    session, (first, second) = _run({stage: dropped}, sums=2)
    survivors = frozenset(range(N)) - dropped
    expected_first = survivors if stage in EARLY else frozenset(range(N))
    assert first.contributors == expected_first
    assert second.contributors == survivors  # a dropped client never comes back within the round
    for c in survivors:  # every survivor got the same aggregate
        np.testing.assert_array_equal(session.clients[c].last_result.values["weight"], second.values["weight"])


@pytest.mark.parametrize("which", ["one", "n-t"])
def test_dropout_during_recover(which):
    """Some clients go silent at unmask (recover needed), others during recover itself."""
    silent_at_unmask = {6}
    silent_at_recover = {0} if which == "one" else set(range(N - T - 1))
    session, (result,) = _run({Stage.UNMASK: silent_at_unmask, Stage.RECOVER: silent_at_recover})
    assert result.contributors == frozenset(range(N))
    assert any("recover" in line for line in session.server.log)


@pytest.mark.parametrize("which", ["one", "n-t"])
def test_dropout_during_deliver_affects_the_next_sum_only(which):
    dropped = _dropped_sets()[which]
    _, (first, second) = _run({Stage.DELIVER: dropped}, sums=2)
    assert first.contributors == frozenset(range(N))
    assert second.contributors == frozenset(range(N)) - dropped


def test_adjacent_dropouts_at_three_stages():
    """Ten clients (3 colluders: t = 7): one drops at each of three stages."""
    _, (result,) = _run({Stage.SHARE_KEYS: {1}, Stage.INPUT: {2}, Stage.UNMASK: {3}}, n=10)
    assert result.contributors == frozenset(range(10)) - {1, 2}


def _kept_epoch(drop, *, n=N, config=None, sums=2):
    """A sum all n contribute to, then ``sums`` more of the same key epoch with ``drop`` in force
    from the second sum on; each checked against the plaintext sum of its contributors."""
    session = local_session(config or SecureSumConfig(backend=Backend.MASK), range(n))
    session.start_round()
    session.secure_sum("a", make_inputs(range(n), seed=1))
    epoch, session.runner.drop = session.server._epoch, drop
    results = []
    for k in range(sums):
        inputs = make_inputs(range(n), seed=2 + k)
        result = session.secure_sum(f"s{k}", inputs)
        assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound + 1e-12
        results.append(result)
    return session, epoch, results


@pytest.mark.parametrize("which", ["one", "n-t"])
def test_a_contributor_dropping_later_in_the_key_epoch_costs_no_rekey(which):
    """Clients that contributed to sum "a" drop before the next sum's input: they keep their mask
    keys (their self-masks for "a" are known); each survivor reveals its pair seeds of this sum
    with them (step 4b), the server removes those masks, and the key epoch goes on."""
    dropped = _dropped_sets()[which]
    session, epoch, (first, second) = _kept_epoch({Stage.INPUT: dropped})
    server = session.server
    assert first.contributors == second.contributors == frozenset(range(N)) - dropped
    assert server._epoch == epoch and not any("re-keying" in line for line in server.log)
    assert {client: kinds for (_, _, client), kinds in server.revealed.items()} == dict.fromkeys(dropped, {"pair_seed"})


def test_a_contributor_dropping_later_on_the_sparse_graph_costs_no_rekey():
    """Sparse graph (degree 6, t = 4, max_dropped 1): only client 3's neighbours reveal pair seeds."""
    session, epoch, (result, _) = _kept_epoch({Stage.INPUT: {3}}, n=24, config=sparse_config(6))
    assert result.contributors == frozenset(range(24)) - {3}
    assert session.server._epoch == epoch and not any("re-keying" in line for line in session.server.log)
    assert {client: kinds for (_, _, client), kinds in session.server.revealed.items()} == {3: {"pair_seed"}}


def test_a_neighbour_silent_at_unmask_after_revealing_its_pair_seed_is_recovered_from_its_seed_shares():
    """Client 4 drops before the input, 5 goes silent after revealing its pair seed with 4: 5's
    input stays in the sum, its self-mask rebuilt from its seed shares, in the same key epoch."""
    session, epoch, (result, _) = _kept_epoch({Stage.INPUT: {4}, Stage.UNMASK: {5}})
    assert result.contributors == frozenset(range(N)) - {4}
    assert session.server._epoch == epoch
    assert {client: kinds for (_, _, client), kinds in session.server.revealed.items()} == {4: {"pair_seed"}, 5: {"seed"}}


@pytest.mark.parametrize("stage", [Stage.CONSISTENCY, Stage.PAIR_SEEDS], ids=lambda s: s.value)
def test_a_neighbour_silent_before_its_pair_seed_makes_a_rekey_and_the_sum_is_asked_again(stage):
    """Client 4 drops before the input; 5 goes silent at consistency (it cannot vouch, nor be
    asked) or at 4b (its seed never comes): its mask with 4 cannot be removed, but nothing of the
    sum has been revealed, so the server re-keys the others and asks for the sum again (the
    pair seeds come before any self-mask key for this reason: a seed missing, or false, never
    abandons a sum)."""
    session, epoch, (result, after) = _kept_epoch({Stage.INPUT: {4}, stage: {5}})
    assert result.contributors == after.contributors == frozenset(range(N)) - {4, 5}
    assert session.server._epoch == epoch + 1
    assert any("clients [5] did not reveal their pair seeds" in line and "re-keying" in line for line in session.server.log)


def test_too_few_neighbours_to_vouch_for_a_dropped_contributor_makes_a_rekey():
    """Three of seven contributors drop: each survivor would need t = 5 signatures from a dropped
    one's group before revealing its pair seed with it, and 4 survivors remain; re-key."""
    session, epoch, (result, _) = _kept_epoch({Stage.INPUT: {4, 5, 6}})
    assert result.contributors == frozenset(range(4))
    assert session.server._epoch == epoch + 1
    assert any("neighbours remain to vouch for its drop; re-keying" in line for line in session.server.log)


def test_rekeying_never_lowers_min_survivors():
    """After a re-key among 5 of 7 clients, a sum still needs 4 contributors (a majority of 7),
    not 3 (a majority of the 5 re-keyed participants): the floor counts on the run's start."""
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(N))
    session.start_round()
    session.secure_sum("a", make_inputs(range(N), seed=1))
    session.runner.drop = {Stage.INPUT: {4}, Stage.CONSISTENCY: {5}}  # 5 cannot vouch for 4's drop: a re-key among 5
    session.secure_sum("b", make_inputs(range(N), seed=2))
    assert any("re-keying" in line for line in session.server.log)
    assert session.server._plan.min_survivors == 4
    session.runner.drop = {Stage.INPUT: {0, 1, 4, 5}}  # two more drop: 3 would remain
    with pytest.raises(DropoutError, match="fewer than the 4 required"):
        session.secure_sum("c", make_inputs(range(N), seed=3))


def test_below_threshold_fails_clearly_and_releases_nothing():
    dropped = set(range(N - FLOOR + 1))  # one more than the floor allows
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(N), drop={Stage.INPUT: dropped})
    session.start_round()
    with pytest.raises(DropoutError, match=r"only 3 clients sent masked inputs, fewer than the 4 required.*no aggregate is released"):
        session.secure_sum("s", make_inputs(range(N)))
    assert all(client.last_result is None for client in session.clients.values())


@pytest.mark.parametrize("stage", [Stage.ADVERTISE, Stage.CONSISTENCY], ids=lambda s: s.value)
def test_below_threshold_at_other_stages(stage):
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(N), drop={stage: set(range(N - FLOOR + 1))})
    with pytest.raises(DropoutError, match="fewer than the 4 required"):
        session.start_round()
        session.secure_sum("s", make_inputs(range(N)))
    assert all(client.last_result is None for client in session.clients.values())


def test_too_many_silent_after_their_self_masks_were_asked_for_abandons_the_sum():
    """Three of seven go silent at unmask: their self-masks need t = 5 seed shares, and only 4
    holders remain. Survivors already revealed theirs, so the sum is abandoned, not redone."""
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(N), drop={Stage.UNMASK: {0, 1, 2}})
    session.start_round()
    with pytest.raises(SumAbandoned, match="self-mask could not be rebuilt"):
        session.secure_sum("s", make_inputs(range(N)))
    assert all(client.last_result is None for client in session.clients.values())


def test_server_never_obtains_both_recovery_secrets():
    """Over dropouts at every stage, each client's seed or its mask key may be rebuilt, never both."""
    for stage in (Stage.INPUT,) + LATE:  # the stages after which the server must recover secrets
        session, _ = _run({stage: {1, 5}}, sums=2)
        assert {client for (_, _, client) in session.server.revealed} == {1, 5}
        assert all(len(kinds) == 1 for kinds in session.server.revealed.values())


def test_sparse_graph_dropouts():
    config = sparse_config(6)
    for stage in (Stage.SHARE_KEYS, Stage.INPUT, Stage.UNMASK):
        session, (result,) = _run({stage: {2, 3, 17}}, n=24, config=config)
        assert len(result.contributors) >= 21


def test_sparse_neighbourhood_too_small_to_recover_abandons_the_sum_naming_the_client():
    """Sparse graph: a client drops before its input, and most of its neighbours go silent at
    unmask, after the others revealed their self-masks: too few shares of its mask key remain."""
    session = local_session(sparse_config(4), range(20))
    session.start_round()
    neighbours = sorted(session.server._graph.of(0))  # the graph is known only once the nonces are revealed
    session.runner.drop = {Stage.INPUT: {0}, Stage.UNMASK: set(neighbours[:2])}
    with pytest.raises(SumAbandoned, match="client 0's mask key could not be rebuilt"):
        session.secure_sum("s", make_inputs(range(20)))


def test_a_client_left_with_too_few_live_neighbours_gets_new_keys_before_the_next_sum(monkeypatch):
    """Sparse graph: two of client 0's neighbours leave after the first sum (max_dropped is 1).
    Client 0 would refuse to mask its next input with so few of them (mask_client._masked_by_enough),
    so the server re-keys the live clients first and the sum holds client 0's input."""
    from secure_fedgraph.protocol.sum_backends.mask_server import MaskServer

    def second_sum(thin_check: bool):
        session = local_session(sparse_config(6), range(24))
        session.start_round()
        if not thin_check:
            monkeypatch.setattr(MaskServer, "_thinly_masked", lambda self, live: None)
        gone = set(sorted(session.server._graph.of(0))[:2])
        session.runner.drop = {Stage.DELIVER: gone}
        session.secure_sum("s0", make_inputs(range(24)))
        inputs = make_inputs(range(24), seed=1)
        epoch = session.server._epoch
        try:
            result = session.secure_sum("s1", inputs)
        except SecureFedGraphError:  # without the server's check: client 0 refuses, and the in-process run stops there
            return session, None, epoch
        assert max_error(result.values, plain_sum(inputs, result.contributors)) <= result.error_bound + 1e-12
        return session, result, epoch

    session, result, epoch = second_sum(thin_check=True)
    assert session.server._epoch == epoch + 1 and any("re-keying before sum 's1'" in line for line in session.server.log)
    assert 0 in result.contributors and result.contributors == frozenset(range(24)) - set(session.runner.drop[Stage.DELIVER])
    _, unchecked, _ = second_sum(thin_check=False)
    assert unchecked is None or 0 not in unchecked.contributors  # client 0 refused the live set: its input is lost to the sum
