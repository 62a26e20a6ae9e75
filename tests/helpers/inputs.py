"""Seeded inputs of several shapes, plaintext reference sums and how close a result is to
one, and the secure-sum configs the tests use."""

from __future__ import annotations

import numpy as np

from secure_fedgraph.protocol.sum_backends import Adversary, Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig

SHAPES = {"weight": (3, 4), "bias": (7,), "cube": (2, 2, 2)}


def make_inputs(clients, *, seed: int = 0, scale: float = 1.0, shapes=SHAPES, dtype=np.float64):
    """Seeded random tensors of several shapes, one dict per client."""
    rng = np.random.default_rng(seed)
    return {c: {k: (rng.uniform(-scale, scale, s)).astype(dtype) for k, s in shapes.items()} for c in clients}


def plain_sum(inputs, contributors, *, clip_range: float | None = None):
    """The float64 reference sum over ``contributors`` (of the clipped inputs, if a range is given)."""
    names = next(iter(inputs.values())).keys()
    out = {}
    for k in names:
        parts = [np.asarray(inputs[c][k], dtype=np.float64) for c in sorted(contributors)]
        if clip_range is not None:
            parts = [np.clip(p, -clip_range, clip_range) for p in parts]
        out[k] = np.sum(parts, axis=0)
    return out


def max_error(values, reference) -> float:
    return max(float(np.abs(values[k] - reference[k]).max()) for k in reference)


def close(guess: np.ndarray, truth: np.ndarray) -> bool:
    """Whether an attacker's ``guess`` of an input is ``truth`` (to 1e-4): the attack recovered it."""
    return bool(np.allclose(guess, truth, atol=1e-4))


def config_for(backend: Backend, **mask_kwargs) -> SecureSumConfig:
    return SecureSumConfig(backend=backend, mask=MaskConfig(**mask_kwargs), ckks=CkksConfig())


# No colluding clients assumed (the server may still deviate): the bounds then allow small sparse
# graphs, so tests of the sparse graph's mechanics stay small and fast. Never a default.
NO_COLLUDERS = Adversary(corrupt_fraction=0.0, dropout_fraction=0.05)


def sparse_config(degree: int, **mask_kwargs) -> SecureSumConfig:
    """A sparse graph of a small explicit degree, valid under NO_COLLUDERS."""
    return SecureSumConfig(backend=Backend.MASK, mask=MaskConfig(graph=GraphKind.SPARSE, degree=degree, adversary=NO_COLLUDERS, **mask_kwargs))
