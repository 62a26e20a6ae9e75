"""A client's own policy: what it refuses, whatever the server announces (threat_model.md M-POLICY)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from secure_fedgraph.errors import ConfigError, ProtocolError
from secure_fedgraph.protocol.sum_backends import Adversary, Backend, ClientPolicy, GraphKind, MaskConfig, SecureSumConfig, Threat
from secure_fedgraph.protocol.sum_backends.config import MaskPlan


def _announced(n, n_run=None, **mask):
    return MaskConfig(**mask).resolve(n, None, n_run=n_run or n)


def test_the_default_server_plan_passes_the_default_policy():
    for n in (3, 7, 100, 207):
        ClientPolicy().check_mask_round(_announced(n), n=n, n_run=n, rekeys=0, key_epoch=1)


def test_a_run_of_two_is_refused_by_the_server_and_by_the_clients():
    """B2: a third of two clients counts one colluder, so a sum would need three; the default
    server refuses the run, and a client refuses it at the Welcome and at every key set-up, by
    its run floor (--min-run-clients) and by its colluder floor, each naming its option."""
    with pytest.raises(ConfigError, match=r"a run of 2 clients cannot put two honest inputs .* run at least 3 clients.*--corrupt-fraction 0"):
        _announced(2)
    weak = _announced(2, adversary=Adversary(corrupt_fraction=0.0))  # a server that assumes no colluders
    assert (weak.threshold, weak.min_survivors) == (2, 2)
    with pytest.raises(ProtocolError, match=r"the run has 2 clients, fewer than 3 .*\(--min-run-clients\)"):
        ClientPolicy().check_mask_round(weak, n=2, n_run=2, rekeys=0, key_epoch=1)
    with pytest.raises(ProtocolError, match=r"the run has 2 clients, fewer than 3 .*\(--min-run-clients\)"):
        ClientPolicy().check_run(SecureSumConfig(), n_run=2)
    with pytest.raises(ProtocolError, match=r"a run of 2 clients with 1 colluding .* needs 3 clients .*--corrupt-fraction"):
        ClientPolicy(min_run_clients=2).check_mask_round(weak, n=2, n_run=2, rekeys=0, key_epoch=1)
    with pytest.raises(ProtocolError, match=r"a run of 2 clients with 1 colluding"):
        ClientPolicy(min_run_clients=2).check_run(SecureSumConfig(), n_run=2)
    with pytest.raises(ProtocolError, match=r"the run has 3 clients, fewer than 4"):
        ClientPolicy(min_run_clients=4).check_run(SecureSumConfig(), n_run=3)
    ClientPolicy().check_run(SecureSumConfig(), n_run=3)
    ClientPolicy(min_run_clients=2, adversary=Adversary(corrupt_fraction=0.0)).check_mask_round(weak, n=2, n_run=2, rekeys=0, key_epoch=1)
    ClientPolicy(min_run_clients=2, backends=frozenset({Backend.PLAIN})).check_run(SecureSumConfig(backend=Backend.PLAIN), n_run=2)


@pytest.mark.parametrize(
    "change,match",
    [
        ({"min_survivors": 2}, r"min_survivors=2, below 6 of the run's 10 clients.*--min-survivors-fraction"),
        ({"threshold": 6}, r"threshold 6 for 10 participants, below the 7 .*--corrupt-fraction"),
        ({"degree": 8}, r"complete graph of degree 8 over 10"),
        ({"graph": GraphKind.SPARSE, "degree": 4, "threshold": 3, "max_dropped": 1}, r"sparse graph that does not hold"),
    ],
)
def test_weaker_announcements_are_refused_naming_the_option(change, match):
    plan = dataclasses.replace(_announced(10), **change)
    with pytest.raises(ProtocolError, match=match):
        ClientPolicy().check_mask_round(plan, n=10, n_run=10, rekeys=0, key_epoch=1)


def test_the_floor_counts_on_the_runs_start_not_the_round():
    plan = _announced(4, n_run=10)  # a later round among 4 of 10: the floor stays 6
    assert plan.min_survivors == 6
    with pytest.raises(ProtocolError, match="below 6 of the run's 10"):
        ClientPolicy().check_mask_round(dataclasses.replace(plan, min_survivors=3), n=4, n_run=10, rekeys=0, key_epoch=1)


def test_re_keys_are_bounded_and_streaming_and_sparse_graphs_are_opt_outs():
    plan = _announced(10)
    with pytest.raises(ProtocolError, match=r"re-key 5 of this round, more than 4;.*--max-rekeys"):
        ClientPolicy().check_mask_round(plan, n=10, n_run=10, rekeys=5, key_epoch=1)
    with pytest.raises(ProtocolError, match="streaming variant.*--no-streaming"):
        ClientPolicy(allow_streaming=False).check_mask_round(plan, n=10, n_run=10, rekeys=0, key_epoch=1)
    sparse = _announced(207)
    assert sparse.graph is GraphKind.SPARSE
    with pytest.raises(ProtocolError, match="--no-sparse"):
        ClientPolicy(allow_sparse=False).check_mask_round(sparse, n=207, n_run=207, rekeys=0, key_epoch=1)
    streaming_sparse = MaskPlan(GraphKind.SPARSE, sparse.degree, sparse.threshold, sparse.min_survivors, sparse.max_dropped, True)
    with pytest.raises(ProtocolError, match="streaming variant with the sparse graph"):
        ClientPolicy().check_mask_round(streaming_sparse, n=207, n_run=207, rekeys=0, key_epoch=1)


def test_key_epochs_are_capped_per_run_and_the_graph_must_hold_over_all_of_them():
    plan = _announced(10)
    ClientPolicy().check_mask_round(plan, n=10, n_run=10, rekeys=0, key_epoch=1024)
    with pytest.raises(ProtocolError, match=r"server started key epoch 1025 of this run, more than 1024 .*\(--max-key-epochs\)"):
        ClientPolicy().check_mask_round(plan, n=10, n_run=10, rekeys=0, key_epoch=1025)
    per_epoch = _announced(1000, max_key_epochs=1)  # a server that bounds each key epoch alone: a cheaper graph
    assert per_epoch.degree < _announced(1000).degree
    with pytest.raises(ProtocolError, match=r"above 2\^-50 per key epoch \(2\^-40 over a run of 1024\).*--security-bits"):
        ClientPolicy().check_mask_round(per_epoch, n=1000, n_run=1000, rekeys=0, key_epoch=1)
    ClientPolicy(max_key_epochs=1).check_mask_round(per_epoch, n=1000, n_run=1000, rekeys=0, key_epoch=1)  # a client allowing one


def test_an_honest_but_curious_policy_is_an_explicit_opt_in_that_accepts_lower_thresholds():
    cheap = dataclasses.replace(_announced(10), threshold=6)
    with pytest.raises(ProtocolError):
        ClientPolicy().check_mask_round(cheap, n=10, n_run=10, rekeys=0, key_epoch=1)
    ClientPolicy(adversary=Adversary(threat=Threat.HONEST_BUT_CURIOUS)).check_mask_round(cheap, n=10, n_run=10, rekeys=0, key_epoch=1)


def test_accepting_a_config_is_for_one_user_playing_every_party():
    config = SecureSumConfig(backend=Backend.CKKS, mask=MaskConfig(streaming=False))
    policy = ClientPolicy.accepting(config)
    assert policy.backends == {Backend.CKKS} and not policy.allow_streaming and policy.min_dp_sigma == 0
    policy.check_run(config, n_run=4, uploads_activations=True, dp_sigma=0.0)
    assert policy.min_run_clients == 2  # a server's run of two, where its own adversary lets it hold one
    assert ClientPolicy.accepting(SecureSumConfig(mask=MaskConfig(max_key_epochs=5000))).max_key_epochs == 5000


@pytest.mark.parametrize("kwargs,match", [({"min_survivors_fraction": 1.0}, "min_survivors_fraction"), ({"backends": frozenset()}, "backends"),
                                          ({"min_dp_sigma": -1.0}, "min_dp_sigma"), ({"max_rekeys_per_round": -1}, "max_rekeys_per_round"),
                                          ({"min_run_clients": 1}, "min_run_clients"), ({"min_run_clients": 3.0}, "min_run_clients"),
                                          ({"max_key_epochs": 0}, "max_key_epochs"), ({"min_survivors_fraction": False}, "min_survivors_fraction"),
                                          ({"min_ddp_noise": float("inf")}, "min_ddp_noise"), ({"min_dpsgd_sigma": False}, "min_dpsgd_sigma"),
                                          ({"max_rekeys_per_round": False}, "max_rekeys_per_round"), ({"max_key_epochs": True}, "max_key_epochs")])
def test_policy_validation_names_the_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ClientPolicy(**kwargs)


@pytest.mark.parametrize(("dpsgd_sigma", "refused"), [(None, "has no DP-SGD in its local training"), (0.5, "trains with dpsgd_sigma=0.5"),
                                                      (1.0, None), (2.0, None)])
def test_a_dpsgd_floor_refuses_a_plan_below_it_and_only_that(dpsgd_sigma, refused):
    """--min-dpsgd-sigma 1: no DP-SGD or less noise is refused, naming what the plan offers; the
    floor itself and more pass; a client without a floor takes any plan."""
    config, floor = SecureSumConfig(backend=Backend.MASK), ClientPolicy(min_dp_sigma=0.0, min_dpsgd_sigma=1.0)
    if refused is None:
        floor.check_run(config, n_run=10, dpsgd_sigma=dpsgd_sigma)
    else:
        with pytest.raises(ProtocolError, match=rf"the plan {refused}, and this client requires a DP-SGD noise multiplier of at least 1 "):
            floor.check_run(config, n_run=10, dpsgd_sigma=dpsgd_sigma)
    ClientPolicy(min_dp_sigma=0.0).check_run(config, n_run=10, dpsgd_sigma=dpsgd_sigma)


def test_seeded_user_randomness_is_refused_unless_the_client_opts_in():
    config = SecureSumConfig(backend=Backend.MASK)
    with pytest.raises(ProtocolError, match="draws each user's initial weights and dropout masks from the run seed"):
        ClientPolicy(min_dp_sigma=0.0).check_run(config, n_run=10, seeded_randomness=True)
    ClientPolicy(min_dp_sigma=0.0).check_run(config, n_run=10, seeded_randomness=False)
    ClientPolicy(min_dp_sigma=0.0, allow_seeded_randomness=True).check_run(config, n_run=10, seeded_randomness=True)


def test_a_server_floor_exactly_at_the_clients_passes():
    policy = ClientPolicy()
    policy.check_run(SecureSumConfig(backend=Backend.MASK, min_survivors=policy.floor(10)), n_run=10)
    with pytest.raises(ProtocolError, match="min_survivors"):
        policy.check_run(SecureSumConfig(backend=Backend.MASK, min_survivors=policy.floor(10) - 1), n_run=10)


def test_a_client_that_accepts_a_config_takes_its_rekeys_and_key_epochs_and_refuses_nothing_else():
    """ClientPolicy.accepting (one user playing every party): exactly the server's bounds."""
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(max_rekeys_per_round=2, max_key_epochs=7))
    policy = ClientPolicy.accepting(config)
    assert (policy.max_rekeys_per_round, policy.max_key_epochs, policy.allow_seeded_randomness, policy.min_run_clients) == (2, 7, True, 2)


