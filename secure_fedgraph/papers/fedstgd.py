"""FedSTGD (Wang et al., AAAI 2026), Algorithm 1, as a protocol: M clients each hold a block of
the dataset's nodes (HZMetro's 80 stations by default; any graph series, ``dataset``); the
cross-client graph term is computed through secure sums, forward and backward. Node counts,
slots per day, channels and days come from the data (data/sources.py: layout_of).

Algorithm (numbers match the comments in the code):
  0. Set-up: each client contributes the sum, sum of squares and count of its training inputs;
     the secure sum gives TGCRN's single z-score. The server initialises the global
     parameters Θ and E_τ (seeded) and broadcasts them; every client draws its private E_v.
  Each global round r_g (Algorithm 1, lines 8-14):
  1. R_l local epochs over the training windows in batches, in one order shared by every
     client (the run seed and the epoch; otherwise the summed terms would mix windows). Per
     batch, at every GRU step t and k in {1, 2}, every client sends P_kj and Q_kj (eqs. 22,
     23, step 1) to one secure sum and uses the sums (step 3) in eqs. 13 to 16. If a client
     drops during one of the batch's sums, the sum is abandoned (its inputs are never masked
     again, threat_model.md M-STREAM) and so is the batch: no client steps on it, and the
     survivors go on with the next batch.
  2. Backward, with ``gradients="exact"``: for the same sums in reverse order every client
     sends dL_i/dS; the sum G is the gradient of the total loss with respect to each
     client's contribution (training/sum_tape.py). With "detached", G is not computed (the
     gradient reaches a client's own contribution only through its own use of S, as in
     FedGTP's socket deployment). Every client steps its Adam (L2 ``weight_decay``).
  3. FedAvg: a secure sum of Θ and E_τ; every client loads sum / contributors (unweighted);
     E_v stays private.
  4. Validation: the forward sums over the validation windows, then a secure sum of each
     client's masked error sums; only the pooled RMSE, MAE and MAPE are released.
  5. After the last round: the same for the test windows.

Ablations (Table 3): ``gnea=False`` uses E_v itself in Γ ("w/o GNEA"); ``inter_client=False``
sums each client's own terms only, with no P/Q secure sum ("w/o -,All": every client alone,
with FedAvg); ``adjacency="off"`` drops the graph term ("w/o All,All"). The centralised
upper bound is this same plan with ``clients=1`` (``one_party``): one party holding every
station, run by the same in-process runner with every sum its own value
(``secure_fedgraph.runs.simulate.simulate_one_party``; ``secure-fedgraph run fedstgd --clients 1``).
With ``adjacency="exact"`` its graph is TGCRN's eq. 5, with no decomposition.

DP-SGD (``dpsgd_sigma`` > 0; beyond the paper). The clients must share one batch order (the
sums pair windows across clients), so batches are not Poisson samples: each epoch's batches are
fixed and disjoint, every window is in one step per epoch, and an epoch is one release of each
window at sample rate 1 (parallel composition). A window's gradient is computed per window
through the sum tape (training/sum_tape.py per_sample_gradients), clipped to ``dpsgd_clip`` and
noised (opacus' DPOptimizer). The unit is one window of one client's stations, and neighbours
replace one window by another. Without noise in the sums the window reaches every client's
gradient through the P/Q sums, and replacing it moves each client's clipped window gradient by up
to 2 clips: 2 sqrt(M) clips over the M clients' noisy gradients together (2 without cross-client
sums), the ``sensitivity`` the accountant prices ``dpsgd_sigma`` at. That epsilon covers what is
computed from the noisy gradients (the FedAvg sums, every model) but not the P/Q sums and their
gradient sums, the normalisation sum and the error sums, which the server then sees without
noise (ST-SUMS). ``sync="batch"`` with DP-SGD is not offered.

One guarantee for everything (``ddp_noise`` > 0, with DP-SGD; papers/fedstgd_dp.py, the noise,
and papers/fedstgd_budget.py, the account; threat_model.md ST-DDP). Every sum that carries the
windows is noised by the clients inside the secure sum (the Skellam mechanism of
protocol/sum_backends/ddp_noise.py, written once): each client clips every window's part of its
contribution to the sum's bound C and adds its share of noise of standard deviation z C
(``ddp_noise`` z), so the sum carries it whatever the server does, and no sum is released
without it. Replacing one window of one client changes, in its client's contribution only:
  - each P/Q sum of its batch: its row (P_kj[b], Q_kj[b]), clipped to C = ``ddp_clip``: by at most 2C
    in L2 (the other clients' rows depend on it only through sums released before, with their
    noise: adaptive composition);
  - each gradient sum of its batch (exact gradients): its row of dL_i/dS, clipped to
    C = ``ddp_gradient_clip``: 2C, on a grid fine enough that rounding adds at most 1%;
  - the normalisation sum: its row (the sum and the sum of squares of its readings, each
    clipped to [-V, V], V = ``ddp_reading_clip``, in units of n V and n V^2 for the n readings of
    the largest client's window): 2 sqrt(2);
  - the validation or test error sum: its row (squared, absolute and percentage errors and count,
    in units of the normalisation's sigma, each capped: E = ``ddp_error_clip``): 2 (E^2 + 1);
  - its client's DP-SGD step: 2 clips (the other clients' gradients see the window only through
    the noised sums, so ``dpsgd_sensitivity`` is 2 whatever M is).
Each sum's rounding to its grid adds up to sqrt(d) to the 2C (d: a row's values). Releases per
window (fedstgd_budget.releases_per_window): a training window sits in one batch per epoch,
whose 2(steps_in + steps_out) P/Q sums and as many gradient sums each release it once, in one
DP-SGD step per epoch and in the normalisation sum once; a validation window in every round's
evaluation P/Q sums and validation error sum; a test window in the test's once. Everything else
is post-processing of these: each client's model is its data through its noisy DP-SGD steps and
the noised sums, so the FedAvg sums need no noise of their own. The run reports one epsilon, the
largest over windows and clients of their releases composed (Skellam RDP for the sums, Gaussian
RDP for DP-SGD, added order by order), from RDP and PRV, at ``dp_delta``.

The server sees only sums: of P/Q, of their gradients, of weights and of error statistics.
Model choices the paper leaves open are listed in models/fedstgd.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from secure_fedgraph import privacy
from secure_fedgraph.data.graph_series import SeriesLayout, day_split
from secure_fedgraph.data.hzmetro import MetroSplits, ZScore, metro_windows, partition_stations
from secure_fedgraph.data.sources import known_layout, layout_of, load_series, node_count
from secure_fedgraph.errors import ConfigError, SumAbandoned
from secure_fedgraph.models.fedstgd import ADJACENCIES, FedSTGDModel, ModelShape, slots_of
from secure_fedgraph.papers import local_dp
from secure_fedgraph.papers import fedstgd_budget, fedstgd_dp
from secure_fedgraph.papers.dp_options import DPSGDOptions, WindowDDPOptions
from secure_fedgraph.papers.fedstgd_dp import ERRORS
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.validation import positive, positive_number
from secure_fedgraph.papers.error_totals import errors_spec, released_errors, report_errors
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.core.spec import SumNoise, SumSpec, TensorSpec
from secure_fedgraph.training.forecasting import load_weights
from secure_fedgraph.training.metrics import masked_error_sums, pooled_errors
from secure_fedgraph.training.sum_tape import SumTape

GRADIENTS = ("exact", "detached")
NORMALISATION = SumSpec("normalisation", (TensorSpec("sum", (1,)), TensorSpec("sum_sq", (1,)), TensorSpec("count", (1,))), clip_range=1e12)
SYNCS = ("round", "batch")
GLOBAL_GRADIENT = "global-grad"
GLOBAL_GRADIENT_CLIP = 1e7  # sync="batch": the global parameters' gradients of the pooled loss, with a wide margin
GRADIENT_RESOLUTION = 1e-10  # the gradient sums carry dL/dS of a mean over ~1e4 loss terms: values of 1e-6 and below


@dataclass(frozen=True)
class FedSTGDConfig(DPSGDOptions, WindowDDPOptions):
    """Options of the fedstgd plan (``--set KEY=VALUE``); defaults are the paper's.

    Attributes:
        dataset: the graph series the clients read: a name (hzmetro, nycbike1, metr-la,
            pems-bay) or a graph-series folder (data/sources.py; ``--dataset``).
        clients: M, the number of clients; client i holds the i-th contiguous block of the
            dataset's nodes (data/hzmetro.py: partition_stations).
        steps_in, steps_out: input and output window lengths (the paper's 4 and 4).
        rounds: global rounds R_g.
        local_epochs: local epochs R_l per round.
        sync: "round" (Algorithm 1: each client takes Adam steps on its own copy of the
            global parameters, FedAvg after every round) or "batch" (beyond the paper: after
            every batch the global parameters' gradients go through one more secure sum and
            every client takes the same Adam step on the pooled gradient, so the clients train
            one model, as the one-party decomposed run does; no FedAvg is needed).
        gradients: "exact" (a second secure sum per P/Q sum) or "detached".
        gnea: graph node embedding augmentation (eqs. 19-20); False is "w/o GNEA".
        inter_client: P/Q sums over all clients; False is "w/o -,All" (each client alone).
        adjacency: "decomposed" (eq. 21), "exact" (TGCRN's eq. 5 graph, needing every
            station in one model: the centralised upper bound, ``clients=1``) or "off" (no
            graph term: Table 3's "w/o All,All", each client's GRU alone, with FedAvg).
        batch_size: training windows per batch (16).
        eval_batch_size: windows per batch in validation and test.
        lr, weight_decay: Adam's learning rate and L2 penalty (1e-3, 1e-4).
        lr_decay, milestones: the learning rate is multiplied by ``lr_decay`` at these epochs.
        hidden, node_dim, time_dim, embed_rank: GRU units, d_N, d_T and the rank of the
            node-time embedding that generates TGCRN's adaptive weights.
        train_days, val_days, test_days: chronological split of the dataset's complete days
            (None: from the data's own splits, else 70/10/20%: HZMetro's 7 days give 5/1/1).
        max_windows: keep only the first windows of each split (small test runs).
        forward_clip, gradient_clip: clipping ranges of the P/Q sums and of their gradient
            sums (dL/dS, in its own units); the gradient sums also state the resolution they
            need (GRADIENT_RESOLUTION), and the backend chooses an encoding that holds both.
        dpsgd_sigma, dpsgd_clip, dp_delta: DP-SGD over the fixed batches, per window (0: plain
            Adam; see the module docstring), the per-window L2 clip, and the delta epsilon is
            reported at (with ``ddp_noise`` too: the run's one epsilon).
        ddp_noise: distributed DP noise multiplier z of every sum of the windows (0: off, the
            default; > 0 needs ``dpsgd_sigma`` > 0 and more than one client): P/Q, their
            gradients, the normalisation and the error statistics (module docstring; papers/fedstgd_dp.py).
        ddp_clip: L2 bound on one window's row of a P/Q sum (20: about the 90th percentile of
            the rows of HZMetro's 4 clients at the paper's sizes).
        ddp_gradient_clip: L2 bound on one window's row of a gradient sum (1e-4).
        ddp_reading_clip: the largest reading the normalisation counts, in the data's units
            (2000: 99.85% of HZMetro's training readings, passengers per 15 minutes, are below it;
            set it for other data).
        ddp_error_clip: E, the cap of one evaluation window's RMSE and MAE, in units of the
            normalisation's standard deviation, and of its MAPE, as a fraction (2), so its row of
            error statistics lies within E^2 + 1.
        seed: run seed (global initialisation, private embeddings, batch order).
    """

    dataset: str = "hzmetro"
    clients: int = 4
    steps_in: int = 4
    steps_out: int = 4
    rounds: int = 3
    local_epochs: int = 1
    sync: str = "round"
    gradients: str = "exact"
    gnea: bool = True
    inter_client: bool = True
    adjacency: str = "decomposed"
    batch_size: int = 16
    eval_batch_size: int = 66
    lr: float = 1e-3
    weight_decay: float = 1e-4
    lr_decay: float = 0.3
    milestones: tuple[int, ...] = (5, 20, 40, 70, 90)
    hidden: int = 64
    node_dim: int = 64
    time_dim: int = 64
    embed_rank: int = 8
    train_days: int | None = None
    val_days: int | None = None
    test_days: int | None = None
    max_windows: int | None = None
    forward_clip: float = 1e4
    gradient_clip: float = 100.0
    seed: int = 0

    def __post_init__(self) -> None:
        positive("clients", self.clients)
        if self.clients > node_count(self.dataset):
            raise ConfigError(f"clients must be at most the {node_count(self.dataset)} stations of {self.dataset}, got {self.clients}")
        for name in ("rounds", "local_epochs", "batch_size", "eval_batch_size", "hidden", "node_dim", "time_dim", "embed_rank", "steps_in",
                     "steps_out"):
            positive(name, getattr(self, name))
        for name in ("max_windows", "train_days", "val_days", "test_days"):
            positive(name, getattr(self, name), optional=True)
        known = self.known_layout()
        if known is not None:
            self.days(known)  # the day split adds up
        if self.adjacency not in ADJACENCIES:
            raise ConfigError(f"adjacency must be one of {ADJACENCIES}, got {self.adjacency!r}")
        if self.adjacency == "exact" and self.clients != 1:
            raise ConfigError(f"adjacency='exact' is the centralised model: it needs clients=1, got {self.clients}")
        if self.sync not in SYNCS:
            raise ConfigError(f"sync must be one of {SYNCS}, got {self.sync!r}")
        if self.gradients not in GRADIENTS:
            raise ConfigError(f"gradients must be one of {GRADIENTS}, got {self.gradients!r}")
        for name in ("gnea", "inter_client"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("lr", "lr_decay", "forward_clip", "gradient_clip"):
            positive_number(name, getattr(self, name))
        positive_number("weight_decay", self.weight_decay, zero_ok=True)
        milestones = tuple(self.milestones) if isinstance(self.milestones, list | tuple) else self.milestones
        if not isinstance(milestones, tuple) or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in milestones):
            raise ConfigError(f"milestones must be a list of epochs >= 1, got {self.milestones!r}")
        object.__setattr__(self, "milestones", milestones)
        super().__post_init__()  # dpsgd_sigma, dpsgd_clip, dp_delta, ddp_noise and its bounds
        if self.dpsgd_sigma and self.sync == "batch":
            raise ConfigError("dpsgd_sigma needs sync='round': with sync='batch' every client steps on the pooled gradient, which "
                              "is not a sum of noised per-window gradients")
        if self.ddp_noise and not self.dpsgd_sigma:
            raise ConfigError(f"ddp_noise={self.ddp_noise:g} needs dpsgd_sigma > 0 (e.g. --set dpsgd_sigma={self.ddp_noise:g}): without "
                              "DP-SGD each client's model, which the FedAvg sum and every later P/Q row carry, holds its windows' "
                              "gradients without noise")
        if self.ddp_noise and self.clients == 1:
            raise ConfigError("ddp_noise noises the clients' secure sums; the one-party run (clients=1) makes none")

    @property
    def dpsgd_sensitivity(self) -> float:
        """Clips one window of one client moves the clients' noisy gradients by (module docstring):
        with distributed DP the others' gradients see the window only through noised sums."""
        return 2 * math.sqrt(self.clients) if self.cross_client and not self.ddp_noise else 2.0

    @property
    def cross_client(self) -> bool:
        """Whether P/Q go through secure sums (not "w/o -,All", and more than one client)."""
        return self.inter_client and self.clients > 1 and self.adjacency == "decomposed"

    def known_layout(self) -> SeriesLayout | None:
        """The dataset's sizes where they are known without a data directory (a pinned named
        dataset or a folder; data/sources.py), else None (the run reads them with its data)."""
        return known_layout(self.dataset)

    def layout(self, layout: SeriesLayout | None = None) -> SeriesLayout:
        """``layout``, or the dataset's as :meth:`known_layout` finds it."""
        found = layout or self.known_layout()
        if found is None:
            raise ConfigError(f"dataset {self.dataset!r}: its sizes are read with its data (pass the run's layout)")
        return found

    def days(self, layout: SeriesLayout | None = None) -> tuple[int, int, int]:
        """Train, val and test days of the chronological split."""
        found = self.layout(layout)
        return day_split(found.days, (self.train_days, self.val_days, self.test_days), found.splits)

    def shape_for(self, layout: SeriesLayout | None = None) -> ModelShape:
        """The model's sizes for the dataset's channels and slots per day."""
        found = self.layout(layout)
        return ModelShape(hidden=self.hidden, node_dim=self.node_dim, time_dim=self.time_dim, embed_rank=self.embed_rank, gnea=self.gnea,
                          channels=found.channels, steps_in=self.steps_in, steps_out=self.steps_out, slots_per_day=found.steps_per_day)

    @property
    def shape(self) -> ModelShape:
        return self.shape_for()

    def windows(self, split: str, layout: SeriesLayout | None = None) -> int:
        """Windows in a split: per day, slots - steps_in - steps_out + 1 (66 for HZMetro: never across days), capped."""
        found = self.layout(layout)
        days = dict(zip(("train", "val", "test"), self.days(found), strict=True))[split]
        count = days * (found.steps_per_day - self.steps_in - self.steps_out + 1)
        return count if self.max_windows is None else min(count, self.max_windows)

    def batches(self, split: str, layout: SeriesLayout | None = None) -> list[int]:
        """The size of every batch of a split (the last may be smaller)."""
        size = self.batch_size if split == "train" else self.eval_batch_size
        count = self.windows(split, layout)
        return [min(size, count - start) for start in range(0, count, size)]


class FedSTGDSums:
    """The secure sums of a FedSTGD run as the server asks for them, and what they cost per
    batch: one P/Q sum per GRU step and k (eqs. 22-23), the same again for their gradients
    with exact gradients, and with ``sync="batch"`` the pooled global gradient."""

    def __init__(self, config: FedSTGDConfig, layout: SeriesLayout | None = None) -> None:
        self.config = config
        self.shape = config.shape_for(layout)

    def forward(self, index: int, batch: int, noise: SumNoise | None = None) -> SumSpec:
        """P_kj and Q_kj of sum ``index`` for a batch of ``batch`` windows (with distributed DP,
        ``noise`` per window instead of a clipping range)."""
        if noise is not None:
            return self._pq("pq", index, batch, noise=noise)
        return self._pq("pq", index, batch, clip_range=self.config.forward_clip)

    def gradient(self, index: int, batch: int, noise: SumNoise | None = None) -> SumSpec:
        """dL_i/dS of sum ``index``: values far below the default fixed-point resolution (with
        distributed DP, ``noise`` per window on a grid as fine as it states)."""
        if noise is not None:
            return self._pq("pq-grad", index, batch, noise=noise)
        return self._pq("pq-grad", index, batch, clip_range=self.config.gradient_clip, resolution=GRADIENT_RESOLUTION)

    def global_gradient(self, global_weights: dict[str, np.ndarray]) -> SumSpec:
        """``sync="batch"``: the global parameters' gradients, summed after every batch."""
        return SumSpec.of(GLOBAL_GRADIENT, global_weights, clip_range=GLOBAL_GRADIENT_CLIP, resolution=GRADIENT_RESOLUTION, streaming=True)

    def batch(self, size: int, *, training: bool, synced: SumSpec | None = None,
              noise: Callable[[str], SumNoise | None] | None = None) -> list[SumSpec]:
        """The sums of one batch of ``size`` windows, in the order the server asks for them: the
        P/Q sums, their gradients in reverse with exact gradients (training), then ``synced``
        (the global gradient with ``sync="batch"``). ``noise``: each sum's distributed DP, by
        name ("pq", "pq-grad"; papers/fedstgd_dp.py: window_noise)."""
        c = self.config
        noise = noise or (lambda name: None)
        specs = []
        if c.cross_client:
            specs += [self.forward(index, size, noise("pq")) for index in range(self.shape.n_sums)]
            if training and c.gradients == "exact":
                specs += [self.gradient(index, size, noise("pq-grad")) for index in reversed(range(self.shape.n_sums))]
        return specs + ([] if synced is None else [synced])

    def per_batch(self, *, training: bool = True) -> int:
        """Secure sums per batch: one per GRU step and k, twice with exact gradients, and the
        global gradient sum with ``sync="batch"``."""
        c = self.config
        synced = int(training and c.sync == "batch")
        if not c.cross_client:
            return synced
        return self.shape.n_sums * (2 if training and c.gradients == "exact" else 1) + synced

    def elements_per_batch(self) -> int:
        """Elements each client uploads per full training batch through the P/Q sums."""
        c = self.config
        if not c.cross_client:
            return 0
        forward = sum(self.forward(i, c.batch_size).size for i in range(self.shape.n_sums))
        return forward * (2 if c.gradients == "exact" else 1)

    def _pq(self, name: str, index: int, batch: int, **precision: Any) -> SumSpec:
        # streaming: 32 sums per batch, each awaited by the next step (mask's streaming variant, M-STREAM)
        shapes = tuple(TensorSpec(k, v) for k, v in self.shape.sum_shapes(index, batch).items())
        return SumSpec(name, shapes, streaming=True, **precision)


@functools.lru_cache(maxsize=2)
def _splits(dataset: str, data_dir: str | None, days: tuple[int, int, int], steps_in: int, steps_out: int) -> MetroSplits:
    train, val, test = days
    return metro_windows(load_series(dataset, data_dir).daily(), train_days=train, val_days=val, test_days=test, steps_in=steps_in,
                         steps_out=steps_out)


@dataclass(frozen=True)
class ClientData:
    """What one client reads: the raw windows of its own stations (passenger counts), and the
    dataset's public sizes."""

    stations: np.ndarray
    splits: MetroSplits
    layout: SeriesLayout | None = None


def client_model(config: FedSTGDConfig, client_id: int, n_stations: int, global_weights: dict[str, Any],
                 layout: SeriesLayout | None = None) -> FedSTGDModel:
    """Client ``client_id``'s model: the broadcast global parameters and its own private E_v."""
    model = FedSTGDModel(config.shape_for(layout), n_stations, config.layout(layout).nodes, adjacency=config.adjacency)
    model.reset_private(torch.Generator().manual_seed(derive_seed(config.seed, "client", client_id, "node embedding")))
    load_weights_global(model, global_weights)
    return model


def initial_weights(config: FedSTGDConfig, layout: SeriesLayout | None = None) -> dict[str, np.ndarray]:
    """Θ and E_τ as the server initialises them (seeded; Algorithm 1, line 5)."""
    model = FedSTGDModel(config.shape_for(layout), 1, config.layout(layout).nodes)  # E_v is not global: its size is irrelevant here
    model.reset_parameters(torch.Generator().manual_seed(derive_seed(config.seed, "server", "initial model")))
    return {k: v.numpy() for k, v in model.global_state().items()}


def batch_order(config: FedSTGDConfig, epoch: int, layout: SeriesLayout | None = None) -> np.ndarray:
    """The training windows' order in ``epoch``: one order for every client (shared seed)."""
    return np.random.default_rng(derive_seed(config.seed, "batch order", epoch)).permutation(config.windows("train", layout))


def window_batch(windows, indices: np.ndarray) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """x (normalised, tensor), y (counts, numpy) and time slots of the windows ``indices``."""
    x = torch.as_tensor(windows.x[indices], dtype=torch.float32)
    return x, windows.y[indices], slots_of(windows.x_slot[indices], windows.y_slot[indices])


def loss_terms(target: np.ndarray, n_total: int) -> int:
    """The number of terms in a batch's pooled loss: windows x steps x all ``n_total`` stations x channels."""
    return target.shape[0] * target.shape[1] * n_total * target.shape[3]


def l1_loss(prediction: torch.Tensor, target: np.ndarray, scaler: ZScore, *, n_total: int, per_window: bool = False) -> torch.Tensor:
    """This client's share of TGCRN's L1 loss on de-normalised values: its absolute errors over
    the number of loss terms of all clients, so the clients' losses add up to the pooled mean
    (``per_window``: one share per window, (B,), which add up to it)."""
    mean = torch.as_tensor(scaler.mean, dtype=prediction.dtype)
    std = torch.as_tensor(scaler.std, dtype=prediction.dtype)
    errors = (prediction * std + mean - torch.as_tensor(target, dtype=prediction.dtype)).abs()
    return (errors.flatten(1).sum(1) if per_window else errors.sum()) / loss_terms(target, n_total)


class FedSTGD(Plan):
    name = "fedstgd"
    Config = FedSTGDConfig
    clients_field: ClassVar[str] = "clients"
    one_party = True  # clients=1 is Table 3's centralised upper bound
    ddp_composes_dpsgd = True  # with ddp_noise its one epsilon composes the noised sums and the DP-SGD steps
    dpsgd_unit = privacy.Unit(privacy.UnitKind.ROW, "one window (4 input and 4 output steps) of one client's stations")

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> FedSTGD:
        """This plan with ``dpsgd_sigma`` calibrated: one release of every window per epoch
        (rounds x local_epochs), at rate 1, priced at sigma / the sensitivity."""
        c = self.config
        if option not in (None, "dpsgd_sigma"):
            raise ConfigError(f"plan {self.name} calibrates dpsgd_sigma, not {option!r}")
        if c.ddp_noise:
            raise ConfigError("a target epsilon calibrates dpsgd_sigma alone; with ddp_noise the run's epsilon also depends on the "
                              "clients that survive each sum: set dpsgd_sigma and ddp_noise (sweep fedstgd --sigmas)")
        sigma = local_dp.calibrated_sigma(c, target_epsilon, rate=1.0, steps=c.rounds * c.local_epochs)
        return FedSTGD(dataclasses.replace(c, dpsgd_sigma=sigma * c.dpsgd_sensitivity))

    def client_ids(self) -> list[int]:
        return list(range(self.config.clients))

    def noised_sums(self) -> dict[str, float]:
        """With distributed DP: every sum of the windows, at its bound (papers/fedstgd_dp.py);
        FedAvg's sums carry none of their own (post-processing of the DP-SGD steps)."""
        c = self.config
        if not c.ddp_noise:
            return {}
        return {"pq": c.ddp_clip, "pq-grad": c.ddp_gradient_clip, NORMALISATION.name: fedstgd_dp.ROW_BOUND,
                "validation": fedstgd_dp.error_bound(c), "test": fedstgd_dp.error_bound(c)}

    def noise_account(self, sums: list, steps: dict, *, clients: list[int], **terms: Any) -> dict | None:
        """The run's one epsilon, recomputed (papers/fedstgd_budget.py)."""
        if not self.config.ddp_noise:
            return None
        return fedstgd_budget.report(sums, steps, self.config, clients=clients, unit=self.dpsgd_unit.description, delta=self.config.dp_delta,
                                     **terms)

    def load_server_data(self, data_dir: str | os.PathLike | None) -> SeriesLayout:
        """The dataset's public sizes (nodes, channels, slots per day, days), never its readings."""
        layout = layout_of(self.config.dataset, data_dir)
        self.config.days(layout)  # ConfigError now, not mid-run, if the day split does not add up
        return layout

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> ClientData:
        c = self.config
        layout = self.load_server_data(data_dir)
        stations = partition_stations(c.clients, layout.nodes)[client_id]
        splits = _splits(c.dataset, None if data_dir is None else str(data_dir), c.days(layout), c.steps_in, c.steps_out)
        if c.max_windows is not None:
            cap = c.max_windows
            splits = MetroSplits(*(dataclasses.replace(w, x=w.x[:cap], y=w.y[:cap], x_time=w.x_time[:cap], y_time=w.y_time[:cap])
                                   for w in (splits.train, splits.val, splits.test)))
        return ClientData(stations, splits.stations(stations), layout)

    # -- server (Algorithm 1: the server only starts sums and releases error totals) ------------

    def server(self, ctx: ServerContext):
        c = self.config
        layout: SeriesLayout = ctx.data
        sums = FedSTGDSums(c, layout)
        global_weights = initial_weights(c, layout)
        with ctx.phase("set-up"):
            yield from ctx.start_round(0)
            moments = yield from ctx.secure_sum(self._normalisation(ctx, layout))  # 0.
            scaler = fedstgd_dp.scaler_from_moments(moments.values, c, layout) if c.ddp_noise else None  # to decode the error rows
            yield from ctx.broadcast("model", global_weights)  # line 5: Θ and E_τ
        history, batches = [], 0
        synced = sums.global_gradient(global_weights) if c.sync == "batch" else None
        for r in range(c.rounds):
            if r:
                with ctx.phase("set-up"):
                    yield from ctx.start_round(r)
            with ctx.phase("training"):
                for _ in range(c.local_epochs):
                    for size in c.batches("train", layout):  # 1.-2.
                        batches += yield from self._server_batch(ctx, sums, size, training=True, synced=synced)
            if c.sync == "round":
                with ctx.phase("fedavg"):
                    try:
                        yield from ctx.secure_sum(SumSpec.of("weights", global_weights))  # 3.
                    except SumAbandoned:
                        pass  # every client keeps its own global parameters this round
            with ctx.phase("evaluation"):
                errors = yield from self._server_evaluation(ctx, sums, "val", layout, scaler)  # 4.
            history.append({"round": r, "clients": len(ctx.live), **errors})
            ctx.report(r, clients=len(ctx.live), val_rmse=errors["rmse"], val_mae=errors["mae"], val_mape=errors["mape"])
        with ctx.phase("evaluation"):
            test = yield from self._server_evaluation(ctx, sums, "test", layout, scaler)  # 5.
        per_batch = {
            "secure_sums_per_batch": sums.per_batch(),
            "elements_up_per_client_per_batch": sums.elements_per_batch() + (synced.size if synced else 0),
            "training_batches": batches,
        }
        metrics = {"plan": self.name, "rounds": history, "test_rmse": test["rmse"], "test_mae": test["mae"],
                   "test_mape": test["mape"], "clients": len(ctx.live), "cost": per_batch}
        if c.ddp_noise:  # one epsilon for everything the run releases about one window, the audit's recomputation too
            yield from ctx.collect_privacy()
            steps = {client: ctx.accountant.steps_of(client) for client in ctx.clients}
            metrics["privacy"] = self.noise_account(ctx.noised.sums, steps, clients=ctx.clients, **ctx.noise_terms())
        elif c.dpsgd_sigma:
            metrics["privacy"] = yield from local_dp.server_report(
                ctx, c, unit=self.dpsgd_unit, mechanisms=[],
                sampling=f"the fixed batches every client shares (one release per window and epoch, counted as one step at rate 1), "
                         f"priced at sigma / {c.dpsgd_sensitivity:.4g}: replacing one window moves every client's clipped window gradient "
                         "by up to 2 clips; the P/Q, gradient, normalisation and error sums are not covered")
        return metrics

    def _normalisation(self, ctx: ServerContext, layout: SeriesLayout) -> SumSpec:
        """Step 0's sum: the moments of the training inputs, or with distributed DP one noised row per window."""
        noise = fedstgd_dp.window_noise(ctx, self.config, layout, NORMALISATION.name)
        return NORMALISATION if noise is None else fedstgd_dp.statistics_spec(NORMALISATION.name, fedstgd_dp.MOMENTS, noise)

    def _server_batch(self, ctx: ServerContext, sums: FedSTGDSums, size: int, *, training: bool, synced: SumSpec | None = None):
        """The sums of one batch; returns 1, or 0 when one of them was abandoned (the batch too)."""
        noise = functools.partial(fedstgd_dp.window_noise, ctx, self.config, ctx.data)
        try:
            for spec in sums.batch(size, training=training, synced=synced, noise=noise):
                yield from ctx.secure_sum(spec)
        except SumAbandoned:
            return 0
        return 1

    def _server_evaluation(self, ctx: ServerContext, sums: FedSTGDSums, split: str, layout: SeriesLayout, scaler: ZScore | None):
        for size in self.config.batches(split, layout):
            yield from self._server_batch(ctx, sums, size, training=False)
        name = "validation" if split == "val" else "test"
        noise = fedstgd_dp.window_noise(ctx, self.config, layout, name)
        spec = errors_spec(name, ERRORS, clip_range=1e12) if noise is None else fedstgd_dp.statistics_spec(name, ERRORS, noise)
        totals = yield from released_errors(ctx, spec)
        if totals is None:
            return {"rmse": math.nan, "mae": math.nan, "mape": math.nan}
        if noise is not None:  # the noised sum of every window's error row, decoded (post-processing)
            totals = fedstgd_dp.errors_from_rows(totals, scaler, self.config, layout)
        errors = pooled_errors(totals)
        return {"rmse": errors.rmse, "mae": errors.mae, "mape": errors.mape_percent}

    # -- client (Algorithm 1, lines 8-14, on one client) -----------------------------------------

    def client(self, ctx: ClientContext):
        c = self.config
        data: ClientData = ctx.data
        layout = data.layout
        if c.ddp_noise:  # 0. one clipped row per training window, noised
            moments = yield ctx.secure_sum(NORMALISATION.name, fedstgd_dp.window_moments(data.splits.train.x, c, layout), private=True)
            scaler = fedstgd_dp.scaler_from_moments(moments.values, c, layout)
        else:  # 0.
            moments = yield ctx.secure_sum(NORMALISATION.name, data.splits.training_sums(), private=True)
            scaler = ZScore.from_sums(moments.values, layout.channels)
        splits = data.splits.normalised(scaler)
        model = client_model(c, ctx.client_id, len(data.stations), (yield ctx.receive("model")), layout)
        training = c.windows("train", layout)
        private = local_dp.client_mechanism(ctx, c, samples=training, batch_size=training, per_epoch=True,
                                            sensitivity=c.dpsgd_sensitivity)  # DP-SGD, or None
        adam = lambda parameters: torch.optim.Adam(parameters, lr=c.lr, weight_decay=c.weight_decay)  # noqa: E731
        with (contextlib.nullcontext((model, adam(model.parameters()))) if private is None else
              private.training(model, adam, samples=training, per_sample="loop")) as (_, optimiser):
            schedule = torch.optim.lr_scheduler.MultiStepLR(optimiser, list(c.milestones), gamma=c.lr_decay)
            for r in range(c.rounds):
                for e in range(c.local_epochs):
                    order = batch_order(c, r * c.local_epochs + e, layout)
                    for start in range(0, len(order), c.batch_size):  # 1.-2.
                        x, y, slots = window_batch(splits.train, order[start : start + c.batch_size])
                        try:
                            yield from self._client_batch(ctx, model, optimiser, x, y, slots, scaler, private, n_total=layout.nodes)
                        except SumAbandoned:
                            pass  # the server abandoned one of the batch's sums: no step on it
                    schedule.step()
                    if private is not None:
                        private.end_epoch()  # every window of the epoch released once
                if c.sync == "round":
                    try:
                        total = yield ctx.secure_sum("weights", {k: v.numpy() for k, v in model.global_state().items()})  # 3.
                        load_weights_global(model, {k: v / len(total.contributors) for k, v in total.values.items()})
                    except SumAbandoned:
                        pass  # the server gave this round's FedAvg up
                yield from self._client_evaluation(ctx, model, splits.val, scaler, "validation")  # 4.
        yield from self._client_evaluation(ctx, model, splits.test, scaler, "test")  # 5.
        if private is not None:
            yield ctx.report_privacy()  # this client's DP-SGD releases, as its optimiser counted them

    def _summed_by(self, ctx: ClientContext, name: str):
        """How the sum tape sums: through secure sum ``name``, or (no inter-client sums) the
        client's own value is the sum."""
        return (lambda tensors: ctx.secure_sum(name, tensors, private=True)) if self.config.cross_client else None

    def _client_batch(self, ctx: ClientContext, model: FedSTGDModel, optimiser, x, y, slots, scaler: ZScore, private=None, *, n_total: int):
        """One training batch: the forward pass through the P/Q sums (eqs. 22-23, then 13-16
        with the sums), the L1 loss, the backward pass through the gradient sums (G = sum_i
        dL_i/dS), and an Adam step (line 13); with ``sync="batch"`` on the pooled gradient.
        With DP-SGD (``private``) the step is on the windows' clipped gradients plus noise."""
        c = self.config
        tape = SumTape()
        constants = model.batch_constants(slots)
        segment = lambda i, state, summed: model.segment(i, state, summed, x, constants)  # noqa: E731
        prediction = yield from tape.forward(segment, model.shape.n_sums, summed_by=self._summed_by(ctx, "pq"))
        losses = l1_loss(prediction, y, scaler, n_total=n_total, per_window=private is not None)
        optimiser.zero_grad()
        yield from tape.backward(losses.sum(), exact=c.gradients == "exact", summed_by=self._summed_by(ctx, "pq-grad"), keep=private is not None)
        if private is not None:  # each window's gradient of its own mean loss; the DP optimiser clips, noises and averages them
            parameters = [p for p in model.parameters() if p.requires_grad]
            for p, g in zip(parameters, tape.per_sample_gradients(losses * len(losses), parameters), strict=True):
                p.grad_sample = g
            optimiser.expected_batch_size = len(losses)  # fixed batches: the mean over the batch's own windows
        if c.sync == "batch":  # every client steps with the pooled gradient of the global parameters
            shared = {k: p for k, p in model.named_parameters() if k != "node_embedding"}
            pooled = yield ctx.secure_sum(GLOBAL_GRADIENT, {k: torch.zeros_like(p) if p.grad is None else p.grad for k, p in shared.items()})
            for k, p in shared.items():
                p.grad = torch.as_tensor(pooled.values[k], dtype=p.dtype)
        optimiser.step()

    def _client_evaluation(self, ctx: ClientContext, model: FedSTGDModel, windows, scaler: ZScore, name: str):
        c = self.config
        totals = {k: np.zeros(1) for k in ERRORS}
        rows = []  # with distributed DP: every window's error row (papers/fedstgd_dp.py)
        for start in range(0, len(windows), c.eval_batch_size):
            x, y, slots = window_batch(windows, np.arange(start, min(start + c.eval_batch_size, len(windows))))
            with torch.no_grad():
                constants = model.batch_constants(slots)
            segment = lambda i, state, summed: model.segment(i, state, summed, x, constants)  # noqa: E731
            try:
                prediction = yield from SumTape().forward(segment, model.shape.n_sums, summed_by=self._summed_by(ctx, "pq"), grad=False)
            except SumAbandoned:
                continue  # the server dropped this batch from the evaluation too
            if c.ddp_noise:
                rows.append(fedstgd_dp.window_errors(scaler.inverse(prediction.numpy()), y, scaler, c, ctx.data.layout))
                continue
            sums = masked_error_sums(scaler.inverse(prediction.numpy()), y)
            totals = {k: totals[k] + sums[k] for k in ERRORS}
        if c.ddp_noise:  # one row per window evaluated (a zero row if every batch was abandoned)
            totals = {k: np.concatenate([r[k] for r in rows]) if rows else np.zeros((1, 1)) for k in ERRORS}
        yield from report_errors(ctx, name, totals, private=True)


def load_weights_global(model: FedSTGDModel, weights: dict[str, Any]) -> None:
    """Load FedAvg'ed global weights, keeping the private node embedding."""
    load_weights(model, {**weights, "node_embedding": model.node_embedding.detach().numpy()})
