"""DP-SGD (Abadi et al., "Deep Learning with Differential Privacy", CCS 2016) for a client's
local training, through opacus' pieces: per-sample gradients from ``GradSampleModule``,
per-sample clipping and Gaussian noise from ``DPOptimizer``.

Each step draws a Poisson sample of the client's training samples (each with probability
``sample_rate``), clips every sample's gradient to L2 norm ``clip``, adds N(0, (sigma clip)^2)
to their sum and divides by the expected batch size: the subsampled Gaussian mechanism that
opacus' accountants price. Every step goes into the client's accountant through the optimiser's
step hook (as opacus' PrivacyEngine does), never counted by a plan.

Why not ``PrivacyEngine.make_private``: it wraps a DataLoader, and our plans draw batches
themselves (a per-client generator, the same in one process and across processes). Both the
sample and the noise come from the client's :class:`~.noise.NoiseSource` (AES-CTR keyed by
fresh OS randomness), not from the run seed: the server knows the seed, and a sample it could
regenerate voids the amplification by subsampling the accountant assumes, as noise it could
regenerate voids the noise. opacus' own ``secure_mode`` would want torchcsprng.

Models with ``nn.GRU`` or ``nn.GRUCell`` train on a twin with opacus' DPGRU and DPGRUCell
(whose per-sample gradients opacus computes), with the same parameter names; the trained values
are copied back. Models whose layers do not keep the batch first (FedRel's DIIG runs PyG layers
over the flattened nodes of all cases) get their per-sample gradients one sample at a time
(:meth:`DPSGD.loop_gradients`, ``per_sample="loop"``): exact, and cheap for small batches.
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from opacus import GradSampleModule
from opacus.layers.dp_rnn import DPGRUCell
from opacus.optimizers import DPOptimizer
from opacus.validators import ModuleValidator
from torch import nn

from secure_fedgraph.errors import ConfigError
from secure_fedgraph.privacy.accountant import Steps
from secure_fedgraph.privacy.mechanisms.noise import NoiseSource


# opacus' backward hooks fire on module outputs when the inputs (data) need no gradient, as here;
# torch warns about it on every first backward pass, which only clutters a client's output
warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed with respect to module outputs",
                        category=UserWarning)

_GRU_CELL_NAMES = {"ih.weight": "weight_ih", "hh.weight": "weight_hh", "ih.bias": "bias_ih", "hh.bias": "bias_hh"}  # same gates r, z, n


@dataclass
class Twin:
    """A copy of a model whose layers opacus computes per-sample gradients for (nn.GRU ->
    DPGRU, which keeps nn.GRU's parameter names; nn.GRUCell -> DPGRUCell, whose names
    ``names`` maps back: twin parameter name -> model parameter name)."""

    module: nn.Module
    names: dict[str, str]

    @classmethod
    def of(cls, model: nn.Module) -> Twin:
        twin = ModuleValidator.fix(copy.deepcopy(model))
        cells = []
        for name, module in list(twin.named_modules()):
            if isinstance(module, nn.GRUCell):
                parent, _, attribute = name.rpartition(".")
                setattr(twin.get_submodule(parent) if parent else twin, attribute, DPGRUCell(module.input_size, module.hidden_size, module.bias))
                cells.append(f"{name}.")
        names = {}
        for name, _ in twin.named_parameters():
            cell = next((c for c in cells if name.startswith(c)), None)
            names[name] = name if cell is None else cell + _GRU_CELL_NAMES[name[len(cell):]]
        if set(names.values()) != {n for n, _ in model.named_parameters()}:
            raise ConfigError(f"DP-SGD: {type(model).__name__} has layers opacus cannot compute per-sample gradients for")
        result = cls(twin, names)
        result.load_from(model)
        return result

    def load_from(self, model: nn.Module) -> None:
        values = dict(model.named_parameters())
        with torch.no_grad():
            for name, parameter in self.module.named_parameters():
                parameter.copy_(values[self.names[name]])

    def store_into(self, model: nn.Module) -> None:
        values = dict(model.named_parameters())
        with torch.no_grad():
            for name, parameter in self.module.named_parameters():
                values[self.names[name]].copy_(parameter)


class _ClientNoiseDPOptimizer(DPOptimizer):
    """opacus' DPOptimizer with its noise drawn from the mechanism's NoiseSource, labelled by
    the mechanism's step count (which goes on across rounds, so no two steps share a draw)."""

    def __init__(self, *args, mechanism: DPSGD, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.mechanism = mechanism

    def add_noise(self) -> None:
        std = self.noise_multiplier * self.max_grad_norm
        for index, p in enumerate(self.params):
            draws = self.mechanism.noise.normal(p.summed_grad.numel(), "dpsgd noise", self.mechanism.steps, index)
            p.grad = (p.summed_grad + torch.as_tensor(draws * std, dtype=p.summed_grad.dtype).view_as(p.summed_grad)).view_as(p)


@dataclass
class DPSGD:
    """One client's DP-SGD: noise multiplier ``sigma``, per-sample clip ``clip``, Poisson
    sampling at ``sample_rate``; ``noise`` is the client's source, ``record`` its accountant's
    entry point (called once per step).

    ``per_epoch``: the batches are not sampled but fixed and disjoint within an epoch (a plan
    whose clients must share one batch order, as FedSTGD's): each sample is in one step per
    epoch, so the steps of an epoch are one release at sample rate 1 (parallel composition),
    recorded by :meth:`end_epoch`. ``sensitivity``: one member's reach in the released noisy
    gradients, in clips (priced at ``sigma / sensitivity``; see ``privacy.Steps``)."""

    sigma: float
    clip: float
    sample_rate: float
    noise: NoiseSource = field(default_factory=NoiseSource, repr=False)
    record: Callable[[Steps], None] | None = field(default=None, repr=False)
    per_epoch: bool = False
    sensitivity: float = 1.0
    draws: int = 0  # Poisson samples drawn so far
    steps: int = 0  # noisy steps taken so far
    epoch_steps: int = 0  # per_epoch: steps since the last end_epoch

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise ConfigError(f"DP-SGD sigma must be a finite number > 0, got {self.sigma!r}")
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise ConfigError(f"DP-SGD clip must be a finite number > 0, got {self.clip!r}")
        if not 0 < self.sample_rate <= 1:
            raise ConfigError(f"DP-SGD sampling rate must be in (0, 1], got {self.sample_rate!r}")
        if self.per_epoch and self.sample_rate != 1:
            raise ConfigError(f"DP-SGD over fixed batches releases each sample once per epoch: sample rate 1, got {self.sample_rate!r}")
        if not (math.isfinite(self.sensitivity) and self.sensitivity >= 1):
            raise ConfigError(f"DP-SGD sensitivity is at least one clip, got {self.sensitivity!r}")

    def steps_per_epoch(self) -> int:
        """Steps that visit each sample once in expectation (opacus' 1 / q)."""
        return max(1, round(1 / self.sample_rate))

    def sample(self, samples: int) -> np.ndarray:
        """One Poisson sample: the indices of ``samples`` each drawn with probability q."""
        uniform = self.noise.uniform(samples, "dpsgd sample", self.draws)
        self.draws += 1
        return np.flatnonzero(uniform < self.sample_rate)

    @contextlib.contextmanager
    def training(self, model: nn.Module, optimiser: Callable[[Iterator[nn.Parameter]], torch.optim.Optimizer], *, samples: int,
                 per_sample: str = "hooks"):
        """Yields (module, optimiser) to train ``model`` on ``samples`` training samples with
        batches from :meth:`sample`, and ``optimiser(parameters)`` wrapped in the DP optimiser
        (which divides by the expected batch, q * samples).

        ``per_sample="hooks"``: ``module`` is a per-sample twin wrapped in GradSampleModule; train
        it on the mean loss of the batch; on exit ``model`` holds the trained values.
        ``"loop"``: ``module`` is ``model`` itself; fill the gradients with :meth:`loop_gradients`.
        """
        if per_sample not in ("hooks", "loop"):
            raise ConfigError(f"per_sample must be 'hooks' or 'loop', got {per_sample!r}")
        twin = Twin.of(model) if per_sample == "hooks" else None
        module = GradSampleModule(twin.module, loss_reduction="mean") if twin is not None else model
        dp = _ClientNoiseDPOptimizer(optimiser(module.parameters()), noise_multiplier=self.sigma, max_grad_norm=self.clip,
                                     expected_batch_size=max(1, round(self.sample_rate * samples)), loss_reduction="mean", mechanism=self)
        dp.attach_step_hook(lambda _: self._stepped())
        try:
            yield module, dp
        finally:
            if twin is not None:
                twin.store_into(model)
                module._close()

    @staticmethod
    def loop_gradients(module: nn.Module, loss_of: Callable[[int], torch.Tensor], batch: np.ndarray) -> None:
        """Each sample's own gradient, one backward pass per sample, into ``p.grad_sample``
        (what the DP optimiser clips): ``loss_of(i)`` is sample i's loss."""
        parameters = [p for p in module.parameters() if p.requires_grad]
        per_sample: list[list[torch.Tensor]] = [[] for _ in parameters]
        for i in batch:
            grads = torch.autograd.grad(loss_of(int(i)), parameters, allow_unused=True)
            for k, (p, g) in enumerate(zip(parameters, grads, strict=True)):
                per_sample[k].append(torch.zeros_like(p) if g is None else g.detach())
        for p, grads in zip(parameters, per_sample, strict=True):
            p.grad_sample = torch.stack(grads) if grads else torch.zeros((0, *p.shape), dtype=p.dtype)

    def _stepped(self) -> None:
        """The optimiser's step hook: one noisy step went into the model; the accountant hears of
        it (``per_epoch``: at :meth:`end_epoch`)."""
        self.steps += 1
        if self.per_epoch:
            self.epoch_steps += 1
        elif self.record is not None:
            self.record(Steps(self.sigma, self.sample_rate, 1, self.sensitivity))

    def end_epoch(self) -> None:
        """``per_epoch``: the epoch's disjoint batches are done; if any step was taken, one
        release of every sample goes to the accountant (an abandoned batch only releases less)."""
        if not self.per_epoch:
            raise ConfigError("end_epoch is for DP-SGD over fixed disjoint batches (per_epoch=True)")
        if self.epoch_steps and self.record is not None:
            self.record(Steps(self.sigma, 1.0, 1, self.sensitivity))
        self.epoch_steps = 0

    @staticmethod
    def empty_step(module: nn.Module, optimiser: DPOptimizer) -> None:
        """A step on an empty Poisson sample: noise only (the accountant counts it too)."""
        for p in module.parameters():
            if p.requires_grad:
                p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype)
        optimiser.step()