def test_the_lowest_values_each_option_allows_are_allowed():
    ClientPolicy(min_survivors_fraction=0.0, max_rekeys_per_round=0, max_key_epochs=1, min_run_clients=2, min_dp_sigma=0.0)


def test_a_plan_without_distributed_dp_is_refused_by_any_ddp_floor():
    """--min-ddp-noise 0.5 and a plan with no noise on its model sums: refused (nothing is
    counted as noise that is not there)."""
    with pytest.raises(ProtocolError, match="has no distributed DP on its model sums"):
        ClientPolicy(min_ddp_noise=0.5).check_run(SecureSumConfig(backend=Backend.MASK), n_run=10, ddp_noise=None)


def test_no_noise_credit_for_expecting_fewer_contributors_than_were_asked():
    """A sum's noise is spread over the contributors the server says it expects; announcing fewer
    than it asks gives no extra credit (the share is capped at one), so a multiplier below the
    floor stays below it."""
    from secure_fedgraph.protocol.core.spec import SumNoise, SumSpec

    policy = ClientPolicy(min_ddp_noise=1.0)
    spec = SumSpec.of("model", {"w": np.zeros(4)}, noise=SumNoise(noise_multiplier=0.8, l2_clip=1.0, expected_contributors=1))
    with pytest.raises(ProtocolError, match="carries distributed DP noise multiplier"):
        policy.check_noise(spec, live=10, least=10, private=True, precision_bits=None)
    ok = SumSpec.of("model", {"w": np.zeros(4)}, noise=SumNoise(noise_multiplier=1.0, l2_clip=1.0, expected_contributors=1))
    policy.check_noise(ok, live=10, least=10, private=True, precision_bits=None)


