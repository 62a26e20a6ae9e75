"""Distributed DP inside the secure sum (protocol/sum_backends/ddp_noise.py; threat_model.md DDP-NOISE,
DDP-FLOOR, DDP-RANGE): clients add Skellam noise in the ring before masking, the aggregate the
server holds carries the stated variance over its survivors, the ring holds the noise's tail,
and a client's own floor is not lowered by what the server announces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from secure_fedgraph.errors import CapacityError, ConfigError, ProtocolError
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, ClientPolicy, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.config import MaskConfig
from secure_fedgraph.protocol.sum_backends.ddp_noise import clip_l2, noised
from secure_fedgraph.protocol.core.spec import NoiseUnit, SumNoise, SumSpec
from secure_fedgraph.privacy.analysis.skellam import sensitivities
from tests.helpers import config_for, defence_stops

SIZE = 3000  # values per sum: each sum gives SIZE draws of the aggregate's noise


def _variance_ratio(backend: Backend, *, clients: int, expected: int, drop: set[int], sums: int = 4) -> tuple[float, int]:
    """Zero inputs, so the server's aggregate is the noise alone: its sample variance over
    ``sums`` sums of SIZE values, divided by the stated variance (noise_multiplier * l2_clip)^2."""
    noise = SumNoise(l2_clip=0.5, noise_multiplier=2.0, expected_contributors=expected)
    session = local_session(config_for(backend), range(clients), drop={Stage.INPUT: drop} if drop else None)
    session.start_round()
    samples = []
    for s in range(sums):
        result = session.secure_sum(f"update-{s}", {c: {"w": np.zeros(SIZE)} for c in range(clients)}, noise=noise)
        samples.append(result.values["w"])
    contributors = len(result.contributors)
    return float(np.var(np.concatenate(samples)) / (noise.noise_multiplier * noise.l2_clip) ** 2), contributors


@pytest.mark.parametrize("backend", [Backend.MASK, Backend.PLAIN])
def test_the_aggregate_carries_the_stated_variance_over_its_survivors(backend):
    """Sample variance of 12,000 draws has a relative standard deviation of sqrt(2/12000) = 1.3%:
    a bound of 6 of them (7.7%) fails if the noise is missing (ratio 0), not divided among the
    expected clients (ratio 6), or counted for the expected clients when one dropped (1 vs 5/6)."""
    tolerance = 6 * math.sqrt(2 / (4 * SIZE))
    ratio, contributors = _variance_ratio(backend, clients=6, expected=6, drop=set())
    assert contributors == 6 and abs(ratio - 1) < tolerance
    ratio, contributors = _variance_ratio(backend, clients=6, expected=6, drop={2})
    assert contributors == 5 and abs(ratio - 5 / 6) < tolerance  # the dropped client's share is missing: 5/6 of the variance


def test_noised_sum_is_the_clipped_sum_plus_noise():
    """Non-zero inputs: each is clipped to L2 norm l2_clip; the noised sum's mean error over many
    values is within its standard error of the sum of the clipped inputs."""
    rng = np.random.default_rng(0)
    inputs = {c: {"w": rng.normal(size=SIZE) * (0.01 if c % 2 else 1.0)} for c in range(5)}  # odd clients under the clip, even over
    noise = SumNoise(l2_clip=1.0, noise_multiplier=0.5, expected_contributors=5)
    session = local_session(config_for(Backend.MASK), range(5))
    session.start_round()
    result = session.secure_sum("update", inputs, noise=noise)
    clipped = sum(clip_l2(inputs[c]["w"], 1.0) for c in range(5))
    error = result.values["w"] - clipped
    assert abs(error.mean()) < 5 * 0.5 / math.sqrt(SIZE)
    assert abs(error.std() - 0.5) < 0.05
    assert np.linalg.norm(clip_l2(inputs[0]["w"], 1.0)) == pytest.approx(1.0) and np.linalg.norm(inputs[0]["w"]) > 10


def test_a_clients_noise_is_on_the_grid_fresh_and_reproducible_only_with_a_key():
    x = np.linspace(-0.1, 0.1, 100)
    spec = SumSpec.of("w", {"w": x}, noise=SumNoise(l2_clip=1.0, noise_multiplier=1.0, expected_contributors=4))
    a, b = noised(x, spec, precision_bits=16), noised(x, spec, precision_bits=16)
    assert not np.array_equal(a, b)  # fresh OS randomness every time, never the run seed
    assert np.array_equal(a * 2**16, np.rint(a * 2**16))  # exactly on the grid: the ring carries q + k
    key = bytes(range(32))
    assert np.array_equal(noised(x, spec, precision_bits=16, key=key), noised(x, spec, precision_bits=16, key=key))


def test_the_noise_tail_enters_the_capacity_check_before_the_round():
    """The sum's range is the clip plus the noise's tail (SumNoise.value_bound): the encoding
    holds it, and noise the ring cannot hold is a CapacityError before anything is sent."""
    noise = SumNoise(l2_clip=1.0, noise_multiplier=1.0, expected_contributors=10)
    spec = SumSpec.of("update", {"w": np.zeros(1000)}, noise=noise)
    encoding = MaskConfig().encoding_of(spec, 10)
    bound = noise.value_bound(size=1000, precision_bits=20)
    assert encoding.clip_range == bound and bound > 1.0 + 4 * 1.0 / math.sqrt(10)  # > 4 local standard deviations of tail
    loud = SumSpec.of("update", {"w": np.zeros(1000)}, noise=SumNoise(l2_clip=1.0, noise_multiplier=1e7, expected_contributors=10))
    with pytest.raises(CapacityError, match="sum 'update'"):
        MaskConfig(precision_bits=40).encoding_of(loud, 10)
    session = local_session(SecureSumConfig(mask=MaskConfig(precision_bits=40)), range(10))
    session.start_round()
    with pytest.raises(CapacityError):
        session.secure_sum("update", {c: {"w": np.zeros(1000)} for c in range(10)}, noise=loud.noise)
    assert session.clients[0].last_result is None


def test_ckks_refuses_a_noised_sum_and_a_noised_spec_has_no_other_range():
    session = local_session(config_for(Backend.CKKS), range(3))
    session.start_round()
    noise = SumNoise(l2_clip=1.0, noise_multiplier=1.0, expected_contributors=3)
    with pytest.raises(ConfigError, match="distributed DP.*mask"):
        session.secure_sum("update", {c: {"w": np.zeros(10)} for c in range(3)}, noise=noise)
    with pytest.raises(ConfigError, match="leave clip_range"):
        SumSpec.of("update", {"w": np.zeros(10)}, noise=noise, clip_range=2.0)


def test_attack_a_server_announcing_less_noise_than_a_clients_floor(monkeypatch):
    """Clients require noise multiplier 1 on their model sums (--min-ddp-noise 1). A deviating
    server announces 0.05: with the defence it gets a refusal; without the client's check the
    sum it holds carries 1/20 of the noise the clients asked for."""
    policy = ClientPolicy(backends=frozenset({Backend.MASK}), min_ddp_noise=1.0)

    def attack() -> bool:
        session = local_session(SecureSumConfig(), range(4), policy=policy)
        session.start_round()
        result = session.secure_sum("weights", {c: {"w": np.zeros(SIZE)} for c in range(4)},
                                    noise=SumNoise(l2_clip=1.0, noise_multiplier=0.05, expected_contributors=4), private=True)
        return float(np.std(result.values["w"])) < 0.5  # far less than the floor's standard deviation of 1

    defence_stops(attack, monkeypatch, ClientPolicy, "check_noise", lambda self, spec, **kw: None)


def test_a_clients_floor_refuses_no_noise_and_noise_spread_over_more_clients_than_asked():
    policy = ClientPolicy(min_ddp_noise=1.0)
    noiseless = SumSpec.of("weights", {"w": np.zeros(3)})
    with pytest.raises(ProtocolError, match=r"noise multiplier 0 per unit of its sensitivity, below 1 .*--min-ddp-noise"):
        policy.check_noise(noiseless, live=4, least=4, private=True, precision_bits=20)
    policy.check_noise(noiseless, live=4, least=4, private=False, precision_bits=20)  # error sums and statistics: not the client's model
    spread = SumSpec.of("weights", {"w": np.zeros(3)}, noise=SumNoise(l2_clip=1.0, noise_multiplier=2.0, expected_contributors=40))
    with pytest.raises(ProtocolError, match=r"multiplier 0.632 \(multiplier 2 spread over 40 expected contributors, 4 asked, 4 may be all"):
        policy.check_noise(spread, live=4, least=4, private=True, precision_bits=20)
    policy.check_noise(spread, live=16, least=16, private=True, precision_bits=20)  # 2 sqrt(16/40) = 1.26
    # the survivor floor counts: 16 asked, but a sum of 8 may be delivered: 2 sqrt(8/40) = 0.894
    with pytest.raises(ProtocolError, match=r"multiplier 0.894 \(multiplier 2 spread over 40 expected contributors, 16 asked, 8 may be all"):
        policy.check_noise(spread, live=16, least=8, private=True, precision_bits=20)


def test_a_clients_floor_at_the_welcome_counts_the_fewest_contributors_it_accepts():
    """4 clients, of whom this client lets a sum have 3: a plan needs ddp_noise >= sqrt(4/3)."""
    policy = ClientPolicy(min_ddp_noise=1.0)
    assert policy.floor(4) == 3
    with pytest.raises(ProtocolError, match=r"has no distributed DP on its model sums, and this client requires .* at least 1 .*--min-ddp-noise"):
        policy.check_run(SecureSumConfig(), n_run=4, ddp_noise=None)
    with pytest.raises(ProtocolError, match=r"ddp_noise=1, which leaves 0.866 in a sum of the 3 of 4 clients .* --set ddp_noise=1.155 or more"):
        policy.check_run(SecureSumConfig(), n_run=4, ddp_noise=1.0)
    policy.check_run(SecureSumConfig(), n_run=4, ddp_noise=1.155)
    policy.check_run(SecureSumConfig(min_survivors=4), n_run=4, ddp_noise=1.0)  # a server that needs every client (no clip announced)


def test_a_clients_floor_at_the_welcome_counts_the_grid_at_its_least():
    """The Welcome announces the clip and the grid, not the sums' dimensions: the floor is
    checked per unit of the least sensitivity rounding allows (one value: C 2^p + 1/2), which
    refuses what no sum could pass; each sum is checked with its own size before it leaves."""
    policy = ClientPolicy(min_ddp_noise=1.0)
    coarse = SecureSumConfig(min_survivors=4, mask=MaskConfig(precision_bits=0))
    with pytest.raises(ProtocolError, match=r"ddp_noise=1, which leaves 0.666 .* --set ddp_noise=1.5 or more, or more --precision-bits: "
                                            r"rounding to the grid 2\^-0 adds to each contribution's sensitivity"):
        policy.check_run(coarse, n_run=4, ddp_noise=1.0, ddp_clip=1.0)  # d2 >= 1 + 1/2
    policy.check_run(coarse, n_run=4, ddp_noise=1.5, ddp_clip=1.0)
    every = SecureSumConfig(min_survivors=4)  # at 20 bits rounding adds 2^-21 of the clip, still something
    with pytest.raises(ProtocolError, match=r"ddp_noise=1, which leaves 0.999 .* --set ddp_noise=1.001 or more\)"):
        policy.check_run(every, n_run=4, ddp_noise=1.0, ddp_clip=1.0)
    policy.check_run(every, n_run=4, ddp_noise=1.001, ddp_clip=1.0)


def test_attack_a_coarse_grid_halves_the_noise_per_unit_of_sensitivity(monkeypatch):
    """D3: clients require noise multiplier 1 on their model sums (--min-ddp-noise 1). A
    deviating server announces noise multiplier exactly 1 over 4 clients who must all
    contribute, but a coarse grid 2^-5 for a sum of 4,096 values clipped to L2 norm 1: the clip
    is 32 integer units there, and rounding each value can add sqrt(4096)/2 = 32 more, so a
    rounded contribution's sensitivity is twice the clip's and the noise per unit of it half the
    floor. With the defence the clients refuse before their input leaves; without it (the floor
    counted per unit of the clip, z sqrt(m / E)) the sum the server holds carries noise of about
    0.5 per unit of a contribution's sensitivity."""
    policy = ClientPolicy(min_ddp_noise=1.0)
    size, bits = 4096, 5
    config = SecureSumConfig(min_survivors=4, mask=MaskConfig(precision_bits=bits))
    _, sensitivity = sensitivities(l2_clip=1.0, precision_bits=bits, dimension=size)
    assert sensitivity == 2 * 2**bits

    def attack() -> bool:
        sent: list[int] = []

        def watch(direction, stage, client, data):
            if direction == "up" and stage is Stage.INPUT:
                sent.append(client)
            return data

        session = local_session(config, range(4), policy=policy, intercept=watch)
        session.start_round()
        noise = SumNoise(l2_clip=1.0, noise_multiplier=1.0, expected_contributors=4)
        try:
            result = session.secure_sum("weights", {c: {"w": np.zeros(size)} for c in range(4)}, noise=noise, private=True)
        except ProtocolError as refused:
            assert not sent and "per unit of its sensitivity, below 1" in str(refused)  # before anything of an input left
            raise
        per_unit = float(np.std(result.values["w"])) * 2**bits / sensitivity  # the noise's std in integer units, per unit of d2
        return per_unit < 0.55  # about 0.5 (1.1% sampling error): half the floor

    defence_stops(attack, monkeypatch, ClientPolicy, "_noise_per_unit",
                  staticmethod(lambda *, noise_multiplier, contributors, expected, **kw: noise_multiplier * math.sqrt(min(1.0, contributors / expected))))


