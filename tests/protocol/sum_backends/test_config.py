"""Configuration: defaults resolve as documented; bad values name the field and the bound."""

from __future__ import annotations

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.sum_backends import Adversary, GraphKind, MaskConfig, SecureSumConfig, Threat


@pytest.mark.parametrize(
    "n,graph,degree,threshold,survivors",
    [  # the default adversary: a deviating server with a third of the clients, 2t > group + colluders
        (3, GraphKind.COMPLETE, 2, 3, 3),  # one colluder: both others must survive, and vouch
        (10, GraphKind.COMPLETE, 9, 7, 6),  # 3 colluders: (10 + 3) // 2 + 1
        (100, GraphKind.COMPLETE, 99, 67, 51),
        (1000, GraphKind.SPARSE, 242, 191, 501),  # (S) + (C) two gaps at 40 bits over 1024 key epochs, 10% dropouts
    ],
)
def test_defaults(n, graph, degree, threshold, survivors):
    plan = MaskConfig().resolve(n, None)
    assert (plan.graph, plan.degree, plan.threshold, plan.min_survivors) == (graph, degree, threshold, survivors)


def test_a_run_too_small_for_two_honest_inputs_is_refused():
    """A third of two clients counts one colluder (never none, B2): a sum would need three."""
    with pytest.raises(ConfigError, match="a run of 2 clients cannot put two honest inputs into a sum against 1 colluding"):
        MaskConfig().resolve(2, None)
    plan = MaskConfig(adversary=Adversary(corrupt_fraction=0.0)).resolve(2, None)  # stated: no colluders
    assert (plan.degree, plan.threshold, plan.min_survivors) == (1, 2, 2)
    with pytest.raises(ConfigError, match="run at least 7 clients"):  # 5 of 6 colluding; 7 clients hold 5 + 2
        MaskConfig(adversary=Adversary(corrupt_fraction=0.85, dropout_fraction=0.1)).resolve(6, None)


def test_sparse_graph_falls_back_to_complete_where_no_sparse_degree_holds():
    plan = MaskConfig(graph=GraphKind.SPARSE, adversary=Adversary(corrupt_fraction=0.6)).resolve(10, None)  # no degree below 9 holds
    assert plan.graph is GraphKind.COMPLETE and plan.degree == 9
    plan = MaskConfig(graph=GraphKind.SPARSE).resolve(207, None)
    assert plan.graph is GraphKind.SPARSE and plan.degree == 104


def test_a_weaker_stated_adversary_gives_a_cheaper_graph_and_honest_but_curious_lower_thresholds():
    cheap = MaskConfig(graph=GraphKind.SPARSE, adversary=Adversary(corrupt_fraction=0.05, dropout_fraction=0.05)).resolve(1000, None)
    assert cheap.graph is GraphKind.SPARSE and cheap.degree < 100
    assert MaskConfig(adversary=Adversary(threat=Threat.HONEST_BUT_CURIOUS)).resolve(10, None).threshold == 6


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"clip_range": 0.0}, "clip_range"),
        ({"clip_range": float("inf")}, "clip_range"),
        ({"precision_bits": -1}, "precision_bits"),
        ({"precision_bits": True}, "precision_bits"),
        ({"ring_bits": 16}, "ring_bits"),
        ({"degree": 5}, "degree must be even"),
        ({"threshold": 1}, "threshold"),
        ({"graph": "complete"}, "graph must be a GraphKind"),
    ],
)
def test_mask_config_validation(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        MaskConfig(**kwargs)


def test_threshold_below_the_active_bound_is_refused():
    with pytest.raises(ConfigError, match="threshold=6 must be between 7 \\(what a active server with up to 0.333"):
        MaskConfig(threshold=6).resolve(10, None)


def test_an_explicit_sparse_degree_must_hold_against_the_adversary():
    with pytest.raises(ConfigError, match="degree=16 cannot hold against a active server"):
        MaskConfig(graph=GraphKind.SPARSE, degree=16).resolve(200, None)


def test_min_survivors_below_a_majority_of_the_run_is_refused_for_mask():
    with pytest.raises(ConfigError, match="min_survivors=4 must be between 6 \\(a majority of the run's 10 clients"):
        MaskConfig().resolve(10, 4)
    with pytest.raises(ConfigError, match="min_survivors=2 must be between 6"):  # a smaller round keeps the run's bar
        MaskConfig().resolve(4, 2, n_run=10)


def test_min_survivors_above_n():
    with pytest.raises(ConfigError, match="exceeds the 3 clients of the run"):
        SecureSumConfig(min_survivors=5).survivors_needed(3)


def test_server_announcing_weaker_parameters_is_refused_by_clients():
    """A client checks the announced plan against its own policy; a weaker threshold fails."""
    import dataclasses

    from secure_fedgraph.errors import ProtocolError
    from secure_fedgraph.protocol.engine.local import local_session
    from secure_fedgraph.protocol.sum_backends import Backend, Stage
    from secure_fedgraph.protocol.transports import codec

    def weaken(direction, stage, client, data):
        if direction == "down" and stage is Stage.ADVERTISE:
            return codec.encode(dataclasses.replace(codec.decode(data), threshold=2))
        return data

    session = local_session(SecureSumConfig(backend=Backend.MASK), range(7), intercept=weaken)
    with pytest.raises(ProtocolError, match="server announced threshold 2 for 7 participants, below the 5"):
        session.start_round()