@pytest.mark.parametrize("ddp_noise", [None, 0.5])
def test_the_ddp_noise_a_refusal_suggests_is_enough_and_not_more(ddp_noise):
    """A Welcome below --min-ddp-noise is refused with the server option that would pass: that
    value must pass, and one step (0.001) below it must not. On a coarse grid (precision_bits 4)
    the rounding's share of the sensitivity is counted in it, and the refusal says so."""
    import re

    policy, config, n_run = ClientPolicy(min_ddp_noise=1.0), SecureSumConfig(mask=MaskConfig(precision_bits=4)), 10
    with pytest.raises(ProtocolError) as refused:
        policy.check_run(config, n_run=n_run, ddp_noise=ddp_noise, ddp_clip=None if ddp_noise is None else 1.0)
    suggested = float(re.search(r"--set ddp_noise=([0-9.]+)", str(refused.value)).group(1))
    clip = None if ddp_noise is None else 1.0  # a plan without DP announces no clip: the grid's share is then unknown
    policy.check_run(config, n_run=n_run, ddp_noise=suggested, ddp_clip=clip)
    with pytest.raises(ProtocolError, match="min_ddp_noise|min-ddp-noise"):
        policy.check_run(config, n_run=n_run, ddp_noise=suggested - 0.001, ddp_clip=clip)
    assert ("or more --precision-bits" in str(refused.value)) == (ddp_noise is not None)


