"""Every backend's secure sum equals the float64 plaintext sum within its stated error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, MaskConfig, SecureSumConfig, Stage
from tests.helpers import NO_COLLUDERS, sparse_config, config_for, make_inputs, max_error, plain_sum


def _client_view(session, contributors):
    """The result every contributing client obtained (they must all agree)."""
    results = [session.clients[c].last_result for c in sorted(contributors)]
    assert all(r is not None for r in results)
    return results


@pytest.mark.parametrize("n", [2, 3, 10, 100])
def test_sum_matches_plaintext(backend, n):
    # a run of two holds only where the adversary counts no colluder (a third of two is one: B2)
    session = local_session(config_for(backend, **({"adversary": NO_COLLUDERS} if n == 2 else {})), range(n))
    session.start_round()
    inputs = make_inputs(range(n), seed=n)
    server_result = session.secure_sum("model", inputs)
    reference = plain_sum(inputs, range(n))
    assert server_result.contributors == frozenset(range(n))
    if backend is Backend.CKKS:
        assert server_result.values is None  # the server never sees the sum
    else:
        assert max_error(server_result.values, reference) <= server_result.error_bound + 1e-12
    for result in _client_view(session, range(n)):
        assert max_error(result.values, reference) <= result.error_bound + 1e-12
        assert {k: v.shape for k, v in result.values.items()} == {k: v.shape for k, v in reference.items()}


def test_stated_error_bounds(backend):
    bound = {
        Backend.PLAIN: 0.0,
        Backend.MASK: 10 * (2.0**-21 + 8.0 * 2.0**-53),  # n * (2^-(precision_bits + 1) + clip_range * 2^-53)
        Backend.CKKS: 10 * (8192 * 2.0**-40 + 8.0 * 2.0**-45),  # n * (N * 2^-scale_bits + clip_range * 2^-45)
    }[backend]
    session = local_session(config_for(backend), range(10))
    session.start_round()
    session.secure_sum("s", make_inputs(range(10)))
    assert session.clients[0].last_result.error_bound == pytest.approx(bound)


def test_many_sums_per_round_and_many_rounds(backend):
    """One key set-up per round, then several sums of different shapes; then a new round."""
    session = local_session(config_for(backend), range(5))
    for round_index in range(2):
        session.start_round()
        for k, shapes in enumerate([{"a": (4,)}, {"p": (3, 3), "q": (1,)}, {"z": (5000,)}]):
            inputs = make_inputs(range(5), seed=10 * round_index + k, shapes=shapes)
            session.secure_sum(f"sum{k}", inputs)
            result = session.clients[4].last_result
            assert max_error(result.values, plain_sum(inputs, range(5))) <= result.error_bound + 1e-12
    if backend is Backend.MASK:  # setup ran once per round: two ADVERTISE steps in total
        assert sum("advertise" in line for line in session.server.log) == 2


def test_mask_large_sum_spans_chunks_and_uses_32_bit_ring():
    session = local_session(config_for(Backend.MASK, clip_range=1.0), range(4))
    session.start_round()
    inputs = make_inputs(range(4), shapes={"w": (100_000,)}, dtype=np.float32)
    result = session.secure_sum("big", inputs)
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound + 1e-12
    up = session.runner.traffic.up_by_stage[Stage.INPUT] / 4
    assert up < 4 * 100_000 + 200  # a 32-bit ring: no more bytes than float32


def test_torch_tensors_are_accepted():
    import torch

    session = local_session(config_for(Backend.MASK), range(3))
    session.start_round()
    inputs = {c: {"w": torch.full((2, 3), float(c), dtype=torch.float32)} for c in range(3)}
    result = session.secure_sum("t", inputs)
    np.testing.assert_allclose(result.values["w"], np.full((2, 3), 3.0), atol=result.error_bound)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(3, 9),
    size=st.integers(1, 40),
    scale=st.sampled_from([0.5, 3.0, 20.0]),
    precision=st.integers(8, 30),
    data=st.data(),
)
def test_mask_property_any_clients_ranges_and_dropouts(n, size, scale, precision, data):
    """Random client counts, sizes, value ranges (some beyond the clip range) and dropouts: down
    to the survivor floor before the inputs are in (a re-key when secrets cannot be recovered),
    down to the threshold after them (the dropped clients' self-masks are recovered)."""
    config = SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(clip_range=8.0, precision_bits=precision))
    plan = config.mask.resolve(n, None)
    stage = data.draw(st.sampled_from([Stage.ADVERTISE, Stage.SHARE_KEYS, Stage.INPUT, Stage.CONSISTENCY, Stage.UNMASK]))
    late = stage in (Stage.CONSISTENCY, Stage.UNMASK)
    dropped = data.draw(st.sets(st.integers(0, n - 1), max_size=n - (plan.threshold if late else plan.min_survivors)))
    session = local_session(config, range(n), drop={stage: dropped})
    session.start_round()
    inputs = make_inputs(range(n), seed=size, shapes={"v": (size,)}, scale=scale)
    result = session.secure_sum("p", inputs)
    expected_contributors = set(range(n)) - dropped if stage in (Stage.ADVERTISE, Stage.SHARE_KEYS, Stage.INPUT) else set(range(n))
    assert result.contributors == expected_contributors
    reference = plain_sum(inputs, result.contributors, clip_range=8.0)
    assert max_error(result.values, reference) <= result.error_bound + 1e-9
    true_clipped = sum(int((np.abs(inputs[c]["v"]) > 8.0).sum()) for c in result.contributors)
    assert result.clipped == true_clipped


def test_sparse_graph_sum():
    config = sparse_config(4)
    session = local_session(config, range(30))
    session.start_round()
    inputs = make_inputs(range(30), seed=3)
    result = session.secure_sum("s", inputs)
    assert max_error(result.values, plain_sum(inputs, range(30))) <= result.error_bound + 1e-12
    assert all(len(session.server._graph.of(c)) == 4 for c in range(30))


def test_server_only_sums_reach_the_server_not_the_clients(backend):
    from secure_fedgraph.errors import ConfigError
    from secure_fedgraph.protocol.sum_backends import SumSpec

    session = local_session(config_for(backend), range(4))
    session.start_round()
    inputs = make_inputs(range(4))
    for c, tensors in inputs.items():
        session.clients[c].contribute("s", tensors)
    spec = SumSpec.of("s", inputs[0], server_only=True)
    if backend is Backend.CKKS:
        with pytest.raises(ConfigError, match="only the clients can decrypt"):
            session.runner.run(session.server.aggregate(spec))
        return
    result = session.runner.run(session.server.aggregate(spec))
    assert max_error(result.values, plain_sum(inputs, range(4))) <= result.error_bound + 1e-12
    assert all(client.last_result.values is None and client.last_result.contributors == frozenset(range(4)) for client in session.clients.values())
    assert session.runner.traffic.down_by_stage[Stage.DELIVER] < 4 * 400  # contributors only, no values
