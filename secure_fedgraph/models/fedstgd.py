"""FedSTGD's client model (Wang et al., AAAI 2026): a TGCRN-style graph-convolutional GRU whose
graph is split across clients, with the inter-client part computed through sums.

One client holds ``N_i`` of the ``N`` stations. At every GRU step t and for k in {1, 2} (the
gate input I_1 = [x ‖ h] and the candidate input I_2 = [x ‖ r ⊙ h]) it needs eq. 21,

    L_ki = sum_j [<M_i, M_j> ⊙ (eta · 1 + <Ẽ_i, Ẽ_j>)] I_kj          (M_i = MLP(x_i), eq. 18)
         = eta · M_i · sum_j M_j^T I_kj  +  Γ(M_i, Ẽ_i) · sum_j Γ(M_j, Ẽ_j)^T I_kj    (eqs. 22, 23)

so client j contributes P_kj = M_j^T I_kj and Q_kj = Γ_j^T I_kj (:func:`contribution`) and
every client uses the two sums (:func:`aggregate`). Γ is Theorem 1's column-wise product.

The model is written as *segments* between sums (:meth:`FedSTGDModel.segment`), each taking
the carried state and the previous sum and returning the new state and the next contribution;
a driver decides what a sum is (a secure sum, a local sum, or a torch sum over all clients in
one autograd graph for the reference), and :mod:`secure_fedgraph.training.sum_tape` cuts the
graph at every sum so the gradient through the sums can itself be a secure sum.

Choices the paper leaves open (docs/papers/fedstgd.md):
- TGCRN's node- and time-adaptive weights W_n = [E_v,n ‖ E_τ,t] · pool (eqs. 13 to 15 write
  L Ê W) go through a rank-``embed_rank`` projection ``tanh([E_v ‖ E_τ] W_node)``, as TGCRN's
  own ``node = tanh(E W_node)``; without it one layer costs 128·in·out weights per node and
  sample. Chebyshev supports are TGCRN's [I, L] (the node's own input and the graph term).
- L is divided by the total number of stations N (public): eq. 21 has no normalisation and
  TGCRN's row softmax does not decompose into sums.
- One GRU layer in the encoder and one in the decoder (TGCRN: two each); the decoder runs over
  the encoder's outputs, as TGCRN's, and a linear head maps each decoder state to inflow and
  outflow. Time embeddings are one learnable vector per 15-minute slot (TGCRN: fixed sinusoids;
  the paper: learnable E_τ), and eta_t = <E_τ[slot t], E_τ[slot t-1]> (eq. 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn


ADJACENCIES = ("decomposed", "exact", "off")  # eq. 21; TGCRN's eq. 5 (one party); no graph ("w/o All,All")
MLP_UNITS = 4  # "an initial layer mapping inputs to four neurons, ReLU, a final Softmax"


def gamma(features: Tensor, embedding: Tensor) -> Tensor:
    """Theorem 1's Γ: columns w_k ⊙ v_l in lexicographic (k, l) order.

    ``features`` (..., N, d) and ``embedding`` (N, d') or (..., N, d') give (..., N, d·d'), so
    that (F_i F_j^T) ⊙ (E_i E_j^T) = Γ(F_i, E_i) Γ(F_j, E_j)^T."""
    product = features.unsqueeze(-1) * embedding.unsqueeze(-2)
    return product.flatten(-2)


def contribution(mlp: Tensor, gamma_: Tensor, inputs: Tensor) -> dict[str, Tensor]:
    """What client j sends for one k (eqs. 22 and 23, step 1): P = M_j^T I and Q = Γ_j^T I,
    each (B, width, C)."""
    return {"P": mlp.transpose(-1, -2) @ inputs, "Q": gamma_.transpose(-1, -2) @ inputs}


def aggregate(mlp: Tensor, gamma_: Tensor, eta: Tensor, sums: dict[str, Tensor], n_total: int) -> Tensor:
    """Eq. 21 for one client from the summed contributions (step 3): (eta M_i ΣP + Γ_i ΣQ) / N."""
    return (eta[:, None, None] * (mlp @ sums["P"]) + gamma_ @ sums["Q"]) / n_total


def direct_graph_term(mlps: Tensor, embeddings: Tensor, eta: Tensor, inputs: Tensor) -> Tensor:
    """Eq. 21 computed directly on pooled data: [<M, M^T> ⊙ (eta 1 + <Ẽ, Ẽ^T>)] I / N with the
    full (B, N, N) matrix; the reference the decomposition must equal."""
    adjacency = (mlps @ mlps.transpose(-1, -2)) * (eta[:, None, None] + embeddings @ embeddings.transpose(-1, -2))
    return adjacency @ inputs / inputs.shape[-2]


def exact_graph_term(x: Tensor, node_embedding: Tensor, eta: Tensor, inputs: Tensor, alpha: float) -> Tensor:
    """TGCRN's eq. 5 graph without the decomposition (the centralised upper bound):
    [(1 + alpha σ(tanh(<X, X^T>))) ⊙ (<E, E^T> + eta 1)] I / N."""
    periodic = 1.0 + alpha * torch.sigmoid(torch.tanh(x @ x.transpose(-1, -2)))
    adjacency = periodic * (node_embedding @ node_embedding.T + eta[:, None, None])
    return adjacency @ inputs / inputs.shape[-2]


class FourUnitMLP(nn.Module):
    """Linear to 4 units, ReLU, softmax: the paper's MLP for eq. 18 and for GNEA (eq. 19-20)."""

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, MLP_UNITS)

    def forward(self, x: Tensor) -> Tensor:
        return torch.softmax(torch.relu(self.linear(x)), dim=-1)