@pytest.mark.parametrize(("precision_bits", "explained"), [(4, True), (13, True), (14, False)])
def test_a_ddp_refusal_explains_the_grid_only_where_rounding_costs_noise(precision_bits, explained):
    """A sum of 100 values clipped to 1 and rounded to the grid 2^-p can reach L2 norm
    1 + sqrt(100) / 2 * 2^-p. The refusal quotes that norm where the rounding costs more than
    0.05% of the clip (p = 4: 1.31; p = 13: 5 / 8192 of it), and leaves it out where it does not
    (p = 14)."""
    import math

    from secure_fedgraph.protocol.core.spec import SumNoise, SumSpec

    spec = SumSpec.of("model", {"w": np.zeros(100)}, noise=SumNoise(noise_multiplier=0.5, l2_clip=1.0, expected_contributors=10))
    with pytest.raises(ProtocolError) as refused:
        ClientPolicy(min_ddp_noise=1.0).check_noise(spec, live=10, least=10, private=True, precision_bits=precision_bits)
    norm = 1.0 + math.sqrt(100) / 2 / 2**precision_bits
    note = f"(rounded to the grid 2^-{precision_bits}, a contribution of 100 values clipped to 1 can reach L2 norm {norm:.3g})"
    assert (note in str(refused.value)) == explained
    assert ("rounded to the grid" in str(refused.value)) == explained


def test_a_ddp_refusal_on_a_sum_noised_per_row_quotes_a_rows_bound():
    """With noise per row (FedSTGD's windows), one unit of privacy is a row: the refusal's grid
    note speaks of a row of 25 values (a 4 x 25 tensor), not of the whole 100-value contribution."""
    import math

    from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumSpec

    noise = SumNoise(noise_multiplier=0.5, l2_clip=1.0, expected_contributors=10, unit=NoiseUnit.ROW)
    spec = SumSpec.of("windows", {"p": np.zeros((4, 25))}, noise=noise)
    with pytest.raises(ProtocolError) as refused:
        ClientPolicy(min_ddp_noise=1.0).check_noise(spec, live=10, least=10, private=True, precision_bits=4)
    norm = 1.0 + math.sqrt(25) / 2 / 2**4
    assert f"(rounded to the grid 2^-4, a row of 25 values clipped to 1 can reach L2 norm {norm:.3g})" in str(refused.value)
