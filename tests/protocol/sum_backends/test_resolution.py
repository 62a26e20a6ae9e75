"""A sum states the resolution it needs (SumSpec.resolution); each backend chooses its encoding
from it, so plans never scale values to suit the ring (issue 13, item 2)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from secure_fedgraph.crypto.fixed_point import FixedPoint
from secure_fedgraph.errors import CapacityError, SecureFedGraphError
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, MaskConfig, SecureSumConfig
from tests.helpers import config_for, defence_stops


def _small_gradients(n: int) -> dict[int, dict[str, np.ndarray]]:
    """Values like FedSTGD's dL/dS: far below the default fixed-point resolution (2^-20)."""
    rng = np.random.default_rng(0)
    return {c: {"g": rng.normal(0, 1e-7, 64)} for c in range(n)}


@pytest.mark.parametrize("backend", [Backend.MASK, Backend.PLAIN])
def test_a_stated_resolution_holds_where_the_default_precision_would_lose_the_values(backend):
    n, resolution = 5, 1e-12
    inputs = _small_gradients(n)
    exact = sum(v["g"] for v in inputs.values())
    session = local_session(config_for(backend), range(n))
    session.start_round()
    fine = session.secure_sum("fine", inputs, resolution=resolution)
    assert np.max(np.abs(fine.values["g"] - exact)) <= resolution
    assert fine.error_bound <= resolution
    if backend is Backend.MASK:
        coarse = session.secure_sum("coarse", inputs)  # the default 20 bits: errors of the values' own size
        assert np.max(np.abs(coarse.values["g"] - exact)) > 1e-7


def test_the_mask_encoding_takes_the_bits_the_resolution_needs():
    config = SecureSumConfig(backend=Backend.MASK).mask
    assert config.encoding(4, 10).precision_bits == 20
    assert config.encoding(4, 10, resolution=1e-12).precision_bits == FixedPoint.bits_for(4, 1e-12) == 41
    assert config.encoding(4, 10, resolution=1.0).precision_bits == 20  # never fewer than the configured bits


def test_a_range_and_resolution_the_ring_cannot_hold_are_refused_naming_the_sum():
    session = local_session(SecureSumConfig(backend=Backend.MASK), range(3))
    session.start_round()
    with pytest.raises(CapacityError, match="sum 'wide'"):
        session.secure_sum("wide", _small_gradients(3), clip_range=1e7, resolution=1e-12)


def test_ckks_refuses_a_resolution_finer_than_its_stated_error_bound():
    session = local_session(SecureSumConfig(backend=Backend.CKKS), range(3))
    session.start_round()
    with pytest.raises(CapacityError, match="sum 'fine' needs a resolution of 1e-12"):
        session.secure_sum("fine", _small_gradients(3), resolution=1e-12)


@dataclasses.dataclass(frozen=True)
class _UncheckedMask(MaskConfig):
    """The deviating server's encoding: the spec's range and resolution, no capacity check."""

    def encoding_of(self, spec, n_clients):
        try:
            return super().encoding_of(spec, n_clients)
        except CapacityError:  # an honest server stops here
            return FixedPoint(spec.clip_range, max(self.precision_bits, FixedPoint.bits_for(n_clients, spec.resolution)), 64)


def test_a_server_cannot_make_a_sum_wrap_by_announcing_a_fine_resolution(monkeypatch):
    """Deviating server: it announces a clip range and resolution whose sum overflows the ring
    (skipping its own check), so the aggregate would wrap to a wrong value. Defence: each
    client derives the encoding from the spec and refuses one that does not fit
    (FixedPoint.fits). Switched off, the ring wraps and the delivered sum is wrong."""
    n = 3
    inputs = {c: {"g": np.full(8, 9.0e6)} for c in range(n)}  # near the announced clip range

    def attack() -> bool:
        session = local_session(SecureSumConfig(backend=Backend.MASK), range(n))
        session.server.config = dataclasses.replace(session.server.config, mask=_UncheckedMask())
        session.start_round()
        try:
            session.secure_sum("wraps", inputs, clip_range=1e7, resolution=1e-12)
        except SecureFedGraphError:
            return False
        return bool(np.max(np.abs(session.clients[0].last_result.values["g"] - 3 * 9.0e6)) > 1.0)

    defence_stops(attack, monkeypatch, FixedPoint, "fits", lambda self, n_clients, count_lane_max=0: True)
