"""Attacks on CNFGNN's split-learning uploads (papers/cnfgnn.py).

* :class:`HiddenStateReconstruction` (beside DP-CLIENT): a server-side decoder from uploaded
  hidden states h_c,i back to the 12 input speeds of each window, fitted on the public slice's
  uploads of the final test evaluation (``h_c:test``, every variant has it) and scored on the
  other clients' uploads. Error in mph, against epsilon; references: the random guess (the
  public slice's mean window) and, with client transcripts, the same decoder on the clean h_c,i
  (no DP).
* :class:`GradientLabelLeakage` (beside DP-UNIT): what the unnoised gradients dL_i/dh_G,c,i add
  to what the server already holds about a window's targets (the 12 future speeds): the same
  learner predicts the targets from [h_G, h_c] (what the server computes and receives anyway)
  and from [dL/dh_G, h_G, h_c]; the difference is the gradients' leak. Rows are the windows of
  the last round's server batches, in the shared order both sides derive from the run seed.
"""

from __future__ import annotations

import math

import numpy as np

from secure_fedgraph.audit.attacks.base import Attack, AttackContext, public_clients
from secure_fedgraph.audit.attacks.learner import fit_regressor, rmse
from secure_fedgraph.audit.findings import AttackResult
from secure_fedgraph.audit.plan_claims import GRADIENTS, dp_settings

MAX_ROWS_PER_CLIENT = 2000  # keeps the attacks' fitting cheap on runs with many windows
WITHIN_MPH = 5.0  # "recovered": a reconstructed speed within 5 mph of the truth


class HiddenStateReconstruction(Attack):
    name = "reconstruction of raw inputs from h_c,i"
    claim = "DP-CLIENT"
    plans = frozenset({"cnfgnn"})

    def run(self, context: AttackContext) -> AttackResult | None:
        view = context.view
        uploads = {u.client: u for u in view.uploads_named("h_c:test")}
        public, private = public_clients(sorted(uploads))
        if not public or not private:
            return None

        def rows(clients: list[int], *, clean: bool = False) -> tuple[np.ndarray, np.ndarray]:
            hs, xs = [], []
            for client in clients:
                upload = uploads[client]
                h = (view.raw_upload(upload) if clean else upload.tensors)["h"]
                x = context.client_data(client).sensor("test", 0)[0][..., 0]  # (windows, 12) input speeds, mph
                n = min(len(h), len(x), MAX_ROWS_PER_CLIENT)
                hs.append(np.asarray(h[:n], np.float32))
                xs.append(np.asarray(x[:n], np.float32))
            return np.concatenate(hs), np.concatenate(xs)

        h_public, x_public = rows(public)
        h_private, x_private = rows(private)
        reconstruction = fit_regressor(h_public, x_public, seed=context.seed)(h_private)
        guess = np.broadcast_to(x_public.mean(axis=0), x_private.shape)
        errors = {"attack on the uploads": rmse(reconstruction, x_private), "random guess": rmse(guess, x_private)}
        recovered = {"attack on the uploads": float(np.mean(np.abs(reconstruction - x_private) <= WITHIN_MPH)),
                     "random guess": float(np.mean(np.abs(guess - x_private) <= WITHIN_MPH))}
        sigma = (dp_settings(view) or (0.0, 0.0))[0]
        if sigma > 0 and all(view.raw_upload(uploads[c]) is not None for c in uploads):
            clean_public, _ = rows(public, clean=True)
            clean_private, _ = rows(private, clean=True)
            clean = fit_regressor(clean_public, x_public, seed=context.seed)(clean_private)
            errors["no-DP reference (clean h_c,i)"] = rmse(clean, x_private)
            recovered["no-DP reference (clean h_c,i)"] = float(np.mean(np.abs(clean - x_private) <= WITHIN_MPH))
        epsilon = context.epsilon() if sigma > 0 else math.inf
        summary = (f"a decoder fitted on {len(public)} public sensors' uploads reconstructs the other {len(private)} sensors' input speeds "
                   f"with RMSE {errors['attack on the uploads']:.2f} mph ({recovered['attack on the uploads']:.0%} of readings within "
                   f"{WITHIN_MPH:g} mph); random guess {errors['random guess']:.2f} mph")
        if "no-DP reference (clean h_c,i)" in errors:
            summary += f"; the same decoder on the clean h_c,i {errors['no-DP reference (clean h_c,i)']:.2f} mph"
        summary += f" (epsilon {epsilon:.3g}, sigma {sigma:g})"
        return AttackResult(self.name, self.claim, summary, "mph (RMSE of the 12 input speeds)", errors,
                            {"epsilon": epsilon, "sigma": sigma, "public_clients": len(public), "private_clients": len(private),
                             "windows_scored": int(len(x_private)), "recovered_within_5_mph": recovered,
                             "example": {"truth": x_private[0].tolist(), "reconstruction": reconstruction[0].tolist()}})