def test_attack_a_server_discarding_honest_inputs_down_to_the_survivor_floor(monkeypatch):
    """Ten clients require noise multiplier 1 on their model sums (--min-ddp-noise 1), and the
    server announces 1.001 over the 10 it asks (just above 1 per unit of a contribution's
    sensitivity at the 20-bit grid). Then it discards three honest inputs, claiming those
    clients dropped, and delivers the sum of the other seven: it carries 1.001 x sqrt(7/10) =
    0.84 of the noise. With the defence the clients count the noise over the
    survivor floor their consistency check enforces (6 of 10: 0.77) and refuse before anything
    leaves them; without it (the noise counted over the clients asked) the server holds a sum
    below their floor. (Four discarded would leave too few holders of the dropped clients'
    shares: the server must re-key, and the new, smaller live set is refused either way.)"""
    policy = ClientPolicy(backends=frozenset({Backend.MASK}), min_ddp_noise=1.0)
    clients = range(10)
    honest_check = ClientPolicy.check_noise

    def attack() -> bool:
        session = local_session(SecureSumConfig(), clients, policy=policy, drop={Stage.INPUT: {7, 8, 9}})
        session.start_round()
        noise = SumNoise(l2_clip=1.0, noise_multiplier=1.001, expected_contributors=10)
        result = session.secure_sum("weights", {c: {"w": np.zeros(SIZE)} for c in clients}, noise=noise, private=True)
        assert len(result.contributors) == 7 and session.server._plan.min_survivors == 6
        return float(np.std(result.values["w"])) < 0.9  # sqrt(0.7) = 0.84 of the floor's standard deviation (0.7% error)

    defence_stops(attack, monkeypatch, ClientPolicy, "check_noise",
                  lambda self, spec, *, live, least, private, precision_bits: honest_check(self, spec, live=live, least=live, private=private,
                                                                                           precision_bits=precision_bits))


