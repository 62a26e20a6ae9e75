"""Skellam noise from cryptographic randomness: the discrete noise of distributed DP.

Sk(mu) = Poisson(mu/2) - Poisson(mu/2) is an integer with mean 0 and variance mu, and a sum of
independent Skellams is Skellam with the summed variance (Agarwal, Kairouz and Liu, "The
Skellam Mechanism for Differentially Private Federated Learning", NeurIPS 2021; TensorFlow
Federated's ``DistributedDpSumFactory`` uses it by default). So clients that each add Sk(mu/n)
to their integer encodings before masking give the server a sum that carries exactly
Sk(mu * survivors / n): it never sees the sum without noise, and the noise it does see is
known exactly, whoever dropped.

Randomness: the uniforms come from AES-256-CTR keyed by 32 fresh bytes of ``os.urandom`` per
call, never from the run seed (which the server knows: noise it could regenerate would protect
nothing). Tests may pass ``key`` to make a draw reproducible.

Poisson variates: inversion of the CDF for lam < 10, and for lam >= 10 Hoermann's transformed
rejection with squeeze (PTRS, 1993: numpy's algorithm), vectorised, each rejection round
reading a new keystream. Its acceptance test uses log p(k) in Loader's deviance form
(-bd0(k, lam) - log(2 pi k) / 2 - stirlerr(k)), which keeps full precision at the variances a
20-bit fixed-point encoding gives (lam of 1e10 and more), where -lam + k log lam - lgamma(k+1)
would cancel away ten digits.
"""

from __future__ import annotations

import math
import os

import numpy as np
from scipy.special import gammaln

from secure_fedgraph.crypto.prg import mask_vector
from secure_fedgraph.errors import ConfigError

_SMALL = 10.0  # below: inversion; at and above: PTRS (as numpy)


class _Uniforms:
    """Uniform doubles in (0, 1) from AES-CTR: one keystream (stream id) per request."""

    def __init__(self, key: bytes) -> None:
        self.key, self.stream = key, 0

    def __call__(self, count: int) -> np.ndarray:
        bits = mask_vector(self.key, stream_id=self.stream, count=count, ring_bits=64)
        self.stream += 1
        return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # never 0 or 1


def _stirlerr(k: np.ndarray) -> np.ndarray:
    """lgamma(k + 1) - (k log k - k + log(2 pi k) / 2), for k >= 1."""
    k = np.asarray(k, dtype=np.float64)
    out = np.empty_like(k)
    small = k < 15
    ks = k[small]
    out[small] = gammaln(ks + 1) - (ks * np.log(ks) - ks + 0.5 * np.log(2 * math.pi * ks))
    kl = k[~small]
    inv, inv2 = 1.0 / kl, 1.0 / (kl * kl)
    out[~small] = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680 - inv2 / 1188))))
    return out


def _bd0(k: np.ndarray, lam: float) -> np.ndarray:
    """k log(k / lam) + lam - k, without cancellation when k is close to lam (Loader 2000)."""
    t = (np.asarray(k, dtype=np.float64) - lam) / lam
    phi = (1 + t) * np.log1p(t) - t
    near = np.abs(t) < 0.1
    if near.any():
        tn, series, power = t[near], np.zeros(int(near.sum())), t[near] ** 2
        for j in range(2, 40):  # (1+t) log(1+t) - t = sum_j>=2 (-1)^j t^j / (j (j-1)); |t| < 0.1: 40 terms exceed double precision
            series += (1 if j % 2 == 0 else -1) * power / (j * (j - 1))
            power = power * tn
        phi[near] = series
    return lam * phi


def log_poisson_pmf(k: np.ndarray, lam: float) -> np.ndarray:
    """log P(Poisson(lam) = k) for integers k >= 0, accurate for any lam > 0."""
    k = np.asarray(k, dtype=np.float64)
    out = np.full(k.shape, -float(lam))
    positive = k > 0
    kp = k[positive]
    out[positive] = -_bd0(kp, lam) - 0.5 * np.log(2 * math.pi * kp) - _stirlerr(kp)
    return out


def _poisson_inversion(lam: float, count: int, uniform: _Uniforms) -> np.ndarray:
    top = int(lam + 40 * math.sqrt(lam) + 40)  # P(Poisson(lam) > top) < 2^-100 for lam < 10
    cdf = np.cumsum(np.exp(log_poisson_pmf(np.arange(top + 1), lam)))
    return np.minimum(np.searchsorted(cdf, uniform(count) * cdf[-1], side="left"), top).astype(np.int64)


def _poisson_ptrs(lam: float, count: int, uniform: _Uniforms) -> np.ndarray:
    """Hoermann's PTRS, the constants as in numpy's ``random_poisson_ptrs``."""
    b = 0.931 + 2.53 * math.sqrt(lam)
    a = -0.059 + 0.02483 * b
    log_invalpha = math.log(1.1239 + 1.1328 / (b - 3.4))
    vr = 0.9277 - 3.6224 / (b - 2)
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:
        u = uniform(pending.size) - 0.5
        v = uniform(pending.size)
        us = 0.5 - np.abs(u)
        k = np.floor((2 * a / us + b) * u + lam + 0.43)
        accept = (us >= 0.07) & (v <= vr)
        test = ~accept & (k >= 0) & ~((us < 0.013) & (v > us))
        if test.any():
            lhs = np.log(v[test]) + log_invalpha - np.log(a / (us[test] * us[test]) + b)
            accept[test] = lhs <= log_poisson_pmf(k[test], lam)
        out[pending[accept]] = k[accept].astype(np.int64)
        pending = pending[~accept]
    return out


def poisson(lam: float, count: int, *, key: bytes | None = None) -> np.ndarray:
    """``count`` Poisson(lam) variates (int64) from AES-CTR keyed by ``key`` (default: fresh OS randomness)."""
    lam = float(lam)
    if not (math.isfinite(lam) and lam >= 0):
        raise ConfigError(f"Poisson rate must be a finite number >= 0, got {lam!r}")
    if lam == 0 or count == 0:
        return np.zeros(count, dtype=np.int64)
    uniform = _Uniforms(os.urandom(32) if key is None else key)
    return (_poisson_inversion if lam < _SMALL else _poisson_ptrs)(lam, count, uniform)


def skellam(variance: float, count: int, *, key: bytes | None = None) -> np.ndarray:
    """``count`` independent Sk(variance) integers: Poisson(variance/2) - Poisson(variance/2)."""
    both = poisson(variance / 2, 2 * count, key=key)
    return both[:count] - both[count:]


def skellam_tail(variance: float, count: int, *, security_bits: int = 40) -> int:
    """A bound u with P(max_i |X_i| > u) <= 2^-security_bits for ``count`` Sk(variance) values.

    Bernstein's inequality (a centred Poisson is a limit of sums of centred Bernoullis, so Sk is
    sub-exponential with variance proxy ``variance`` and scale 1): P(|X| >= u) <= 2 exp(-u^2 /
    (2 (variance + u/3))), with a union bound over the values."""
    if variance <= 0 or count <= 0:
        return 0
    log_budget = math.log(2 * count) + security_bits * math.log(2)
    third = log_budget / 3
    return math.ceil(third + math.sqrt(third * third + 2 * variance * log_budget))
