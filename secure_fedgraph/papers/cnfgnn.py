"""CNFGNN (Meng, Rambhatla, Liu, KDD 2021), Algorithms 1 and 2, as a protocol: one client per
sensor, a GRU encoder-decoder on every client, a Graph Network on the server, alternating
training (AT) with FedAvg of the client models through a secure sum.

The comments number the paper's lines: "A1 9" is Algorithm 1 (server) line 9; "A2 Update 5",
"A2 Encode 1" and "A2 Backward 3" are lines of Algorithm 2's ClientUpdate, ClientEncode and
ClientBackward. Set-up beyond the paper (window counts as metadata, the normalisation
statistics as a secure sum) is marked "set-up"; validation and test ("eval": clients upload
h_c,i of those windows through the DP hook, the server answers with h_G,c,i, and only the error
totals come back through a secure sum) are the paper's evaluation, not an algorithm line.

Table 10's training strategies are four plan classes over the shared pieces below;
``CNFGNN(config)`` builds the one ``config.variant`` names, so the registry, the command line
and ``from_config_json`` need nothing special:

- :class:`AlternatingTrainingFedAvg` ("at+fedavg", CNFGNN itself): A1 lines 6-36. ClientUpdate
  (R_c local epochs with h_G,c,i fixed; a fresh Adam, MSE on the normalised scale, scheduled
  sampling with c = ``cl_decay_steps``), FedAvg as a secure sum (unweighted, as CNFGNN's code;
  the server learns only the sum), ClientEncode (through the DP hook when ``dp_sigma`` > 0),
  R_s server epochs of split learning of the GN over batches of ``server_batch_size`` training
  windows in one shared order (the server scatters h_G,c,i, each client returns
  dL_i/dh_G,c,i, the server steps the GN's persistent Adam with the gradients averaged over
  the clients that answered), then the final h_G,c,i of every training window.
- :class:`AlternatingTraining` ("at"): the same without FedAvg (Eq. 10's communication).
- :class:`SplitLearning` ("sl"): end-to-end split learning instead (Eq. 8): per shared batch,
  h_c,i up, h_G,c,i down, dL_i/dh_G,c,i up, dL/dh_c,i down (the gradient of all clients'
  losses through the GN), and both sides step.
- :class:`SplitLearningFedAvg` ("sl+fedavg"): the same, then FedAvg (Eq. 9).

The server never holds raw data, targets or client weights: it sees hidden states (noised
with DP), their gradients, and sums. The server's upload collective counts every release of a
window for the accountant (privacy/accountant.py); the plan only names the windows. Deviations
from the paper: the gradients are averaged, not summed, over clients (the mean of the clients'
MSE is the pooled MSE CNFGNN's code minimises; Adam is scale-invariant anyway); the server runs
the GN over batches of training windows as CNFGNN's code does. Communication follows Eq. 7
(Eq. 10 for "at"); element counts per phase are in the run's metrics. Plan code runs on one
torch thread: the hosts that run it (ClientHost, the server's step driver) hold that setting.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from secure_fedgraph.data.sources import load_series
from secure_fedgraph.errors import ConfigError, DropoutError, SumAbandoned
from secure_fedgraph import models  # models.GraphNet loads PyG on first use: on the server, not in client processes
from secure_fedgraph.models import GRUSeq2Seq
from secure_fedgraph.papers.error_totals import errors_spec, released_errors, report_errors
from secure_fedgraph.papers.traffic import (
    SensorPlan,
    check_series_options,
    client_normalisation,
    server_normalisation,
)
from secure_fedgraph import privacy  # the accountant loads opacus on first use: only DP runs pay for it
from secure_fedgraph.papers import local_dp
from secure_fedgraph.papers.dp_options import DPOptions, DPSGDOptions
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.training.device import check_device, resolve_device
from secure_fedgraph.training.forecasting import curriculum, error_sums, load_weights, train_local, weights_of
from secure_fedgraph.training.metrics import rmse_mae
from secure_fedgraph.validation import positive, positive_number

VARIANTS = ("at+fedavg", "at", "sl", "sl+fedavg")
DP_UNITS = ("window", "reading", "sensor")
SPLITS = ("train", "val", "test")
WINDOW_COUNTS = SumSpec("window_counts", (TensorSpec("windows", (len(SPLITS),)),))


@dataclass(frozen=True)
class CNFGNNConfig(DPOptions, DPSGDOptions):
    """Options of the cnfgnn plan (``--set KEY=VALUE``); defaults are the paper's METR-LA ones.

    Attributes:
        rounds: global rounds R_g.
        dataset: the graph series (METR-LA by default; a name or a folder, data/sources.py):
            each client reads its sensor's first channel.
        sensors: clients = the first ``sensors`` sensors and their subgraph (None: all of them).
        steps_in, steps_out: input and output window lengths (12 and 12, as CNFGNN and DCRNN).
        moments_clip: clip range of the normalisation sum (None: 1e4 for speeds, else 1e8; papers/traffic.py).
        variant: "at+fedavg" (CNFGNN), "at" (alternating training without FedAvg), "sl" (split
            learning) or "sl+fedavg" (Table 10).
        hidden_size: GRU encoder hidden size and h_G size (64).
        client_rounds: R_c, local epochs per round (1).
        server_rounds: R_s, server epochs per round (1 for METR-LA).
        batch_size / server_batch_size: windows per client batch (128) / server batch (48).
        lr / server_lr: Adam learning rates (1e-3).
        cl_decay_steps: scheduled sampling constant c (1000; 0: never feed the truth).
        gn_layers / gn_hidden / gn_update: Graph Network depth (2), MLP hidden (256), update size (128).
        max_local_steps / max_server_batches / max_windows: caps for small runs (None: none).
        dp_sigma: noise multiplier on uploaded h_c,i (0: no DP); dp_clip: per-row L2 bound (2.0);
        dp_delta: the delta epsilon is reported at (papers/dp_options.py).
        dp_unit: what the reported epsilon protects: "window" (one window's 12 input steps),
            "reading" (one speed reading: it sits in up to 12 windows' inputs, and pays for
            each), or "sensor" (every reading of the client over the run).
        window_stride: a window every ``window_stride`` steps (1, DCRNN's; 12 makes the input
            windows disjoint, so a reading costs what a window costs, with 1/12 of the windows).
        dpsgd_sigma: DP-SGD noise multiplier for ClientUpdate (0: plain Adam; the AT variants
            only: split learning's batches are the server's, not the client's Poisson samples);
            dpsgd_clip: its per-sample L2 clip (papers/local_dp.py).
        seed: run seed (initial models, batch orders).
        server_device: where the server runs the GN: "cpu" (default, reproducible), "cuda" or
            "auto" (CUDA when present). Clients always compute on CPU.
    """

    rounds: int = 3
    dataset: str = "metr-la"
    sensors: int | None = None
    steps_in: int = 12
    steps_out: int = 12
    moments_clip: float | None = None
    variant: str = "at+fedavg"
    hidden_size: int = 64
    client_rounds: int = 1
    server_rounds: int = 1
    batch_size: int = 128
    server_batch_size: int = 48
    lr: float = 1e-3
    server_lr: float = 1e-3
    cl_decay_steps: int = 1000
    gn_layers: int = 2
    gn_hidden: int = 256
    gn_update: int = 128
    max_local_steps: int | None = None
    max_server_batches: int | None = None
    max_windows: int | None = None
    dp_clip: float = 2.0  # DPOptions' field, this plan's default
    dp_unit: str = "window"
    window_stride: int = 1
    seed: int = 0
    server_device: str = "cpu"

    def __post_init__(self) -> None:
        check_series_options(self)
        check_device("server_device", self.server_device)
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.dp_unit not in DP_UNITS:
            raise ConfigError(f"dp_unit must be one of {DP_UNITS}, got {self.dp_unit!r}")
        positive("window_stride", self.window_stride)
        for name in ("rounds", "hidden_size", "client_rounds", "server_rounds", "batch_size", "server_batch_size", "gn_layers", "gn_hidden", "gn_update"):
            positive(name, getattr(self, name))
        positive("cl_decay_steps", self.cl_decay_steps, 0)
        for name in ("max_local_steps", "max_server_batches", "max_windows"):
            positive(name, getattr(self, name), optional=True)
        for name in ("lr", "server_lr"):
            positive_number(name, getattr(self, name))
        super().__post_init__()  # dp_sigma, dp_clip, dpsgd_sigma, dpsgd_clip, dp_delta
        if self.dpsgd_sigma and self.variant.startswith("sl"):
            raise ConfigError(f"dpsgd_sigma needs the client's own Poisson samples; variant {self.variant!r} trains on the server's batches "
                              "(use at or at+fedavg)")
        if self.dpsgd_sigma and self.dp_unit != "window":
            raise ConfigError(f"DP-SGD is accounted per training window; dp_unit={self.dp_unit!r} spans several (use dp_unit=window)")


@dataclass(frozen=True)
class SensorGraph:
    """What the CNFGNN server holds: the directed sensor graph (DCRNN's adjacency with its
    self-loops, edge i -> j weighted adj[i, j]), never sensor readings."""

    edge_index: torch.Tensor
    edge_weight: torch.Tensor
    nodes: int


def server_batches(seed: int, round_index: int, epoch: int, windows: int, size: int, cap: int | None) -> list[np.ndarray]:
    """The shared order of training windows for one server epoch (server and clients derive it
    from the run seed, so every client's gradient is for the same windows)."""
    order = np.random.default_rng(derive_seed(seed, "server batches", round_index, epoch)).permutation(windows)
    batches = [order[i : i + size] for i in range(0, windows, size)]
    return batches[:cap] if cap is not None else batches


class CNFGNN(SensorPlan):
    """What every Table 10 variant shares: the models, their seeded initial weights, the set-up,
    the evaluation and the round loop. ``CNFGNN(config)`` builds ``config.variant``'s class."""

    name = "cnfgnn"
    Config = CNFGNNConfig
    uploads_activations = True  # h_c,i of every window: clients refuse less noise than their --min-dp-sigma
    variant: ClassVar[str]
    fedavg: ClassVar[bool]  # whether a round has A1 lines 8-14's FedAvg

    def __new__(cls, config: CNFGNNConfig | None = None):
        if cls is CNFGNN:
            cls = _VARIANT_CLASSES[(config if config is not None else CNFGNNConfig()).variant]
        return super().__new__(cls)

    def __init__(self, config: CNFGNNConfig | None = None) -> None:
        super().__init__(config)
        if self.config.variant != self.variant:
            raise ConfigError(f"{type(self).__name__} is variant {self.variant!r}, but the config names {self.config.variant!r}")

    def load_server_data(self, data_dir: str | os.PathLike | None) -> SensorGraph:
        """The subgraph of the run's sensors (the adjacency file only)."""
        n = len(self.client_ids())
        return SensorGraph(*models.sensor_graph(load_series(self.config.dataset, data_dir).adjacency[:n, :n]), n)

    def client_model(self) -> GRUSeq2Seq:
        """θ̄_c^(0): the initial client model (A1 line 1), seeded."""
        model = GRUSeq2Seq(hidden_size=self.config.hidden_size, horizon=self.config.steps_out, graph_size=self.config.hidden_size)
        model.reset_parameters(torch.Generator().manual_seed(derive_seed(self.seed, "server", "initial client model")))
        return model

    def graph_net(self) -> models.GraphNet:
        """θ_GN^(0): the initial Graph Network (A1 line 1), seeded."""
        c = self.config
        with torch.random.fork_rng(devices=[]):  # the constructor's default draws leave the global RNG as it was
            gn = models.GraphNet(c.hidden_size, 1, c.gn_hidden, c.gn_update, c.hidden_size, c.gn_layers)
        gn.reset_parameters(torch.Generator().manual_seed(derive_seed(self.seed, "server", "initial graph net")))
        return gn

    def rows_spec(self, tensor: str, windows: int) -> SumSpec:
        """The shape of an upload: one ``hidden_size`` row per window, called ``tensor``."""
        return SumSpec(tensor, (TensorSpec(tensor, (windows, self.config.hidden_size)),))

    def coin(self, client_id: int, round_index: int) -> torch.Generator:
        """The scheduled-sampling draws of a client's server-phase batches (from the run seed)."""
        return torch.Generator().manual_seed(derive_seed(self.seed, "client", client_id, "coin", round_index) % 2**63)

    @property
    def window_stride(self) -> int:
        return self.config.window_stride

    def privacy_unit(self) -> privacy.Unit:
        """The member the reported epsilon protects (``dp_unit``): a member sitting in k rows of
        one upload pays for k releases (privacy/analysis/units.py)."""
        unit, stride = self.config.dp_unit, self.config.window_stride
        if unit == "window":
            if self.config.dpsgd_sigma:  # DP-SGD's sample is the whole window, its targets too
                return privacy.Unit(privacy.UnitKind.ROW, f"one window ({self.config.steps_in} input and {self.config.steps_out} target steps) of one sensor client")
            return privacy.WINDOW
        if unit == "reading":
            span = -(-self.config.steps_in // stride)
            return privacy.Unit(privacy.UnitKind.SPAN, f"one reading of one sensor client (in up to {span} windows' inputs)", span=span)
        return privacy.Unit(privacy.UnitKind.CLIENT, "one sensor client: every reading it holds, over the run")

    def planned_releases(self, data_dir: str | os.PathLike | None) -> int:
        """K before the run: releases of the unit's most exposed member if every client stays.
        Every variant uploads each training window's h_c at most once a round (AT: all of
        them; SL: those its batches reach), the validation windows once a round and the test
        windows once; the window counts are the series' (the same for every sensor)."""
        c = self.config
        windows = self.load_client_data(0, data_dir)
        counts = [np.full(len(windows.y[s]), c.rounds if s != "test" else 1) for s in SPLITS]
        return privacy.member_releases(self.privacy_unit(), counts)

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> CNFGNN:
        """This plan with ``option`` (``dp_sigma``, the default, or ``dpsgd_sigma``) the least
        noise multiplier (opacus' search) whose epsilon for one member of the unit, after the
        planned releases, is at most ``target_epsilon`` at ``dp_delta``; the other mechanism
        must be off (one calibration prices one mechanism)."""
        c = self.config
        option = option or "dp_sigma"
        other = {"dp_sigma": "dpsgd_sigma", "dpsgd_sigma": "dp_sigma"}.get(option)
        if other is None:
            raise ConfigError(f"plan cnfgnn calibrates dp_sigma or dpsgd_sigma, not {option!r}")
        if getattr(c, option) or getattr(c, other):
            raise ConfigError(f"a target epsilon calibrates {option} alone: leave out {option} and {other} (got {getattr(c, option):g}, "
                              f"{getattr(c, other):g})")
        if option == "dp_sigma":
            sigma = privacy.calibrate_sigma(target_epsilon=target_epsilon, delta=c.dp_delta, sample_rate=1.0, steps=self.planned_releases(data_dir))
        else:
            rate = local_dp.sample_rate(c.batch_size, len(self.load_client_data(0, data_dir).y["train"]))
            sigma = local_dp.calibrated_sigma(c, target_epsilon, rate=rate, steps=c.rounds * local_dp.steps_per_round(rate, c.client_rounds, c.max_local_steps))
        return CNFGNN(dataclasses.replace(c, **{option: sigma}))

    def privacy_hook(self, ctx: ClientContext) -> privacy.GaussianRows | None:
        c = self.config
        return privacy.GaussianRows(c.dp_clip, float(c.dp_sigma), noise=ctx.noise("h_c")) if c.dp_sigma > 0 else None

    def released(self, split: str, rows) -> privacy.RowRelease:
        """What an upload of h_c rows releases: those windows of ``split``, noised with dp_sigma."""
        return privacy.RowRelease(split, rows, float(self.config.dp_sigma))

    # -- the round loop of Algorithm 1, shared -----------------------------------------------

    def server(self, ctx: ServerContext):
        c = self.config
        gn = GraphNetServer(self, ctx)
        with ctx.phase("set-up"):
            yield from ctx.start_round(0)
            counts = yield from ctx.upload(WINDOW_COUNTS.name, WINDOW_COUNTS)
            gn.windows = _agreed_counts(counts)
            yield from server_normalisation(ctx, c)
            yield from ctx.broadcast("model", gn.client_weights)  # A1 lines 1-5: θ_c,i^(0) = θ̄_c^(0); h_G,c,i^(0) = 0 on the clients
        history = []
        for r in range(c.rounds):  # A1 line 6
            if r:
                with ctx.phase("set-up"):
                    yield from ctx.start_round(r)
            contributors = yield from self.server_round(gn, r)
            val_rmse, val_mae = yield from gn.evaluate("val")  # eval
            history.append({"round": r, "clients": contributors, "val_rmse": val_rmse, "val_mae": val_mae})
            ctx.report(r, clients=contributors, val_rmse=val_rmse, val_mae=val_mae)
        test_rmse, test_mae = yield from gn.evaluate("test")
        metrics: dict[str, Any] = {"plan": self.name, "variant": c.variant, "rounds": history, "test_rmse": test_rmse, "test_mae": test_mae,
                                   "clients": len(ctx.live), "windows": gn.windows}
        if c.dp_sigma > 0 or c.dpsgd_sigma > 0:
            uploads = [f"Gaussian on uploaded h_c rows: clip {c.dp_clip:g}, sigma {c.dp_sigma:.4g}, applied by each client"] if c.dp_sigma else []
            metrics["privacy"] = yield from local_dp.server_report(ctx, c, unit=self.privacy_unit(), mechanisms=uploads)
        return metrics

    def client(self, ctx: ClientContext):
        c = self.config
        yield ctx.upload(WINDOW_COUNTS.name, {"windows": np.array([len(ctx.data.y[s]) for s in SPLITS], dtype=np.float32)})  # set-up
        data, mean, std = yield from client_normalisation(ctx, ctx.data)
        model = GRUSeq2Seq(hidden_size=c.hidden_size, horizon=c.steps_out, graph_size=c.hidden_size)
        load_weights(model, (yield ctx.receive("model")))  # A1 line 3
        sensor = SensorClient(self, ctx, data, mean, std, model)
        for r in range(c.rounds):
            yield from self.client_round(sensor, r)
            yield from sensor.evaluate("val")  # eval
        yield from sensor.evaluate("test")
        if c.dpsgd_sigma:
            yield ctx.report_privacy()  # this client's DP-SGD steps, as its optimiser counted them

    def server_round(self, gn: GraphNetServer, r: int):
        """The server's side of round ``r``; returns how many clients its model average holds."""
        raise NotImplementedError

    def client_round(self, sensor: SensorClient, r: int):
        """One client's side of round ``r``."""
        raise NotImplementedError


class AlternatingTraining(CNFGNN):
    """Table 10's "AT": Algorithm 1 without the FedAvg of lines 8-14 (Eq. 10)."""

    variant = "at"
    fedavg = False

    def server_round(self, gn: GraphNetServer, r: int):
        contributors = len(gn.ctx.live)
        if self.fedavg:
            contributors = yield from gn.fedavg()  # A1 lines 8-14: the clients' ClientUpdate, then θ̄_c = their average
        ctx, c = gn.ctx, self.config
        with ctx.phase("split learning"):
            hidden = yield from gn.hidden_states("h_c:train", gn.windows["train"])  # A1 lines 16-18: ClientEncode
            x = gn.node_features(hidden, gn.windows["train"])
            for epoch in range(c.server_rounds):  # A1 lines 20-21
                for batch in server_batches(self.seed, r, epoch, gn.windows["train"], c.server_batch_size, c.max_server_batches):
                    h_graph = gn.model(x[:, torch.as_tensor(batch, device=gn.device)], gn.edge_index, gn.edge_weight)  # A1 line 22
                    yield from gn.scatter_rows("h_G", h_graph.detach())
                    grads = yield from ctx.upload("dL/dh_G", self.rows_spec("grad", len(batch)))  # A1 lines 23-26: ClientBackward
                    if grads:
                        gn.step(h_graph, grads)  # A1 lines 27-28
            h_graph = gn.graph_states(hidden, gn.windows["train"])  # A1 lines 30-32
            yield from ctx.scatter("h_G:train", {i: {"h": h_graph[i]} for i in ctx.live})  # A1 lines 33-35
        return contributors

    def client_round(self, sensor: SensorClient, r: int):
        c, ctx = self.config, sensor.ctx
        trained = train_local(sensor.model, sensor.x, sensor.y, sensor.tod, graph=sensor.h_graph, rng=ctx.rng("batches", r), epochs=c.client_rounds,
                              max_steps=c.max_local_steps, batch_size=c.batch_size, lr=c.lr, decay_steps=c.cl_decay_steps,
                              start_step=sensor.step, private=sensor.private)  # A1 line 9: ClientUpdate, A2 Update lines 1-7
        sensor.step += trained.steps
        if self.fedavg:
            yield from sensor.fedavg()  # A2 Update line 8, A1 lines 11-13
        hidden = torch.as_tensor(sensor.encode("train"))
        yield ctx.upload("h_c:train", {"h": hidden.numpy()}, sensor.privacy)  # A2 Encode line 1
        coin = self.coin(ctx.client_id, r)
        for epoch in range(c.server_rounds):
            for batch in server_batches(self.seed, r, epoch, len(sensor.x), c.server_batch_size, c.max_server_batches):
                g = torch.tensor((yield ctx.receive("h_G"))["h"], requires_grad=True)
                loss = sensor.loss(hidden[torch.as_tensor(batch)], batch, g, coin)  # A2 Backward lines 1-2
                (grad,) = torch.autograd.grad(loss, g)
                yield ctx.upload("dL/dh_G", {"grad": grad.numpy()})  # A2 Backward line 3
                sensor.step += 1
        sensor.h_graph = (yield ctx.receive("h_G:train"))["h"]  # A1 line 34


class AlternatingTrainingFedAvg(AlternatingTraining):
    """CNFGNN itself ("at+fedavg"): Algorithm 1, lines 6-36 (Eq. 7)."""

    variant = "at+fedavg"
    fedavg = True


class SplitLearning(CNFGNN):
    """Table 10's "SL" (Eq. 8): one epoch of end-to-end split learning per round. Per shared
    batch, h_c,i up, h_G,c,i down, dL_i/dh_G,c,i up, and dL/dh_c,i down: the gradient of all
    clients' losses through the GN with respect to each client's h_c,i; both sides step. With
    DP the upload is noised and the returned gradient is applied to the clean h_c,i (the noise
    is additive; clipping is treated as the identity in the backward pass)."""

    variant = "sl"
    fedavg = False

    def server_round(self, gn: GraphNetServer, r: int):
        contributors = len(gn.ctx.live)
        ctx, c = gn.ctx, self.config
        with ctx.phase("split learning"):
            for batch in server_batches(self.seed, r, 0, gn.windows["train"], c.server_batch_size, c.max_server_batches):
                hidden = yield from ctx.upload("h_c", self.rows_spec("h", len(batch)), releases=self.released("train", batch))
                x = gn.node_features({i: v["h"] for i, v in hidden.items()}, len(batch)).requires_grad_()
                h_graph = gn.model(x, gn.edge_index, gn.edge_weight)
                yield from gn.scatter_rows("h_G", h_graph.detach())
                grads = yield from ctx.upload("dL/dh_G", self.rows_spec("grad", len(batch)))
                if not grads:
                    continue
                gn.step(h_graph, grads)
                through_graph = x.grad.cpu().numpy() * len(grads)
                yield from ctx.scatter("dL/dh_c", {i: {"grad": through_graph[i]} for i in ctx.live})
        if self.fedavg:
            contributors = yield from gn.fedavg()  # Eq. 9
        return contributors

    def client_round(self, sensor: SensorClient, r: int):
        c, ctx = self.config, sensor.ctx
        optimiser = torch.optim.Adam(sensor.model.parameters(), lr=c.lr)
        coin = self.coin(ctx.client_id, r)
        for batch in server_batches(self.seed, r, 0, len(sensor.x), c.server_batch_size, c.max_server_batches):
            hidden = sensor.model.encode(torch.as_tensor(sensor.x[batch]))
            yield ctx.upload("h_c", {"h": hidden.detach().numpy()}, sensor.privacy)
            g = torch.tensor((yield ctx.receive("h_G"))["h"], requires_grad=True)
            loss = sensor.loss(hidden, batch, g, coin)
            (grad,) = torch.autograd.grad(loss, g, retain_graph=True)
            yield ctx.upload("dL/dh_G", {"grad": grad.numpy()})
            through_graph = torch.tensor((yield ctx.receive("dL/dh_c"))["grad"])
            optimiser.zero_grad()
            torch.autograd.backward([loss, hidden], [None, through_graph])
            optimiser.step()
            sensor.step += 1
        if self.fedavg:
            yield from sensor.fedavg()


class SplitLearningFedAvg(SplitLearning):
    """Table 10's "SL + FedAvg" (Eq. 9): split learning, then FedAvg of the client models."""

    variant = "sl+fedavg"
    fedavg = True


_VARIANT_CLASSES: dict[str, type[CNFGNN]] = {cls.variant: cls for cls in (AlternatingTrainingFedAvg, AlternatingTraining, SplitLearning, SplitLearningFedAvg)}


class GraphNetServer:
    """The server's state in one run: the GN and its persistent Adam on ``server_device``, the
    sensor graph, the agreed window counts, and the steps every variant shares."""

    def __init__(self, plan: CNFGNN, ctx: ServerContext) -> None:
        c = plan.config
        graph: SensorGraph = ctx.data
        self.plan, self.ctx, self.config = plan, ctx, c
        self.device = resolve_device(c.server_device)
        self.edge_index, self.edge_weight, self.nodes = graph.edge_index.to(self.device), graph.edge_weight.to(self.device), graph.nodes
        self.model = plan.graph_net().to(self.device)
        self.optimiser = torch.optim.Adam(self.model.parameters(), lr=c.server_lr)
        self.client_weights = weights_of(plan.client_model())
        self.weights_spec = SumSpec.of("weights", self.client_weights)
        self.windows: dict[str, int] = {}

    def node_features(self, hidden: dict[int, np.ndarray], windows: int) -> torch.Tensor:
        """(nodes, windows, hidden) on the server's device; a dropped node's rows are zeros."""
        return _stack(hidden, self.nodes, windows, self.config.hidden_size).to(self.device)

    def graph_states(self, hidden: dict[int, np.ndarray], windows: int) -> np.ndarray:
        """h_G for every node and window (no gradient), in server-sized chunks."""
        x, size = self.node_features(hidden, windows), self.config.server_batch_size
        with torch.no_grad():
            parts = [self.model(x[:, i : i + size], self.edge_index, self.edge_weight) for i in range(0, windows, size)]
        return torch.cat(parts, dim=1).cpu().numpy()

    def hidden_states(self, name: str, windows: int, *, split: str = "train"):
        """Every live client's h_c rows of ``windows`` windows of ``split``, through its DP hook."""
        received = yield from self.ctx.upload(name, self.plan.rows_spec("h", windows), releases=self.plan.released(split, np.arange(windows)))
        return {i: v["h"] for i, v in received.items()}

    def scatter_rows(self, name: str, rows: torch.Tensor):
        """Each live client its own node's rows of ``rows`` (nodes, ...)."""
        rows = rows.cpu().numpy()
        yield from self.ctx.scatter(name, {i: {"h": rows[i]} for i in self.ctx.live})

    def step(self, h_graph: torch.Tensor, grads: dict[int, dict[str, np.ndarray]]) -> None:
        """One Adam step of the GN on the clients' dL/dh_G, averaged over those that answered."""
        g = torch.zeros_like(h_graph)
        for i, v in grads.items():
            g[i] = torch.as_tensor(v["grad"]).to(self.device)
        self.optimiser.zero_grad()
        h_graph.backward(g / len(grads))
        self.optimiser.step()

    def fedavg(self):
        """A secure sum of the client models (A1 line 11); returns its contributors, 0 when the
        sum was abandoned (threat_model.md M-ONCE: every client keeps its own model this round)."""
        with self.ctx.phase("fedavg"):
            try:
                return len((yield from self.ctx.secure_sum(self.weights_spec)).contributors)
            except SumAbandoned:
                return 0

    def evaluate(self, split: str):
        """eval: h_c of ``split`` up (DP hook), h_G down, error totals back through a secure sum."""
        with self.ctx.phase("evaluation"):
            hidden = yield from self.hidden_states(f"h_c:{split}", self.windows[split], split=split)
            h_graph = self.graph_states(hidden, self.windows[split])
            yield from self.ctx.scatter(f"h_G:{split}", {i: {"h": h_graph[i]} for i in hidden})
            return rmse_mae((yield from released_errors(self.ctx, errors_spec(split))))


class SensorClient:
    """One sensor's state in one run: its normalised windows, its model, the cached h_G,c,i
    (A1 line 4: zeros before the first round), its DP hook and its scheduled-sampling step."""

    def __init__(self, plan: CNFGNN, ctx: ClientContext, data, mean: float, std: float, model: GRUSeq2Seq) -> None:
        self.plan, self.ctx, self.data, self.mean, self.std, self.model = plan, ctx, data, mean, std, model
        self.x, self.y, self.tod = data.sensor("train", 0)
        self.h_graph = np.zeros((len(self.x), plan.config.hidden_size), dtype=np.float32)
        self.privacy = plan.privacy_hook(ctx)
        self.private = local_dp.client_mechanism(ctx, plan.config, samples=len(self.x), batch_size=plan.config.batch_size)  # DP-SGD, or None
        self.step = 0

    def encode(self, split: str) -> np.ndarray:
        """h_c,i of every window of ``split`` (A2 Encode line 1)."""
        with torch.no_grad():
            return self.model.encode(torch.as_tensor(self.data.sensor(split, 0)[0])).numpy()

    def loss(self, hidden: torch.Tensor, batch: np.ndarray, g: torch.Tensor, coin: torch.Generator) -> torch.Tensor:
        """This client's loss on a server batch, given the server's h_G for it (A2 Backward lines 1-2)."""
        c = self.plan.config
        prediction = self.model.decode(hidden, torch.as_tensor(self.x[batch]), torch.as_tensor(self.tod[batch]), graph=g,
                                       targets=torch.as_tensor(self.y[batch]), teacher_forcing=curriculum(self.step, c.cl_decay_steps), generator=coin)
        return torch.nn.functional.mse_loss(prediction, torch.as_tensor(self.y[batch]))

    def fedavg(self):
        """Contribute this model to the FedAvg sum and load the average (A1 lines 11-13)."""
        try:
            total = yield self.ctx.secure_sum("weights", weights_of(self.model))
            load_weights(self.model, {k: v / len(total.contributors) for k, v in total.values.items()})
        except SumAbandoned:
            pass  # the server gave this round's FedAvg up: keep the local model

    def evaluate(self, split: str):
        yield self.ctx.upload(f"h_c:{split}", {"h": self.encode(split)}, self.privacy)
        g = (yield self.ctx.receive(f"h_G:{split}"))["h"]
        yield from report_errors(self.ctx, split, error_sums(self.model, *self.data.sensor(split, 0), mean=self.mean, std=self.std, graph=g))


def _stack(hidden: dict[int, np.ndarray], nodes: int, windows: int, size: int) -> torch.Tensor:
    """(nodes, windows, size) node features; a node whose upload is missing (it dropped) is zeros."""
    x = torch.zeros(nodes, windows, size)
    for i, h in hidden.items():
        x[i] = torch.as_tensor(h)
    return x


def _agreed_counts(counts: dict[int, dict[str, np.ndarray]]) -> dict[str, int]:
    """The window counts per split most clients report (all honest clients share one series
    and split; a client that lies fails the shape checks of its later uploads and drops)."""
    votes = Counter(tuple(int(v) for v in c["windows"]) for c in counts.values())
    if not votes:
        raise DropoutError("no client reported its window counts")
    return dict(zip(SPLITS, votes.most_common(1)[0][0], strict=True))