class GradientLabelLeakage(Attack):
    name = "label leakage from dL/dh_G"
    claim = "DP-UNIT"
    plans = frozenset({"cnfgnn"})

    def run(self, context: AttackContext) -> AttackResult | None:
        from secure_fedgraph.papers.cnfgnn import server_batches

        view, plan = context.view, context.plan
        c = plan.config
        grads = view.uploads_named(GRADIENTS)
        counts = view.uploads_named("window_counts")
        if not grads or not counts:
            return None
        last = max(u.round for u in grads)
        windows = int(counts[0].tensors["windows"][0])
        epochs = 1 if c.variant.startswith("sl") else c.server_rounds
        batches = [b for e in range(epochs) for b in server_batches(plan.seed, last, e, windows, c.server_batch_size, c.max_server_batches)]
        per_client: dict[int, tuple[list, list, list]] = {}
        for client in sorted({u.client for u in grads}):
            mine = [u for u in grads if u.client == client and u.round == last]
            h_graph = [t["h"] for r, t in view.downloads.get("h_G", {}).get(client, []) if r == last]
            if c.variant.startswith("sl"):
                hidden = [u.tensors["h"] for u in view.uploads if u.name == "h_c" and u.client == client and u.round == last]
            else:
                train = [u for u in view.uploads if u.name == "h_c:train" and u.client == client and u.round == last]
                hidden = [train[-1].tensors["h"][b] for b in batches] if train else []
            if len(mine) == len(h_graph) == len(hidden) and len(mine) <= len(batches):
                per_client[client] = ([u.tensors["grad"] for u in mine], h_graph, hidden)
        public, private = public_clients(sorted(per_client))
        if not public or not private:
            return None

        def rows(clients: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            with_grad, without, targets = [], [], []
            for client in clients:
                g, h_graph, hidden = per_client[client]
                y = context.client_data(client).sensor("train", 0)[1]  # (windows, 12) future speeds, mph
                for j, batch in enumerate(batches[: len(g)]):
                    base = np.concatenate([h_graph[j], hidden[j]], axis=1)
                    without.append(base)
                    with_grad.append(np.concatenate([g[j] * len(batch), base], axis=1))
                    targets.append(y[batch])
            cut = MAX_ROWS_PER_CLIENT * len(clients)
            return np.concatenate(with_grad)[:cut], np.concatenate(without)[:cut], np.concatenate(targets)[:cut]

        wg_public, wo_public, y_public = rows(public)
        wg_private, wo_private, y_private = rows(private)
        errors = {
            "attack with the gradients": rmse(fit_regressor(wg_public, y_public, seed=context.seed)(wg_private), y_private),
            "without the gradients (h_G, h_c)": rmse(fit_regressor(wo_public, y_public, seed=context.seed)(wo_private), y_private),
            "random guess": rmse(np.broadcast_to(y_public.mean(axis=0), y_private.shape), y_private),
        }
        gain = errors["without the gradients (h_G, h_c)"] - errors["attack with the gradients"]
        summary = (f"from round {last}'s {len(batches)} server batches: the targets (12 future speeds) of {len(private)} sensors are predicted "
                   f"with RMSE {errors['attack with the gradients']:.2f} mph using their gradients, {errors['without the gradients (h_G, h_c)']:.2f} "
                   f"mph from h_G and h_c alone (the gradients give away {gain:.2f} mph), random guess {errors['random guess']:.2f} mph")
        return AttackResult(self.name, self.claim, summary, "mph (RMSE of the 12 target speeds)", errors,
                            {"round": last, "public_clients": len(public), "private_clients": len(private), "windows_scored": int(len(y_private)),
                             "gain_mph": gain})
