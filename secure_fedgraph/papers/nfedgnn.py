"""nFedGNN (Gao, Guo, Gong, "One Node Per User: Node-Level Federated Learning for Graph Neural
Networks", arXiv 2409.19513), Algorithm 1 with the graph-Laplacian term of eq. 7, as a
protocol: one logical client per graph node (user), each holding one feature vector.

Who holds what. User i: its feature vector x_i (nothing else) and its own first-layer weight
W_i and Adam state. The server: the graph (edge_index), the labels, the second layer, the
first layer's aggregation (GCN: the normalised adjacency and bias; GAT: the shared attention,
Appendix D) and its Adam state. The server learns every h_i it receives (split learning;
noised with ``dp_sigma`` > 0) and, with the FedAvg'ed variant, the average of the W_i, never
x_i or a W_i (threat_model.md NF-*). The labels of the validation and test nodes serve only
the evaluation the paper reports, as its server would.

Per round r (comments "A1 n" number Algorithm 1's lines, which the paper's text describes):
  A1 5-6  every user computes h_i = drop(x_i) W_i and uploads it through its DP hook, with its
          evaluation latent x_i W_i in the rounds that evaluate (``eval_every``);
  A1 7    the server evaluates (val/test accuracy with the evaluation latents), then runs the
          split model on the received H: cross-entropy on the training nodes plus
          lambda * sum_(i,j) in E ||h_i - h_j||^2 (eq. 7, ``laplacian``; GAT: every element of
          the K heads alike, Appendix D's first scheme);
  A1 8    steps its Adam (weight decay) on the server parameters;
  A1 9    scatters dL/dh_i to each user;
  A1 11-12 each user steps its own Adam on dL/dW_i = drop(x_i)^T dL/dh_i.
  FedAvg  (``user_weights="fedavg"``; with ``laplacian=0`` it is the paper's CNFGNN-adapted
          baseline, Sec. 4.1: "the server averaging the received local models") every user then
          contributes W_i to a secure sum and loads the average.
  FedSGD  (``user_weights="fedsgd"``; a correct federated optimisation of one shared W) instead
          of A1 11-12 every user contributes its dL/dW_i to a secure sum, and every user takes
          the same Adam step on the sum, the gradient of the whole loss: the users hold one W,
          the centralised model's first layer. Its W^(0) is shared too: the run seed's, or with
          users' own randomness the sum of their own Glorot draws over sqrt(N) (one secure sum
          before round 0), which has Glorot's variance and which no user chose alone.
After the last round every user uploads x_i W_i once more for the final evaluation.

Why per-user W_i by default: the paper's users keep their own W_i, and the Laplacian term is
what ties them together (Section 3.4: a labelled user's model fits its own vector; the term
makes neighbours' latents agree). FedAvg'ing W_i instead costs F x d values per user and round
and shows the server the average model; it is offered as ``user_weights="fedavg"``. Averaging
each user's own Adam step divides a row's movement by the share of users whose features touch
it (on Cora a word is held by 34 of 2,708 users on average, 15 at the median), so the averaged W
moves slowly (a uniform guess for about 60 rounds on Cora); ``"fedsgd"`` is the same
communication done right (docs/papers/nfedgnn.md, "The baseline").

Deviations and choices the paper leaves open (research/papers-code-facts.md section 2): the
Laplacian is the unnormalised one on the received latents, computed by the server (which has
them all); users row-normalise their own x_i (as Kipf and Welling, and DGL, do); each user
draws its own Glorot W_i^(0) and dropout masks from its own randomness (``user_randomness``:
the server cannot regenerate them, NF-INIT; ``run_seed`` gives every user the seeded W^(0), the
centralised model's start, which the server can compute too); weight decay is 5e-4 on both
sides (the paper's value did not survive its text), a user's only on the entries its gradient
reaches that round (Sec. 3.3: users the training signal does not reach keep their models;
torch's L2-in-Adam would move them a full lr step a round on decay alone); evaluation
uses a separate dropout-free latent; dL/dh_i is of the loss over all labelled nodes (the mean
cross-entropy), not per user. With DP the server's gradient is taken at the noised h_i and
applied to the clean one (the noise is additive).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from secure_fedgraph import privacy
from secure_fedgraph.errors import ConfigError, SumAbandoned
from secure_fedgraph.papers.base import Plan
from secure_fedgraph.papers.dp_options import DPOptions
from secure_fedgraph.protocol.engine.contexts import ClientContext, ServerContext
from secure_fedgraph.protocol.core.spec import SumSpec, TensorSpec
from secure_fedgraph.seeds import derive_seed
from secure_fedgraph.training.node_classification import MODELS, PAPER_SETTINGS, accuracy, build_model, laplacian_penalty, normalise_rows
from secure_fedgraph.training.node_user import NodeUser, glorot_from_uniforms, glorot_rows
from secure_fedgraph.validation import positive, positive_number

DATASET_NODES = {"Cora": 2708, "CiteSeer": 3327, "PubMed": 19717}  # one user per node
USER_WEIGHTS = ("own", "fedavg", "fedsgd")
USER_RANDOMNESS = ("private", "run_seed")


@dataclass(frozen=True)
class NFedGNNConfig(DPOptions):
    """Options of the nfedgnn plan (``--set KEY=VALUE``); defaults are the paper's (Section 4).

    Attributes:
        dataset: "Cora", "CiteSeer" or "PubMed" (Planetoid, public split).
        model: "gcn" (16 hidden, dropout 0.5, lr 0.1) or "gat" (8 heads of 16, dropout 0.6, lr 0.01).
        users: the first ``users`` nodes and the subgraph among them (None: every node); small runs.
        rounds: FL rounds (200).
        laplacian: lambda of eq. 7 (0: nFedGNN without the regulariser).
        user_weights: "own" (each user's private W_i), "fedavg" (each user's own Adam step, then the W_i averaged
            through a secure sum: the paper's CNFGNN-adapted baseline) or "fedsgd" (the users' dL/dW_i summed
            through a secure sum, one shared Adam step on the sum: one shared W, the centralised first layer).
        hidden / heads / dropout / lr / weight_decay: the model's (None: the paper's for ``model``); a user applies
            weight_decay only to the entries of W_i its gradient reaches that round (training/node_user.py).
        user_lr: the users' Adam learning rate on their W_i (None: ``lr``, as the paper's one rate).
        eval_every: rounds between evaluations (each costs one more latent per user, and with DP one more release).
        dp_sigma / dp_clip / dp_delta: Gaussian noise multiplier on each uploaded h_i (0: none), its L2 clip, and delta
            (papers/dp_options.py).
        user_randomness: where a user's W_i^(0) and dropout masks come from: "private" (its own
            cryptographic randomness, the default: the server cannot regenerate them, NF-INIT) or
            "run_seed" (one Glorot W^(0) for every user and masks from the run seed: the centralised
            model's start, the earlier results' setting; the server can regenerate both, so a
            user's round-0 latents are exact linear views of x_i; clients refuse it unless started
            with --allow-seeded-randomness).
        seed: the run seed (the server's model and dropout; the users' W^(0) and masks with user_randomness=run_seed).
    """

    dataset: str = "Cora"
    model: str = "gcn"
    users: int | None = None
    rounds: int = 200
    laplacian: float = 0.0
    user_weights: str = "own"
    hidden: int = 16
    heads: int = 8
    dropout: float | None = None
    lr: float | None = None
    user_lr: float | None = None
    weight_decay: float = 5e-4
    eval_every: int = 1
    user_randomness: str = "private"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dataset not in DATASET_NODES:
            raise ConfigError(f"dataset must be one of {tuple(DATASET_NODES)}, got {self.dataset!r}")
        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.user_weights not in USER_WEIGHTS:
            raise ConfigError(f"user_weights must be one of {USER_WEIGHTS}, got {self.user_weights!r}")
        if self.user_randomness not in USER_RANDOMNESS:
            raise ConfigError(f"user_randomness must be one of {USER_RANDOMNESS}, got {self.user_randomness!r}")
        positive("users", self.users, 2, optional=True)
        if self.users is not None and self.users > DATASET_NODES[self.dataset]:
            raise ConfigError(f"users must be at most {DATASET_NODES[self.dataset]} ({self.dataset}'s nodes), got {self.users}")
        for name in ("rounds", "hidden", "heads", "eval_every"):
            positive(name, getattr(self, name))
        for name in ("laplacian", "weight_decay"):
            positive_number(name, getattr(self, name), zero_ok=True)
        super().__post_init__()  # dp_sigma, dp_clip, dp_delta
        for name in ("lr", "user_lr"):
            if getattr(self, name) is not None:
                positive_number(name, getattr(self, name))
        if self.dropout is not None and not (isinstance(self.dropout, int | float) and 0 <= self.dropout < 1):
            raise ConfigError(f"dropout must be a number in [0, 1), got {self.dropout!r}")

    @property
    def latent_size(self) -> int:
        """d: the size of one user's upload (GAT: K heads of ``hidden``)."""
        return self.hidden * (self.heads if self.model == "gat" else 1)

    @property
    def model_dropout(self) -> float:
        return PAPER_SETTINGS[self.model]["dropout"] if self.dropout is None else float(self.dropout)

    @property
    def model_lr(self) -> float:
        return PAPER_SETTINGS[self.model]["lr"] if self.lr is None else float(self.lr)

    @property
    def users_lr(self) -> float:
        return self.model_lr if self.user_lr is None else float(self.user_lr)