class AdaptiveConv(nn.Module):
    """TGCRN's node- and time-adaptive graph convolution: out_n = [I_n ‖ L_n] · (e_n · pool) +
    e_n · bias_pool, with e the (B, N, rank) node-time embedding."""

    def __init__(self, rank: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.pool = nn.Parameter(torch.empty(rank * 2 * in_features, out_features))
        self.bias_pool = nn.Parameter(torch.empty(rank, out_features))

    def forward(self, embedding: Tensor, own: Tensor, graph: Tensor) -> Tensor:
        supports = torch.cat([own, graph], dim=-1)
        outer = (embedding.unsqueeze(-1) * supports.unsqueeze(-2)).flatten(-2)
        return outer @ self.pool + embedding @ self.bias_pool


class GraphGRUCell(nn.Module):
    """Eqs. 13 to 16 with their MLP (eq. 18): gates from I_1 = [x ‖ h], candidate from
    I_2 = [x ‖ r ⊙ h], h' = (1 - z) ⊙ h + z ⊙ ĥ."""

    def __init__(self, in_features: int, hidden: int, rank: int) -> None:
        super().__init__()
        self.hidden = hidden
        width = in_features + hidden
        self.mlp = FourUnitMLP(in_features)
        self.gates = AdaptiveConv(rank, width, 2 * hidden)
        self.candidate = AdaptiveConv(rank, width, hidden)


@dataclass(frozen=True)
class ModelShape:
    """The sizes every client and the server agree on (the server needs them for the sums)."""

    hidden: int = 64
    node_dim: int = 64  # d_N
    time_dim: int = 64  # d_T
    embed_rank: int = 8
    channels: int = 2  # inflow, outflow
    steps_in: int = 4
    steps_out: int = 4
    gnea: bool = True  # eqs. 19-20; False: Ẽ = E_v (the "w/o GNEA" ablation)
    slots_per_day: int = 73  # rows of E_τ: HZMetro's 15-minute slots, 05:30 .. 23:30 (the plan passes its data's)

    @property
    def steps(self) -> int:
        return self.steps_in + self.steps_out

    @property
    def n_sums(self) -> int:
        """Sums per forward pass: one per GRU step and k in {1, 2}."""
        return 2 * self.steps

    @property
    def gamma_width(self) -> int:
        return MLP_UNITS * (MLP_UNITS if self.gnea else self.node_dim)

    def sum_width(self, index: int) -> int:
        """C, the width of I_k at sum ``index`` (encoder: x has ``channels``, decoder: ``hidden``)."""
        step = index // 2
        return (self.channels if step < self.steps_in else self.hidden) + self.hidden

    def sum_shapes(self, index: int, batch: int) -> dict[str, tuple[int, int, int]]:
        width = self.sum_width(index)
        return {"P": (batch, MLP_UNITS, width), "Q": (batch, self.gamma_width, width)}


class FedSTGDModel(nn.Module):
    """One client's model: global parameters (FedAvg'ed) and its private node embedding E_v.

    ``n_total`` is the number of stations over all clients (public). The same class is the
    centralised model when one client holds every station; ``adjacency="exact"`` then uses
    TGCRN's undecomposed eq. 5 graph instead of eq. 21, and ``"off"`` drops the graph term
    (Table 3's "w/o All,All").
    """

    def __init__(self, shape: ModelShape, n_stations: int, n_total: int, *, alpha: float = 0.3, adjacency: str = "decomposed") -> None:
        super().__init__()
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        if adjacency == "exact" and n_stations != n_total:
            raise ValueError("the exact (eq. 5) graph needs every station in one model")
        self.shape, self.n_total, self.alpha, self.adjacency = shape, n_total, alpha, adjacency
        s = shape
        self.node_embedding = nn.Parameter(torch.empty(n_stations, s.node_dim))  # private E_v
        self.time_embedding = nn.Parameter(torch.empty(s.slots_per_day, s.time_dim))  # E_τ per slot
        self.node_projection = nn.Linear(s.node_dim, s.embed_rank, bias=False)
        self.time_projection = nn.Linear(s.time_dim, s.embed_rank)
        self.gnea = FourUnitMLP(s.node_dim)  # W_NL of eq. 19
        self.encoder = GraphGRUCell(s.channels, s.hidden, s.embed_rank)
        self.decoder = GraphGRUCell(s.hidden, s.hidden, s.embed_rank)
        self.head = nn.Linear(s.hidden, s.channels)

    # -- parameters ---------------------------------------------------------------------------

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Seeded initialisation (the server's seed for global weights; a client re-seeds its
        own E_v with :meth:`reset_private`)."""
        for name, p in self.named_parameters():
            if name == "node_embedding":
                continue
            fan_in = p.shape[0] if p.dim() > 1 else p.shape[-1]
            with torch.no_grad():
                if name == "time_embedding":
                    p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]), generator=generator)
                else:
                    p.uniform_(-1.0 / math.sqrt(fan_in), 1.0 / math.sqrt(fan_in), generator=generator)
        self.reset_private(generator)

    def reset_private(self, generator: torch.Generator) -> None:
        with torch.no_grad():
            self.node_embedding.normal_(0.0, 1.0 / math.sqrt(self.shape.node_dim), generator=generator)

    def global_state(self) -> dict[str, Tensor]:
        """Everything FedAvg'ed: all parameters but the private node embedding."""
        return {k: v for k, v in self.state_dict().items() if k != "node_embedding"}

    # -- per-batch constants (parameters and public time slots only) ---------------------------

    def batch_constants(self, slots: Tensor) -> dict[str, Tensor]:
        """eta (B, steps), node-time embedding (B, steps, N_i, rank) and Ẽ (N_i, d').

        ``slots`` (B, steps_in + steps_out): the time slot of every input and output step; the
        step before the first input is the slot before it (clamped at the day's first)."""
        previous = torch.cat([(slots[:, :1] - 1).clamp(min=0), slots[:, :-1]], dim=1)
        time = self.time_embedding[slots]
        eta = (time * self.time_embedding[previous]).sum(-1)
        node_time = torch.tanh(self.node_projection(self.node_embedding)[None, None] + self.time_projection(time)[:, :, None])
        embedding = self.gnea(self.node_embedding) if self.shape.gnea else self.node_embedding
        return {"eta": eta, "node_time": node_time, "embedding": embedding}

    # -- segments between sums ----------------------------------------------------------------

    def segment(self, index: int, state: dict[str, Tensor], summed: dict[str, Tensor] | None,
                x: Tensor, constants: dict[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor] | None]:
        """Run from sum ``index - 1`` (its result ``summed``) to sum ``index``.

        Returns the state to carry (every tensor that depends on an earlier sum) and this
        client's contribution to sum ``index``; at ``index == n_sums`` the state holds
        ``prediction`` (B, steps_out, N_i, channels) and the contribution is None.
        ``x``: (B, steps_in, N_i, channels) normalised inputs.
        """
        s = self.shape
        step, k = divmod(index, 2)
        if index > 0 and k == 1:  # the gates of this step from sum (step, k=1)
            cell, t = self._cell(step), step
            graph = self._graph(state, summed, constants, t)
            zr = torch.sigmoid(cell.gates(constants["node_time"][:, t], state["I"], graph))
            z, r = zr.split(s.hidden, dim=-1)
            inputs = torch.cat([state["x"], r * state["h"]], dim=-1)
            return {**state, "z": z, "I": inputs}, contribution(state["M"], state["G"], inputs)
        if index > 0:  # finish step - 1 from sum (step - 1, k=2)
            t = step - 1
            cell = self._cell(t)
            graph = self._graph(state, summed, constants, t)
            candidate = torch.tanh(cell.candidate(constants["node_time"][:, t], state["I"], graph))
            h = (1 - state["z"]) * state["h"] + state["z"] * candidate
            outputs = torch.cat([state["outputs"], h.unsqueeze(1)], dim=1)
            state = {"h": h, "outputs": outputs}
            if index == s.n_sums:
                prediction = self.head(outputs[:, s.steps_in:])
                return {"prediction": prediction}, None
        else:
            batch, _, n, _ = x.shape
            h = x.new_zeros(batch, n, s.hidden)
            state = {"h": h, "outputs": x.new_zeros(batch, 0, n, s.hidden)}
        # start step ``step``: its input, MLP features and Γ, and the contribution for k=1
        x_t = x[:, step] if step < s.steps_in else state["outputs"][:, step - s.steps_in]
        cell = self._cell(step)
        mlp = cell.mlp(x_t)
        gamma_ = gamma(mlp, constants["embedding"])
        inputs = torch.cat([x_t, state["h"]], dim=-1)
        state = {**state, "x": x_t, "M": mlp, "G": gamma_, "I": inputs}
        return state, contribution(mlp, gamma_, inputs)

    def _cell(self, step: int) -> GraphGRUCell:
        return self.encoder if step < self.shape.steps_in else self.decoder

    def _graph(self, state: dict[str, Tensor], summed: dict[str, Tensor], constants: dict[str, Tensor], t: int) -> Tensor:
        eta = constants["eta"][:, t]
        if self.adjacency == "off":  # "w/o All,All": no spatial term at all
            return torch.zeros_like(state["I"])
        if self.adjacency == "exact":
            return exact_graph_term(state["x"], self.node_embedding, eta, state["I"], self.alpha)
        return aggregate(state["M"], state["G"], eta, summed, self.n_total)


def slots_of(x_slot: np.ndarray, y_slot: np.ndarray) -> Tensor:
    """(B, steps_in + steps_out) long tensor of time slots from a window's input and output slots."""
    return torch.as_tensor(np.concatenate([x_slot, y_slot], axis=1), dtype=torch.long)
