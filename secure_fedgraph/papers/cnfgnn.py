"""CNFGNN (Meng, Rambhatla, Liu, KDD 2021), Algorithms 1 and 2, as a protocol: one client per
sensor, a GRU encoder-decoder on every client, a Graph Network on the server, alternating
training (AT) with FedAvg of the client models through a secure sum.

Algorithm 1 (numbers match the comments in the code):
  0. Set-up: clients report their window counts (metadata), normalisation statistics come
     from a secure sum, the server broadcasts the initial client model; h_G,c,i = 0.
  Each global round r_g:
  1. ClientUpdate: R_c local epochs on every client with its cached h_G,c,i fixed (a fresh
     Adam, MSE on the normalised scale, scheduled sampling with c = ``cl_decay_steps``).
  2. FedAvg: a secure sum of the client weights; every client loads sum / contributors (the
     server learns only the sum; unweighted, as CNFGNN's code). Skipped by variant "at".
  3. ClientEncode: every client encodes its training windows and uploads h_c,i, through the
     DP hook when ``dp_sigma`` > 0 (per-row clipping to ``dp_clip``, Gaussian noise).
  4. R_s server epochs over the training windows in batches of ``server_batch_size`` (one
     shared order from the run seed): the server runs the GN and scatters h_G,c,i; each
     client backpropagates its own loss to dL_i/dh_G,c,i and uploads it; the server steps the
     GN (a persistent Adam) with the gradients averaged over the clients that answered.
  5. The server scatters the final h_G,c,i of every training window; clients cache them.
  6. Validation: clients upload h_c,i of their validation windows (through the DP hook), the
     server scatters h_G,c,i, clients compute their squared and absolute errors, and only the
     totals come back through a secure sum. After the last round, the same on the test windows.

Variants (``variant``, the paper's Table 10): "at+fedavg" (the above), "at" (without step 2),
"sl" (split learning instead of steps 1-5: per shared batch of training windows, clients
upload h_c,i, the server scatters h_G,c,i, clients upload dL_i/dh_G,c,i, the server
backpropagates the sum through the GN and scatters each client dL/dh_c,i, and both sides step;
Eq. 8) and "sl+fedavg" (the same, then step 2 at the end of the round; Eq. 9).

The server never holds raw data, targets or client weights: it sees hidden states (noised
with DP), their gradients, and sums. Deviations from the paper: the gradients are averaged,
not summed, over clients (the mean of the clients' MSE is the pooled MSE CNFGNN's code
minimises; Adam is scale-invariant anyway); the server runs the GN over batches of training
windows as CNFGNN's code does. Communication follows Eq. 7 (Eq. 10 for "at"); element counts
per phase are in the run's metrics.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from secure_fedgraph.errors import ConfigError, DropoutError, SumAbandoned
from secure_fedgraph.models import GraphNet, GRUSeq2Seq
from secure_fedgraph.models.graph_net import sensor_graph
from secure_fedgraph.data.metr_la import check_sensors, load_cached
from secure_fedgraph.validation import positive, positive_number
from secure_fedgraph.papers.traffic import (
    SensorPlan,
    client_normalisation,
    errors_spec,
    released_errors,
    report_errors,
    server_normalisation,
)
from secure_fedgraph.privacy import GaussianRows, epsilon_of
from secure_fedgraph.protocol.engine import ClientContext, ServerContext
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.protocol.spec import SumSpec, TensorSpec
from secure_fedgraph.training.device import check_device, resolve_device
from secure_fedgraph.training.forecasting import curriculum, error_sums, load_weights, single_thread, train_local, weights_of
from secure_fedgraph.training.metrics import rmse_mae

VARIANTS = ("at+fedavg", "at", "sl", "sl+fedavg")
SPLITS = ("train", "val", "test")
WINDOW_COUNTS = SumSpec("window_counts", (TensorSpec("windows", (len(SPLITS),)),))


@dataclass(frozen=True)
class CNFGNNConfig:
    """Options of the cnfgnn plan (``--set KEY=VALUE``); defaults are the paper's METR-LA ones.

    Attributes:
        rounds: global rounds R_g.
        sensors: clients = the first ``sensors`` METR-LA sensors and their subgraph (None: 207).
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
        dp_sigma: noise multiplier on uploaded h_c,i (0: no DP); dp_clip: per-row L2 bound;
        dp_delta: the delta epsilon is reported at.
        seed: run seed (initial models, batch orders).
        server_device: where the server runs the GN: "cpu" (default, reproducible), "cuda" or
            "auto" (CUDA when present). Clients always compute on CPU.
    """

    rounds: int = 3
    sensors: int | None = None
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
    dp_sigma: float = 0.0
    dp_clip: float = 2.0
    dp_delta: float = 1e-5
    seed: int = 0
    server_device: str = "cpu"

    def __post_init__(self) -> None:
        check_sensors(self.sensors)
        check_device("server_device", self.server_device)
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        for name in ("rounds", "hidden_size", "client_rounds", "server_rounds", "batch_size", "server_batch_size", "gn_layers", "gn_hidden", "gn_update"):
            positive(name, getattr(self, name))
        positive("cl_decay_steps", self.cl_decay_steps, 0)
        for name in ("max_local_steps", "max_server_batches", "max_windows"):
            positive(name, getattr(self, name), optional=True)
        for name in ("lr", "server_lr", "dp_clip"):
            positive_number(name, getattr(self, name))
        positive_number("dp_sigma", self.dp_sigma, zero_ok=True)
        if not (isinstance(self.dp_delta, float) and 0 < self.dp_delta < 1):
            raise ConfigError(f"dp_delta must be a float in (0, 1), got {self.dp_delta!r}")


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
    name = "cnfgnn"
    Config = CNFGNNConfig
    uploads_activations = True  # h_c,i of every window: clients refuse less noise than their --min-dp-sigma

    def load_server_data(self, data_dir: str | os.PathLike | None) -> SensorGraph:
        """The subgraph of the run's sensors (the adjacency file only)."""
        n = len(self.client_ids())
        return SensorGraph(*sensor_graph(load_cached(None if data_dir is None else str(data_dir)).adjacency[:n, :n]), n)

    def _client_model(self) -> GRUSeq2Seq:
        model = GRUSeq2Seq(hidden_size=self.config.hidden_size, graph_size=self.config.hidden_size)
        model.reset_parameters(torch.Generator().manual_seed(derive_seed(self.seed, "server", "initial client model")))
        return model

    def _graph_net(self) -> GraphNet:
        c = self.config
        with torch.random.fork_rng(devices=[]):  # the constructor's default draws leave the global RNG as it was
            gn = GraphNet(c.hidden_size, 1, c.gn_hidden, c.gn_update, c.hidden_size, c.gn_layers)
        gn.reset_parameters(torch.Generator().manual_seed(derive_seed(self.seed, "server", "initial graph net")))
        return gn

    def _rows_spec(self, tensor: str, windows: int) -> SumSpec:
        """The shape of an upload: one ``hidden_size`` row per window, called ``tensor``."""
        return SumSpec(tensor, (TensorSpec(tensor, (windows, self.config.hidden_size)),))

    def _coin(self, client_id: int, round_index: int) -> torch.Generator:
        """The scheduled-sampling draws of a client's server-phase batches (from the run seed)."""
        return torch.Generator().manual_seed(derive_seed(self.seed, "client", client_id, "coin", round_index) % 2**63)

    def privacy_hook(self) -> GaussianRows | None:
        c = self.config
        return GaussianRows(c.dp_clip, float(c.dp_sigma)) if c.dp_sigma > 0 else None

    # -- server (Algorithm 1) ---------------------------------------------------------------

    def server(self, ctx: ServerContext):
        c = self.config
        graph: SensorGraph = ctx.data
        device = resolve_device(c.server_device)
        edge_index, edge_weight = graph.edge_index.to(device), graph.edge_weight.to(device)
        with single_thread():
            gn = self._graph_net().to(device)
        optimiser = torch.optim.Adam(gn.parameters(), lr=c.server_lr)
        client_weights = weights_of(self._client_model())
        weights_spec = SumSpec.of("weights", client_weights)
        releases: dict[int, dict[str, int]] = {i: dict.fromkeys(SPLITS, 0) for i in ctx.clients}

        def count_release(clients, split: str) -> None:
            """A DP release of every ``split`` window of these clients (for the accountant)."""
            for client in clients:
                releases[client][split] += 1

        def run_graph_net(hidden: dict[int, np.ndarray], windows: int) -> np.ndarray:
            """h_G for every node and window (no gradient), in server-sized chunks."""
            x = _stack(hidden, graph.nodes, windows, c.hidden_size).to(device)
            with single_thread(), torch.no_grad():
                parts = [gn(x[:, i : i + c.server_batch_size], edge_index, edge_weight) for i in range(0, windows, c.server_batch_size)]
            return torch.cat(parts, dim=1).cpu().numpy()

        def encodings(split: str, windows: int):
            """Clients upload h_c,i of a split (through their DP hook); the server answers with h_G,c,i."""
            received = yield from ctx.upload(f"h_c:{split}", self._rows_spec("h", windows))
            count_release(received, split)
            hidden = {i: v["h"] for i, v in received.items()}
            h_graph = run_graph_net(hidden, windows)
            yield from ctx.scatter(f"h_G:{split}", {i: {"h": h_graph[i]} for i in hidden})
            return hidden

        def fedavg():
            with ctx.phase("fedavg"):
                try:
                    return len((yield from ctx.secure_sum(weights_spec)).contributors)
                except SumAbandoned:
                    return 0  # abandoned (threat_model.md M-ONCE): every client keeps its own model this round

        def step_graph_net(h_graph: torch.Tensor, grads: dict[int, dict[str, np.ndarray]]) -> None:
            """One Adam step of the GN on the clients' dL/dh_G, averaged over those that answered."""
            g = torch.zeros_like(h_graph)
            for i, v in grads.items():
                g[i] = torch.as_tensor(v["grad"]).to(device)
            with single_thread():
                optimiser.zero_grad()
                h_graph.backward(g / len(grads))
                optimiser.step()

        def alternating_training(r: int):
            with ctx.phase("split learning"):
                hidden = yield from ctx.upload("h_c:train", self._rows_spec("h", windows["train"]))  # 3.
                count_release(hidden, "train")
                hidden = {i: v["h"] for i, v in hidden.items()}
                x = _stack(hidden, graph.nodes, windows["train"], c.hidden_size).to(device)
                for epoch in range(c.server_rounds):  # 4.
                    for batch in server_batches(self.seed, r, epoch, windows["train"], c.server_batch_size, c.max_server_batches):
                        with single_thread():
                            h_graph = gn(x[:, torch.as_tensor(batch, device=device)], edge_index, edge_weight)
                        rows = h_graph.detach().cpu().numpy()
                        yield from ctx.scatter("h_G", {i: {"h": rows[i]} for i in ctx.live})
                        grads = yield from ctx.upload("dL/dh_G", self._rows_spec("grad", len(batch)))
                        if grads:
                            step_graph_net(h_graph, grads)
                h_graph = run_graph_net(hidden, windows["train"])  # 5.
                yield from ctx.scatter("h_G:train", {i: {"h": h_graph[i]} for i in ctx.live})

        def split_learning(r: int):
            """One epoch of end-to-end split learning (Table 10's SL): per batch, h_c up, h_G down,
            dL/dh_G up, dL/dh_c down (Eq. 8); the server sends each client the gradient of all
            clients' losses through the GN with respect to its h_c."""
            with ctx.phase("split learning"):
                released = set()
                for batch in server_batches(self.seed, r, 0, windows["train"], c.server_batch_size, c.max_server_batches):
                    hidden = yield from ctx.upload("h_c", self._rows_spec("h", len(batch)))
                    released |= set(hidden)
                    x = _stack({i: v["h"] for i, v in hidden.items()}, graph.nodes, len(batch), c.hidden_size).to(device).requires_grad_()
                    with single_thread():
                        h_graph = gn(x, edge_index, edge_weight)
                    rows = h_graph.detach().cpu().numpy()
                    yield from ctx.scatter("h_G", {i: {"h": rows[i]} for i in ctx.live})
                    grads = yield from ctx.upload("dL/dh_G", self._rows_spec("grad", len(batch)))
                    if not grads:
                        continue
                    step_graph_net(h_graph, grads)
                    through_graph = x.grad.cpu().numpy() * len(grads)
                    yield from ctx.scatter("dL/dh_c", {i: {"grad": through_graph[i]} for i in ctx.live})
                count_release(released, "train")  # each training window once per epoch

        def evaluate(split: str, windows: int):
            with ctx.phase("evaluation"):
                yield from encodings(split, windows)
                return rmse_mae((yield from released_errors(ctx, errors_spec(split))))

        with ctx.phase("set-up"):  # 0.
            yield from ctx.start_round(0)
            counts = yield from ctx.upload(WINDOW_COUNTS.name, WINDOW_COUNTS)
            windows = _agreed_counts(counts)
            yield from server_normalisation(ctx)
            yield from ctx.broadcast("model", client_weights)
        history = []
        for r in range(c.rounds):
            if r:
                with ctx.phase("set-up"):
                    yield from ctx.start_round(r)
            contributors = len(ctx.live)
            if c.variant == "at+fedavg":
                contributors = yield from fedavg()  # 1.-2.
            if c.variant.startswith("at"):
                yield from alternating_training(r)  # 3.-5.
            else:
                yield from split_learning(r)  # SL: 1.-2.
                if c.variant == "sl+fedavg":
                    contributors = yield from fedavg()  # 3.
            val_rmse, val_mae = yield from evaluate("val", windows["val"])  # 6.
            history.append({"round": r, "clients": contributors, "val_rmse": val_rmse, "val_mae": val_mae})
            ctx.report(r, clients=contributors, val_rmse=val_rmse, val_mae=val_mae)
        test_rmse, test_mae = yield from evaluate("test", windows["test"])
        metrics: dict[str, Any] = {"plan": self.name, "variant": c.variant, "rounds": history, "test_rmse": test_rmse, "test_mae": test_mae,
                                   "clients": len(ctx.live), "windows": windows}
        if c.dp_sigma > 0:
            spent = {i: epsilon_of(float(c.dp_sigma), max(n.values()), c.dp_delta) for i, n in releases.items() if max(n.values())}
            metrics["privacy"] = {
                "mechanism": f"Gaussian on uploaded h_c rows: clip {c.dp_clip:g}, sigma {c.dp_sigma:g}, applied by each client",
                "unit": next(iter(spent.values())).unit if spent else None,
                "delta": c.dp_delta,
                "epsilon_max": max((s.epsilon for s in spent.values()), default=0.0),
                "epsilon_per_client": {str(i): s.epsilon for i, s in sorted(spent.items())},
                "releases_per_client": {str(i): max(n.values()) for i, n in sorted(releases.items())},
            }
        return metrics

    # -- client (Algorithm 2) ---------------------------------------------------------------

    def client(self, ctx: ClientContext):
        c = self.config
        raw = ctx.data
        yield ctx.upload(WINDOW_COUNTS.name, {"windows": np.array([len(raw.y[s]) for s in SPLITS], dtype=np.float32)})  # 0.
        data, mean, std = yield from client_normalisation(ctx, raw)
        model = GRUSeq2Seq(hidden_size=c.hidden_size, graph_size=c.hidden_size)
        load_weights(model, (yield ctx.receive("model")))
        x, y, tod = data.sensor("train", 0)
        h_graph = np.zeros((len(x), c.hidden_size), dtype=np.float32)  # h_G,c,i = 0 in the first round
        privacy = self.privacy_hook()
        step = 0

        def encode(split: str) -> np.ndarray:
            with single_thread(), torch.no_grad():
                return model.encode(torch.as_tensor(data.sensor(split, 0)[0])).numpy()

        def evaluate(split: str):
            yield ctx.upload(f"h_c:{split}", {"h": encode(split)}, privacy)
            g = (yield ctx.receive(f"h_G:{split}"))["h"]
            yield from report_errors(ctx, split, error_sums(model, *data.sensor(split, 0), mean=mean, std=std, graph=g))

        def fedavg():
            try:
                total = yield ctx.secure_sum("weights", weights_of(model))
                load_weights(model, {k: v / len(total.contributors) for k, v in total.values.items()})
            except SumAbandoned:
                pass  # the server gave this round's FedAvg up: keep the local model

        def loss_of(hidden: torch.Tensor, batch: np.ndarray, g: torch.Tensor, coin: torch.Generator) -> torch.Tensor:
            """This client's loss on a server batch, given the server's h_G for it."""
            with single_thread():
                prediction = model.decode(hidden, torch.as_tensor(x[batch]), torch.as_tensor(tod[batch]), graph=g,
                                          targets=torch.as_tensor(y[batch]), teacher_forcing=curriculum(step, c.cl_decay_steps), generator=coin)
                return torch.nn.functional.mse_loss(prediction, torch.as_tensor(y[batch]))

        def alternating_training(r: int):
            nonlocal step, h_graph
            hidden = torch.as_tensor(encode("train"))
            yield ctx.upload("h_c:train", {"h": hidden.numpy()}, privacy)  # 3.
            coin = self._coin(ctx.client_id, r)
            for epoch in range(c.server_rounds):  # 4.
                for batch in server_batches(self.seed, r, epoch, len(x), c.server_batch_size, c.max_server_batches):
                    g = torch.tensor((yield ctx.receive("h_G"))["h"], requires_grad=True)
                    loss = loss_of(hidden[torch.as_tensor(batch)], batch, g, coin)
                    with single_thread():
                        (grad,) = torch.autograd.grad(loss, g)
                    yield ctx.upload("dL/dh_G", {"grad": grad.numpy()})
                    step += 1
            h_graph = (yield ctx.receive("h_G:train"))["h"]  # 5.

        def split_learning(r: int):
            """SL: the encoder's h_c goes up per batch; the decoder's dL/dh_G goes up; the
            encoder trains on its own loss plus the gradient the server sends back through the GN.
            With DP the upload is noised and the returned gradient is applied to the clean h_c
            (the noise is additive; clipping is treated as the identity in the backward pass)."""
            nonlocal step
            optimiser = torch.optim.Adam(model.parameters(), lr=c.lr)
            coin = self._coin(ctx.client_id, r)
            for batch in server_batches(self.seed, r, 0, len(x), c.server_batch_size, c.max_server_batches):
                with single_thread():
                    hidden = model.encode(torch.as_tensor(x[batch]))
                yield ctx.upload("h_c", {"h": hidden.detach().numpy()}, privacy)
                g = torch.tensor((yield ctx.receive("h_G"))["h"], requires_grad=True)
                loss = loss_of(hidden, batch, g, coin)
                with single_thread():
                    (grad,) = torch.autograd.grad(loss, g, retain_graph=True)
                yield ctx.upload("dL/dh_G", {"grad": grad.numpy()})
                through_graph = torch.tensor((yield ctx.receive("dL/dh_c"))["grad"])
                with single_thread():
                    optimiser.zero_grad()
                    torch.autograd.backward([loss, hidden], [None, through_graph])
                    optimiser.step()
                step += 1

        for r in range(c.rounds):
            if c.variant.startswith("at"):
                trained = train_local(model, x, y, tod, graph=h_graph, rng=ctx.rng("batches", r), epochs=c.client_rounds, max_steps=c.max_local_steps,
                                      batch_size=c.batch_size, lr=c.lr, decay_steps=c.cl_decay_steps, start_step=step)  # 1.
                step += trained.steps
                if c.variant == "at+fedavg":
                    yield from fedavg()  # 2.
                yield from alternating_training(r)  # 3.-5.
            else:
                yield from split_learning(r)
                if c.variant == "sl+fedavg":
                    yield from fedavg()
            yield from evaluate("val")  # 6.
        yield from evaluate("test")


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