def _rows_clipped(rows: np.ndarray, bound: float) -> np.ndarray:
    """Each row of (rows, d) scaled to L2 norm ``bound`` if longer: the test's own clipping."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows * np.minimum(1.0, bound / np.maximum(norms, 1e-300))


def test_noise_per_row_clips_each_row_alone_and_the_sum_is_per_row():
    """SumNoise(unit=ROW) (FedSTGD's windows of a batch): row r of every tensor is one unit,
    clipped to l2_clip on its own, so one row moves the sum by at most the clip whatever the
    other rows hold; the sum over clients is per row, with the stated noise on every element,
    and the floor and the accountant count one row's values (unit_size), not the whole sum's."""
    rng, rows, clients = np.random.default_rng(1), 200, 4
    noise = SumNoise(l2_clip=1.0, noise_multiplier=0.5, expected_contributors=clients, unit=NoiseUnit.ROW)
    inputs = {c: {"P": rng.normal(size=(rows, 4, 3)) * np.where(np.arange(rows) % 2, 0.01, 3.0)[:, None, None],
                  "Q": rng.normal(size=(rows, 16, 3)) * 0.01} for c in range(clients)}  # odd rows under the clip, even rows far over
    session = local_session(config_for(Backend.MASK), range(clients))
    session.start_round()
    result = session.secure_sum("pq", inputs, noise=noise)
    per_row = {c: _rows_clipped(np.concatenate([inputs[c]["P"].reshape(rows, -1), inputs[c]["Q"].reshape(rows, -1)], 1), 1.0)
               for c in range(clients)}
    expected = sum(per_row.values())
    residual = np.concatenate([result.values["P"].reshape(rows, -1), result.values["Q"].reshape(rows, -1)], 1) - expected
    # z C per element over the sum; both bounds at about six of their standard errors (the noise is fresh, from the OS):
    # the mean's is 0.5 / sqrt(12,000) = 0.0046, the standard deviation's 0.5 / sqrt(24,000) = 0.0032
    assert abs(residual.std() - 0.5) < 0.02 and abs(residual.mean()) < 6 * 0.5 / math.sqrt(residual.size)
    small = per_row[0][1::2]  # rows under the clip pass unchanged, whatever the large rows beside them hold
    assert np.allclose(small, np.concatenate([inputs[0]["P"].reshape(rows, -1), inputs[0]["Q"].reshape(rows, -1)], 1)[1::2])
    spec = SumSpec.of("pq", inputs[0], noise=noise)
    assert spec.unit_size == 4 * 3 + 16 * 3 and spec.size == rows * spec.unit_size
    assert np.array_equal(spec.from_rows(spec.rows(spec.flatten(inputs[0]))), spec.flatten(inputs[0]))
    per_unit = ClientPolicy._noise_per_unit(noise_multiplier=0.5, l2_clip=1.0, precision_bits=20, dimension=spec.unit_size,
                                             contributors=clients, expected=clients)
    assert per_unit == pytest.approx(0.5 * 2**20 / sensitivities(l2_clip=1.0, precision_bits=20, dimension=60)[1])
    with pytest.raises(ConfigError, match="share its leading axis"):
        SumSpec.of("pq", {"P": np.zeros((3, 2)), "Q": np.zeros((4, 2))}, noise=noise)


def test_summed_rows_clip_each_staged_row_then_add_them_up():
    """SumNoise(unit=SUMMED_ROWS) (FedSTGD's statistics, one row per window): a client stages
    its rows, each is clipped on its own and their sum is its contribution; the sum's range
    covers max_rows clips plus the noise's tail, and a client staging more rows is refused."""
    rng, clients = np.random.default_rng(2), 4
    noise = SumNoise(l2_clip=1.0, noise_multiplier=0.25, expected_contributors=clients, unit=NoiseUnit.SUMMED_ROWS, max_rows=40)
    inputs = {c: {"stats": rng.normal(size=(40, 2)) * 2.0} for c in range(clients)}
    session = local_session(config_for(Backend.MASK), range(clients))
    session.start_round()
    totals = [session.secure_sum(f"stats-{s}", inputs, noise=noise).values["stats"] for s in range(150)]
    expected = sum(_rows_clipped(inputs[c]["stats"], 1.0).sum(0) for c in range(clients))
    residual = np.array(totals) - expected
    # 300 draws of N(0, 0.25^2), fresh from the OS: the standard deviation's standard error is 0.25 / sqrt(600) = 0.010, so the
    # bound is five of them (at 100 draws it was 2.8, and failed about one run in 200); each column's mean's is 0.020
    assert abs(residual.std() - 0.25) < 0.05 and np.abs(residual.mean(0)).max() < 0.15
    spec = SumSpec.of("stats", {"stats": np.zeros(2)}, noise=noise)
    assert MaskConfig().encoding_of(spec, clients).clip_range > 40 * 1.0
    with pytest.raises(ConfigError, match="41 rows staged, expected 1 to max_rows=40"):
        spec.flatten({"stats": np.zeros((41, 2))})
    with pytest.raises(ConfigError, match="expected \\(rows, \\*\\(2,\\)\\)"):
        spec.flatten({"stats": np.zeros(2)})


def test_a_noised_sum_may_ask_for_a_finer_grid_and_says_so_on_the_wire():
    """min_precision_bits: the grid the noise is drawn on is at least that fine (a small clip on
    the backend's grid would let rounding dominate a unit's sensitivity); the noised values are
    on that grid, and every field of SumNoise survives the wire."""
    from secure_fedgraph.protocol.transports import codec

    noise = SumNoise(l2_clip=1e-4, noise_multiplier=1.0, expected_contributors=3, unit=NoiseUnit.ROW, min_precision_bits=34)
    spec = SumSpec.of("pq-grad", {"G": np.zeros((2, 5))}, noise=noise)
    assert MaskConfig().encoding_of(spec, 3).precision_bits == 34 and noise.grid_bits(40) == 40
    values = noised(np.full(10, 3e-5), spec, precision_bits=34)
    assert np.array_equal(values * 2**34, np.rint(values * 2**34))
    assert codec.from_pb(SumNoise, codec.to_pb(noise)) == noise
    with pytest.raises(ConfigError, match="max_rows bounds the rows a client sums"):
        SumNoise(l2_clip=1.0, noise_multiplier=1.0, expected_contributors=3, max_rows=2)
