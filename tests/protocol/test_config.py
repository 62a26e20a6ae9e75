"""Configuration: defaults resolve as documented; bad values name the field and the bound."""

from __future__ import annotations

import pytest

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.protocol.secure_sum import GraphKind, MaskConfig, SecureSumConfig


@pytest.mark.parametrize(
    "n,graph,degree,threshold",
    [(2, GraphKind.COMPLETE, 1, 2), (3, GraphKind.COMPLETE, 2, 2), (100, GraphKind.COMPLETE, 99, 51), (1000, GraphKind.SPARSE, 20, 11)],
)
def test_defaults(n, graph, degree, threshold):
    plan = MaskConfig().resolve(n, None)
    assert (plan.graph, plan.degree, plan.threshold, plan.min_survivors) == (graph, degree, threshold, n // 2 + 1)


def test_sparse_graph_that_would_be_complete_falls_back():
    plan = MaskConfig(graph=GraphKind.SPARSE).resolve(8, None)  # 2 * ceil(log2 8) = 6 < 7: still sparse
    assert plan.graph is GraphKind.SPARSE and plan.degree == 6
    plan = MaskConfig(graph=GraphKind.SPARSE).resolve(6, None)  # degree 6 >= n - 1
    assert plan.graph is GraphKind.COMPLETE and plan.degree == 5


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


def test_threshold_below_a_majority_is_refused():
    with pytest.raises(ConfigError, match="threshold=3 must be between a majority \\(6\\)"):
        MaskConfig(threshold=3).resolve(10, None)


def test_min_survivors_below_a_majority_is_refused_for_mask():
    with pytest.raises(ConfigError, match="min_survivors=4 must be between a majority \\(6\\)"):
        MaskConfig().resolve(10, 4)


def test_min_survivors_above_n():
    with pytest.raises(ConfigError, match="exceeds the 3 clients"):
        SecureSumConfig(min_survivors=5).survivors_needed(3)


def test_server_announcing_weaker_parameters_is_refused_by_clients():
    """A client recomputes the plan from its own config; a weaker announced threshold fails."""
    import dataclasses

    from secure_fedgraph.errors import ProtocolError
    from secure_fedgraph.protocol.secure_sum import Backend, Stage, local_session
    from secure_fedgraph.protocol import codec

    def weaken(direction, stage, client, data):
        if direction == "down" and stage is Stage.ADVERTISE:
            return codec.encode(dataclasses.replace(codec.decode(data), threshold=2))
        return data

    session = local_session(SecureSumConfig(backend=Backend.MASK), range(7), intercept=weaken)
    with pytest.raises(ProtocolError, match="server announced"):
        session.start_round()
