"""Attacks on nFedGNN's uploaded latents h_i (papers/nfedgnn.py): one row of d values per user
and upload, noised with ``dp_sigma`` > 0.

* :class:`LatentFeatureReconstruction` and :class:`LatentWordRecovery` (beside NF-DP): a
  server-side decoder from a user's round-0 latents back to its feature vector x_i (Cora's
  bag of words, row-normalised by the user), with a prior from the public slice (its users'
  x_i) and scored on the other users. The input is round 0's pair, the latents whose map from
  x_i the server knows exactly when the users drew W^(0) and their masks from the run seed
  (``user_randomness=run_seed``): the dropout-free ``h_eval`` is exactly x_i W^(0), and the
  training ``h`` is x_i's entries kept by a mask, times W^(0); the server computes W^(0)
  (``initial_user_weight``) and every user's masks (``ctx.rng``) from the run seed, so the pair
  is x_i A_i + noise with a known A_i (F x 2d). By default each user draws both from its own
  randomness (NF-INIT) and the server's A_i is a guess: the attack then measures that guess. Every later latent is x_i times a W_i the user has trained and the server does not
  know. The decoder is the posterior mean of x_i under a Gaussian prior with the public
  slice's mean and shrunk covariance (:class:`LinearDecoder`), the noise's variance measured on
  the public slice's uploads. (A small MLP fitted on the public slice's latents, as for CNFGNN,
  did no better than the guess: measured on 1,000 Cora users, 250 of them public.) Two
  measures: the RMSE of the reconstructed x_i, and the precision of its top-k words, k the
  user's true word count.
* :class:`LatentLinkInference` (beside NF-LINK): do connected users' latents give the edges
  away (LinkTeller-style, Wu et al. 2022)? Every edge among the users and as many sampled
  non-edges are scored by the cosine similarity of the two users' latents (each user's uploads
  over the run, concatenated and standardised per column: what a holder of the latents without
  the graph computes; no fitting). AUC against the 0.5 of a coin. The server itself holds the
  graph; this measures a party that sees the latents but not the edges (threat_model.md NF-LINK).

References, as for CNFGNN (attacks/__init__.py): the random guess (the public slice's mean row;
its most frequent words; AUC 0.5) and, with client transcripts, the same attack on the clean
latents before the DP hook (the no-DP reference).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np

from secure_fedgraph.audit.attacks.base import Attack, AttackContext, public_clients
from secure_fedgraph.audit.attacks.learner import rmse
from secure_fedgraph.audit.findings import AttackResult
from secure_fedgraph.audit.plan_claims import dp_settings, latent_uploads

ATTACK = "attack on the uploads"
GUESS = "random guess"
CLEAN = "no-DP reference (clean h_i)"
FIRST_ROUND_LATENTS = ("h_eval", "h")  # round 0's: x_i W^(0) exactly, and x_i's dropped entries times W^(0)
MAX_EDGES = 20_000  # edges scored (and as many non-edges): enough for an AUC to +-0.01, cheap on any graph


def _latents(context: AttackContext, *, clean: bool, first_round: bool) -> dict[int, np.ndarray] | None:
    """user -> its uploaded latents in upload order, one row (round 0's pair only with
    ``first_round``); None when ``clean`` and a client transcript is missing."""
    view = context.view
    rows: dict[int, list[np.ndarray]] = {}
    for upload in latent_uploads(view):
        if first_round and upload.round != 0:
            continue
        tensors = view.raw_upload(upload) if clean else upload.tensors
        if tensors is None:
            return None
        names = FIRST_ROUND_LATENTS if first_round else sorted(tensors)
        rows.setdefault(upload.client, []).extend(np.asarray(tensors[n], np.float32).ravel() for n in names if n in tensors)
    width = max((len(r) for r in rows.values()), default=0)
    return {c: np.concatenate(r) for c, r in rows.items() if len(r) == width}  # a user missing an upload (it dropped) is left out


def _noise(context: AttackContext) -> tuple[float, float]:
    """(sigma, epsilon) of the run: epsilon inf without noise."""
    sigma = (dp_settings(context.view) or (0.0, 0.0))[0]
    return sigma, (context.epsilon() if sigma > 0 else math.inf)


SHRINK = 0.9  # the prior's covariance: 90% its diagonal, 10% the public slice's sample covariance (250-700 users for 1,433 words)


def round_zero_matrix(plan: Any, user: int, features: int) -> np.ndarray:
    """A_i (F, 2d): round 0's uploads are exactly x_i A_i = [x_i W^(0), drop(x_i) W^(0)] before
    the DP hook when the users drew W^(0) and their masks from the run seed
    (``user_randomness=run_seed``): the server can then compute both (``initial_user_weight``,
    the user's ``ctx.rng``). With the default private randomness this is the server's guess,
    and a wrong one (NF-INIT)."""
    from secure_fedgraph.papers.nfedgnn import initial_user_weight
    from secure_fedgraph.protocol.engine.contexts import client_rng
    from secure_fedgraph.training.node_user import dropout_keep

    c = plan.config
    w0 = initial_user_weight(plan.seed, features, c.latent_size).astype(np.float64)
    p = c.model_dropout
    keep = dropout_keep(client_rng(plan.seed, user, "dropout", 0).random(features), p) / (1.0 - p) if p > 0 else np.ones(features)
    return np.concatenate([w0, keep[:, None] * w0], axis=1)


class LinearDecoder:
    """The posterior mean of x_i given y_i = x_i A_i + N(0, noise I) (the noise's variance as the
    public slice's uploads show it) under a Gaussian prior with the public slice's mean and (shrunk) covariance: E[x | y] = mu + S A (A^T S A + noise I)^-1
    (y - mu A). Linear in y, per user (A_i differs by its dropout mask); the covariance is kept
    as its low-rank public part plus a diagonal, so a user costs O(n F d), not O(F^2 d)."""

    def __init__(self, x_public: np.ndarray, noise: float) -> None:
        x_public = np.asarray(x_public, np.float64)
        self.mu = x_public.mean(axis=0)
        self.centred = (x_public - self.mu) / math.sqrt(max(len(x_public) - 1, 1))
        self.diagonal = (self.centred**2).sum(axis=0)
        self.noise = max(noise, 1e-12)  # a jitter without DP: A^T S A is then near singular

    def __call__(self, a: np.ndarray, y: np.ndarray) -> np.ndarray:
        xa = self.centred @ a  # (n, 2d): S's low-rank part is centred^T centred
        gram = (1 - SHRINK) * xa.T @ xa + SHRINK * (a.T * self.diagonal) @ a + self.noise * np.eye(a.shape[1])
        z = np.linalg.solve(gram, np.asarray(y, np.float64) - self.mu @ a)
        return self.mu + (1 - SHRINK) * self.centred.T @ (xa @ z) + SHRINK * self.diagonal * (a @ z)


class _Decoded:
    """The decoder's output on the private users (and the guess, the truth, the clean reference),
    computed once per audit for both measures."""

    def __init__(self, context: AttackContext) -> None:
        self.ok = False
        uploads = _latents(context, clean=False, first_round=True)
        public, private = public_clients(sorted(uploads or {}))
        if not public or not private:
            return
        truth = {c: np.asarray(context.client_data(c), np.float64) for c in public + private}
        x_public, self.x_private = np.stack([truth[c] for c in public]), np.stack([truth[c] for c in private])
        self.sigma, self.epsilon = _noise(context)
        self.seeded = bool(context.plan.seeded_randomness)
        matrices = {c: round_zero_matrix(context.plan, c, x_public.shape[1]) for c in public + private}

        def noise_of(latents: dict[int, np.ndarray]) -> float:
            """The noise's variance as the public slice's uploads show it (beyond x_i A_i), not as announced."""
            return float(np.mean([np.mean((latents[c] - truth[c] @ matrices[c]) ** 2) for c in public]))

        def decode(latents: dict[int, np.ndarray]) -> np.ndarray:
            decoder = LinearDecoder(x_public, noise_of(latents))
            return np.stack([decoder(matrices[c], latents[c]) for c in private])

        self.public, self.private, self.noise = public, private, noise_of(uploads)
        self.decoded = {ATTACK: decode(uploads)}
        self.guess_row = x_public.mean(axis=0)
        self.guess_words = (x_public > 0).mean(axis=0)  # the public slice's word frequencies
        if self.sigma > 0:
            clean = _latents(context, clean=True, first_round=True)
            if clean is not None and set(clean) >= set(public + private):
                self.decoded[CLEAN] = decode(clean)
        self.ok = True

    @staticmethod
    def of(context: AttackContext) -> _Decoded:
        return context.shared("nfedgnn-decoded", lambda: _Decoded(context))

    def details(self, **more: Any) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "sigma": self.sigma, "public_clients": len(self.public), "private_clients": len(self.private),
                "input": "round 0's h_eval (x_i W^(0)) and h (dropped x_i times W^(0))", "noise_variance": self.noise,
                "users_w0": "seeded: the server's A_i is exact" if self.seeded else "private: the server's A_i is the seeded guess (NF-INIT)", **more}


def top_k_precision(scores: np.ndarray, truth: np.ndarray) -> float:
    """Mean over rows of |top-k(scores) & words| / k, k = the row's true word count (rows without words skipped)."""
    words = truth > 0
    counts = words.sum(axis=1)
    order = np.argsort(-scores, axis=1, kind="stable")
    hits = [words[i, order[i, :k]].sum() / k for i, k in enumerate(counts) if k > 0]
    return float(np.mean(hits)) if hits else math.nan


class _RoundZeroDecoding(Attack):
    """One measure of the decoder's output (:class:`_Decoded`, shared by both measures)."""

    claim = "NF-DP"
    plans = frozenset({"nfedgnn"})
    unit: ClassVar[str]

    @abstractmethod
    def measure(self, d: _Decoded) -> tuple[dict[str, float], str]:
        """Each decoding's value and the guess's (keys as ``d.decoded``, plus GUESS), and the summary's start."""

    @staticmethod
    def show(value: float) -> str:
        return f"{value:.4f}"

    def run(self, context: AttackContext) -> AttackResult | None:
        d = _Decoded.of(context)
        if not d.ok:
            return None
        values, summary = self.measure(d)
        if CLEAN in values:
            summary += f"; the same decoder on the clean h_i {self.show(values[CLEAN])}"
        if not d.seeded:
            summary += "; the users drew W^(0) and their masks privately, so the server's A_i is a guess (NF-INIT)"
        return AttackResult(self.name, self.claim, summary + f" (epsilon {d.epsilon:.3g}, sigma {d.sigma:g})", self.unit, values,
                            d.details(mean_words=float((d.x_private > 0).sum(axis=1).mean())))


class LatentFeatureReconstruction(_RoundZeroDecoding):
    name = "reconstruction of x_i from h_i"
    unit = "RMSE of the row-normalised x_i (lower: more leaked)"

    def measure(self, d: _Decoded) -> tuple[dict[str, float], str]:
        values = {k: rmse(v, d.x_private) for k, v in d.decoded.items()}
        values[GUESS] = rmse(np.broadcast_to(d.guess_row, d.x_private.shape), d.x_private)
        return values, (f"a decoder with a prior from {len(d.public)} public users reconstructs the other {len(d.private)} users' "
                        f"row-normalised features from their round-0 latents with RMSE {values[ATTACK]:.4f}; random guess {values[GUESS]:.4f}")


class LatentWordRecovery(_RoundZeroDecoding):
    name = "words of x_i recovered from h_i"
    unit = "precision of the top-k words, k = the user's word count (higher: more leaked)"

    @staticmethod
    def show(value: float) -> str:
        return f"{value:.1%}"

    def measure(self, d: _Decoded) -> tuple[dict[str, float], str]:
        values = {k: top_k_precision(v, d.x_private) for k, v in d.decoded.items()}
        values[GUESS] = top_k_precision(np.broadcast_to(d.guess_words, d.x_private.shape), d.x_private)
        words = float((d.x_private > 0).sum(axis=1).mean())
        return values, (f"the decoder's top-k words (k: the user's own word count, {words:.1f} on average) are right for {values[ATTACK]:.1%} "
                        f"of the {len(d.private)} private users' words; the public slice's most frequent words {values[GUESS]:.1%}")


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counted half (Mann-Whitney U / n1 n2)."""
    from scipy.stats import rankdata

    ranks = rankdata(np.concatenate([positive, negative]))
    n1, n2 = len(positive), len(negative)
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n2))


def _pairs(context: AttackContext, users: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(edges, non-edges) among ``users``, each (n, 2) with i < j: the run's graph (ground truth,
    from the data folder) and as many pairs sampled from outside it (seeded)."""
    graph = context.plan.load_server_data(context.data_dir)
    index = {u: k for k, u in enumerate(users)}
    edges = {(min(index[a], index[b]), max(index[a], index[b])) for a, b in graph.edge_index.t().tolist()
             if a != b and a in index and b in index}
    rng = np.random.default_rng(context.seed)
    edge_array = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    if len(edge_array) > MAX_EDGES:
        edge_array = edge_array[rng.choice(len(edge_array), MAX_EDGES, replace=False)]
    others: set[tuple[int, int]] = set()
    while len(others) < len(edge_array):
        a, b = rng.integers(0, len(users), 2)
        if a != b and (min(a, b), max(a, b)) not in edges:
            others.add((int(min(a, b)), int(max(a, b))))
    return edge_array, np.array(sorted(others), dtype=np.int64).reshape(-1, 2)


def similarity_auc(latents: dict[int, np.ndarray], users: list[int], edges: np.ndarray, non_edges: np.ndarray) -> float:
    """AUC of the cosine similarity of two users' standardised latents, edges against non-edges."""
    h = np.stack([latents[u] for u in users]).astype(np.float64)
    h = (h - h.mean(axis=0)) / (h.std(axis=0) + 1e-12)
    h /= np.linalg.norm(h, axis=1, keepdims=True) + 1e-12

    def score(pairs: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", h[pairs[:, 0]], h[pairs[:, 1]])

    return auc(score(edges), score(non_edges))


class LatentLinkInference(Attack):
    name = "link inference from h_i"
    claim = "NF-LINK"
    plans = frozenset({"nfedgnn"})

    def run(self, context: AttackContext) -> AttackResult | None:
        uploads = _latents(context, clean=False, first_round=False)
        users = sorted(uploads or {})
        if len(users) < 3:
            return None
        edges, non_edges = _pairs(context, users)
        if not len(edges):
            return None
        aucs = {ATTACK: similarity_auc(uploads, users, edges, non_edges), f"{GUESS} (0.5)": 0.5}
        sigma, epsilon = _noise(context)
        if sigma > 0:
            clean = _latents(context, clean=True, first_round=False)
            if clean is not None and set(clean) >= set(users):
                aucs[CLEAN] = similarity_auc(clean, users, edges, non_edges)
        summary = (f"the cosine similarity of two users' latents (each user's {len(next(iter(uploads.values())))} uploaded values over the "
                   f"run) tells {len(edges)} edges from as many non-edges with AUC {aucs[ATTACK]:.3f} (a coin: 0.5)")
        if CLEAN in aucs:
            summary += f"; on the clean h_i {aucs[CLEAN]:.3f}"
        return AttackResult(self.name, self.claim, summary + f" (epsilon {epsilon:.3g}, sigma {sigma:g})",
                            "AUC, edges against non-edges (0.5: nothing leaked)", aucs,
                            {"epsilon": epsilon, "sigma": sigma, "edges": int(len(edges)), "users": len(users)})