@dataclass(frozen=True)
class LabelledGraph:
    """What the nFedGNN server holds: the topology, the labels and the split, never a feature."""

    edge_index: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    features: int  # F, the size of a user's vector (public: the users' W_i shape)
    classes: int

    @property
    def nodes(self) -> int:
        return int(self.y.shape[0])


@functools.lru_cache(maxsize=4)
def _graph(name: str, data_dir: str | None, users: int | None):
    """The dataset (once per process), cut to the first ``users`` nodes and the edges among them."""
    from secure_fedgraph.data.planetoid import load_cached
    from torch_geometric.utils import subgraph

    graph = load_cached(name, data_dir)
    if users is None:
        return graph
    keep = torch.arange(users)
    edge_index, _ = subgraph(keep, graph.edge_index, num_nodes=graph.num_nodes)
    return type(graph)(graph.name, graph.x[:users], edge_index, graph.y[:users], graph.train_mask[:users], graph.val_mask[:users],
                       graph.test_mask[:users])


@functools.lru_cache(maxsize=4)
def initial_user_weight(seed: int, features: int, latent: int) -> np.ndarray:
    """The seeded W^(0) (F, d), Glorot as PyG's Linear: with ``user_randomness=run_seed`` every
    user starts from it (once per process), and so can the server compute it."""
    return glorot_rows(torch.Generator().manual_seed(derive_seed(seed, "initial user weight") % 2**63), features, latent).numpy()


class NFedGNN(Plan):
    """nFedGNN's Algorithm 1 (see the module docstring)."""

    name = "nfedgnn"
    Config = NFedGNNConfig
    clients_field = "users"
    uploads_activations = True  # every h_i: clients refuse less noise than their --min-dp-sigma

    @property
    def seeded_randomness(self) -> bool:
        """Whether users draw their W^(0) and dropout masks from the run seed (clients refuse it by default, NF-INIT)."""
        return self.config.user_randomness == "run_seed"

    def client_ids(self) -> list[int]:
        c = self.config
        return list(range(DATASET_NODES[c.dataset] if c.users is None else c.users))

    def load_server_data(self, data_dir: str | os.PathLike | None) -> LabelledGraph:
        """The graph and the labels; the features stay out of the server's hands."""
        g = _graph(self.config.dataset, None if data_dir is None else str(data_dir), self.config.users)
        return LabelledGraph(g.edge_index, g.y, g.train_mask, g.val_mask, g.test_mask, int(g.x.shape[1]), int(g.y.max()) + 1)

    def load_client_data(self, client_id: int, data_dir: str | os.PathLike | None) -> np.ndarray:
        """User ``client_id``'s own feature vector, row-normalised by the user (its node's row only)."""
        g = _graph(self.config.dataset, None if data_dir is None else str(data_dir), self.config.users)
        return normalise_rows(g.x[client_id]).numpy()

    def latent_spec(self, name: str, tensors: tuple[str, ...]) -> SumSpec:
        """An upload of one row of d values per named latent (one row: the DP hook clips the user's whole latent)."""
        return SumSpec(name, tuple(TensorSpec(t, (1, self.config.latent_size)) for t in tensors))

    def privacy_hook(self, ctx: ClientContext) -> privacy.GaussianRows | None:
        c = self.config
        return privacy.GaussianRows(c.dp_clip, float(c.dp_sigma), noise=ctx.noise("h")) if c.dp_sigma > 0 else None

    def privacy_unit(self) -> privacy.Unit:
        """What the reported epsilon protects: one user's feature vector x_i (NF-UNIT)."""
        return privacy.USER_FEATURES

    def released(self, latents: int) -> privacy.RowRelease | None:
        """What an upload of ``latents`` latents releases of a user's one row x_i, accounted at
        sigma/2: replacing x_i moves a clipped latent by up to 2 x clip (None without DP)."""
        c = self.config
        return privacy.RowRelease("x", [0] * latents, float(c.dp_sigma) / 2) if c.dp_sigma > 0 else None

    def planned_releases(self) -> int:
        """K: the latents each user uploads over the run (one per round, one more per evaluating
        round, one at the end), each a release of its one row x_i."""
        c = self.config
        return c.rounds + sum(self.evaluates(r) for r in range(c.rounds)) + 1

    def calibrated(self, target_epsilon: float, *, data_dir: str | os.PathLike | None = None, option: str | None = None) -> NFedGNN:
        """This plan with the least ``dp_sigma`` whose epsilon after the planned releases is at
        most ``target_epsilon`` (opacus' search, at sigma / 2: see :meth:`released`)."""
        c = self.config
        if (option or "dp_sigma") != "dp_sigma":
            raise ConfigError(f"plan nfedgnn calibrates dp_sigma, not {option!r}")
        if c.dp_sigma:
            raise ConfigError(f"a target epsilon calibrates dp_sigma: leave it out (got {c.dp_sigma:g})")
        sigma = privacy.calibrate_sigma(target_epsilon=target_epsilon, delta=c.dp_delta, sample_rate=1.0, steps=self.planned_releases())
        return NFedGNN(dataclasses.replace(c, dp_sigma=2 * sigma))

    def evaluates(self, round_index: int) -> bool:
        return round_index % self.config.eval_every == 0

    def server_model(self, graph: LabelledGraph) -> torch.nn.Module:
        """The server half of the split model (layer 1's aggregation, layer 2), seeded."""
        c = self.config
        with torch.random.fork_rng(devices=[]):  # PyG initialises from the global generator: seed it here, restore it after
            torch.manual_seed(derive_seed(self.seed, "server", "initial model") % 2**63)
            return build_model(c.model, features=graph.features, classes=graph.classes, hidden=c.hidden, heads=c.heads,
                               dropout=c.model_dropout, split=True)

    def weights_spec(self, features: int, name: str = "W") -> SumSpec:
        return SumSpec(name, (TensorSpec("W", (features, self.config.latent_size)),))

    @property
    def weights_sum(self) -> str:
        """The name of a round's secure sum of the users' weights (fedavg) or weight gradients (fedsgd)."""
        return "W" if self.config.user_weights == "fedavg" else "dL/dW"

    @property
    def shares_initial_sum(self) -> bool:
        """Whether the users agree a shared W^(0) through a secure sum first (fedsgd with their own randomness)."""
        return self.config.user_weights == "fedsgd" and not self.seeded_randomness

    # -- server -------------------------------------------------------------------------------

    def server(self, ctx: ServerContext):
        c = self.config
        graph: LabelledGraph = ctx.data
        model = self.server_model(graph)
        optimiser = torch.optim.Adam(model.parameters(), lr=c.model_lr, weight_decay=c.weight_decay)
        summing = c.user_weights != "own"
        history: list[dict[str, Any]] = []
        for r in range(c.rounds):
            yield from ctx.start_round(r, keys=summing)  # per-user W_i: no secure sum, no key set-up
            if r == 0 and self.shares_initial_sum:
                with ctx.phase("fedsgd"):
                    yield from ctx.secure_sum(self.weights_spec(graph.features, "W0"))
            evaluating = self.evaluates(r)
            with ctx.phase("latents"):  # A1 5-6
                names = ("h", "h_eval") if evaluating else ("h",)
                received = yield from ctx.upload("h", self.latent_spec("h", names), releases=self.released(len(names)))
            row: dict[str, Any] = {"round": r, "users": len(received)}
            if evaluating:  # A1 7 (evaluation): the model after r rounds
                row.update(self.evaluate(model, graph, received, "h_eval"))
            h = _stack(received, "h", graph.nodes, c.latent_size).requires_grad_()
            model.train()
            with torch.random.fork_rng(devices=[]):  # the server's dropout: from the run seed and the round
                torch.manual_seed(derive_seed(self.seed, "server", "dropout", r) % 2**63)
                logits = model(h, graph.edge_index)
            task = F.cross_entropy(logits[graph.train_mask], graph.y[graph.train_mask])
            loss = task + c.laplacian * laplacian_penalty(h, graph.edge_index) if c.laplacian else task  # eq. 7
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()  # A1 8
            grad = h.grad.numpy()
            with ctx.phase("gradients"):
                yield from ctx.scatter("dL/dh", {i: {"grad": grad[i : i + 1]} for i in received})  # A1 9
            if summing:
                with ctx.phase(c.user_weights):
                    key = "averaged" if c.user_weights == "fedavg" else "summed"
                    try:
                        row[key] = len((yield from ctx.secure_sum(self.weights_spec(graph.features, self.weights_sum))).contributors)
                    except SumAbandoned:
                        row[key] = 0
            row.update(train_loss=float(loss.detach()), task_loss=float(task.detach()))
            history.append(row)
            ctx.report(r, **{k: v for k, v in row.items() if k != "round" and v is not None})
        yield from ctx.start_round(c.rounds, keys=False)
        with ctx.phase("latents"):
            received = yield from ctx.upload("h_eval", self.latent_spec("h_eval", ("h_eval",)), releases=self.released(1))
        final = self.evaluate(model, graph, received, "h_eval")
        ctx.report(c.rounds, users=len(received), **{k: v for k, v in final.items() if v is not None})
        evaluated = [row for row in history if "val_acc" in row] + [{"round": c.rounds, **final}]
        best = max(evaluated, key=lambda row: -1.0 if row["val_acc"] is None else row["val_acc"])
        metrics: dict[str, Any] = {"plan": self.name, "dataset": c.dataset, "model": c.model, "laplacian": c.laplacian,
                                   "user_weights": c.user_weights, "users": len(ctx.clients), "rounds": history,
                                   "test_acc": final["test_acc"], "val_acc": final["val_acc"], "best_val_round": best["round"],
                                   "best_val_test_acc": best["test_acc"], "paper_table1_mib": self.paper_table1_mib(len(ctx.clients), graph.features)}
        if c.dp_sigma > 0:
            metrics["privacy"] = ctx.accountant.report(
                ctx.clients, unit=self.privacy_unit(), delta=c.dp_delta,
                mechanism=f"Gaussian on each uploaded h_i: clip {c.dp_clip:g}, sigma {c.dp_sigma:g}, applied by each user; accounted at "
                          f"sigma/2 = {c.dp_sigma / 2:g}, since replacing x_i moves a clipped h_i by up to 2 x clip")
        return metrics

    def evaluate(self, model: torch.nn.Module, graph: LabelledGraph, received: dict[int, dict[str, np.ndarray]], name: str) -> dict[str, float]:
        """Accuracy on the validation and test nodes from the users' evaluation latents."""
        model.eval()
        with torch.no_grad():
            logits = model(_stack(received, name, graph.nodes, self.config.latent_size), graph.edge_index)
        return {"val_acc": accuracy(logits, graph.y, graph.val_mask), "test_acc": accuracy(logits, graph.y, graph.test_mask)}

    def paper_table1_mib(self, users: int, features: int) -> float:
        """Table 1's count: MiB of float32 over the run's rounds for all users: the training
        latents, plus each user's F x d weights (or weight gradients) for the summed variants."""
        c = self.config
        per_user = c.latent_size + (features * c.latent_size if c.user_weights != "own" else 0)
        return users * per_user * 4 * c.rounds / 2**20

    # -- user ---------------------------------------------------------------------------------

    def user_draws(self, ctx: ClientContext) -> Callable[..., np.ndarray]:
        """``draws(count, *labels)``: uniforms in (0, 1) for the user's W^(0) and dropout masks.
        By default its own AES-CTR stream under fresh OS keys (``ctx.noise``, as DP noise: the
        client's --reproducible-randomness opt-in derives them from the run seed), so the server
        cannot regenerate W^(0) and invert round 0's latents (NF-INIT); with
        ``user_randomness=run_seed``, the run seed's generator."""
        if self.seeded_randomness:
            return lambda count, *labels: ctx.rng(*labels).random(count)
        return ctx.noise("user randomness").uniform

    def initial_weight(self, draws: Callable[..., np.ndarray], features: int) -> np.ndarray:
        """The user's W^(0) (F, d): its own Glorot draw, or the seeded one every user shares."""
        d = self.config.latent_size
        if self.seeded_randomness:
            return initial_user_weight(self.seed, features, d)
        return glorot_from_uniforms(draws(features * d, "initial weight"), features, d)

    def client(self, ctx: ClientContext):
        c = self.config
        x = ctx.data
        draws = self.user_draws(ctx)
        user = NodeUser(x, self.initial_weight(draws, x.shape[0]), lr=c.users_lr, weight_decay=c.weight_decay, dropout=c.model_dropout,
                        all_rows=c.user_weights != "own")
        hook = self.privacy_hook(ctx)
        if self.shares_initial_sum:  # one W^(0) for all, drawn by all: sum / sqrt(N) keeps Glorot's variance
            total = yield ctx.secure_sum("W0", {"W": user.full_weight()})
            user.load_weight(total.values["W"] / np.sqrt(len(total.contributors)))
        for r in range(c.rounds):
            tensors = {"h_eval": user.latent()[None]} if self.evaluates(r) else {}
            tensors["h"] = user.latent(draws(x.shape[0], "dropout", r))[None]
            yield ctx.upload("h", tensors, hook)  # A1 5-6
            grad = (yield ctx.receive("dL/dh"))["grad"][0]
            if c.user_weights == "fedsgd":
                try:
                    total = yield ctx.secure_sum("dL/dW", {"W": user.weight_gradient(grad)})
                    user.step_on(total.values["W"])
                except SumAbandoned:
                    pass  # the server gave this round's sum up: no step, so W stays shared
                continue
            user.step(grad)  # A1 11-12
            if c.user_weights == "fedavg":
                try:
                    total = yield ctx.secure_sum("W", {"W": user.full_weight()})
                    user.load_weight(total.values["W"] / len(total.contributors))
                except SumAbandoned:
                    pass  # the server gave this round's average up: keep the local W_i
        yield ctx.upload("h_eval", {"h_eval": user.latent()[None]}, hook)


def _stack(received: dict[int, dict[str, np.ndarray]], name: str, nodes: int, size: int) -> torch.Tensor:
    """H (nodes, d) from the users' uploads; a user whose upload is missing (it dropped) is zeros."""
    h = torch.zeros(nodes, size)
    for i, tensors in received.items():
        h[i] = torch.as_tensor(tensors[name][0])
    return h
