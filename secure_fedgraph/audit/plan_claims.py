"""Checkers of the papers' claims (threat_model.md sections CNFGNN, FedSTGD, FedRel),
from a run's transcripts. Each applies to its plan only; elsewhere it is NOT APPLICABLE.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from secure_fedgraph.audit.findings import Finding, checks, failed, not_applicable, passed, verdict, with_plot
from secure_fedgraph.audit.replay import RunView, Upload, run_plan
from secure_fedgraph.audit.sum_claims import plaintext_probe

ACTIVATIONS = "h_c"  # CNFGNN's uploaded hidden states: "h_c", "h_c:train", "h_c:val", "h_c:test"
GRADIENTS = "dL/dh_G"
DPSGD_REPORT = "privacy:dpsgd"  # each client's DP-SGD report (protocol/engine/contexts.py): its (sigma, rate, steps, sensitivity), no data
CNFGNN_UPLOADS = ("window_counts", GRADIENTS, DPSGD_REPORT)
NFEDGNN_LATENTS = ("h", "h_eval")  # nFedGNN's uploads (and the tensors in them): each user's latent, its dropout-free twin


def is_activation(name: str) -> bool:
    return name == ACTIVATIONS or name.startswith(ACTIVATIONS + ":")


def activation_uploads(view: RunView) -> list[Upload]:
    return [u for u in view.uploads if is_activation(u.name)]


def latent_uploads(view: RunView) -> list[Upload]:
    """nFedGNN's latent uploads (none for other plans)."""
    return [u for u in view.uploads if u.name in NFEDGNN_LATENTS] if view.plan == "nfedgnn" else []


@checks("SL-NORAW", plans={"cnfgnn"})
def server_gets_no_raw_data(view: RunView) -> Finding:
    """Every upload the server received is a window count, hidden-state rows or their gradients
    (hidden_size wide: never the 12-step readings or targets); FedAvg weights only as sums."""
    hidden = int(view.plan_config["hidden_size"])
    odd = [u for u in view.uploads if not (u.name in CNFGNN_UPLOADS or is_activation(u.name))]
    wrong = [u for u in view.uploads if u.name not in ("window_counts", "privacy:dpsgd") and any(t.ndim != 2 or t.shape[1] != hidden for t in u.tensors.values())]
    weights = [a for a in view.sums if a.name == "weights"]
    clear_weights = sum(len(a.inputs) for a in weights if a.request.encoding is None and view.backend != "ckks")
    kinds = ", ".join(f"{n} x{k}" for n, k in sorted(_count_names(view.uploads).items()))
    if odd or wrong:
        return failed("SL-NORAW", f"unexpected uploads: {sorted({u.name for u in odd + wrong})}")
    evidence = f"the server received {len(view.uploads)} individual uploads ({kinds}), each {hidden} numbers per window or a window count"
    if weights:
        evidence += (f"; {sum(len(a.inputs) for a in weights)} FedAvg weight inputs, "
                     + ("readable: plain backend (P-CLEAR)" if clear_weights else "masked or encrypted"))
    return verdict("SL-NORAW", not (clear_weights and view.backend == "mask"), evidence)


def _count_names(uploads: list[Upload]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for u in uploads:
        counts[u.name] += 1
    return counts


def dp_settings(view: RunView) -> tuple[float, float] | None:
    """(sigma, clip) the run announced for uploaded activations, or None when it has no DP option."""
    config = view.plan_config
    if "dp_sigma" not in config:
        return None
    return float(config["dp_sigma"]), float(config.get("dp_clip", 0.0))


@checks("DP-CLIENT", plans={"cnfgnn"})
def uploads_are_clipped_and_noised(view: RunView) -> Finding:
    """CNFGNN's hidden-state rows h_c,i are clipped and noised as announced (:func:`noise_finding`)."""
    return noise_finding("DP-CLIENT", view, activation_uploads(view), "the hidden states")


def noise_finding(claim: str, view: RunView, uploads: list[Upload], what: str) -> Finding:
    """With client records: the residual of each upload from its clipped clean rows has the
    announced noise's standard deviation sigma * clip. Server-only: the rows' mean squared norm
    is at least d (sigma clip)^2, the noise's alone (a clipped row adds at most clip^2 below it)."""
    settings = dp_settings(view)
    if settings is None or not uploads:
        return not_applicable(claim, f"plan {view.plan} uploads no {what}")
    sigma, clip = settings
    if sigma == 0:
        return not_applicable(claim, f"dp_sigma 0: the run claims no noise (its clients accepted --min-dp-sigma 0); the server sees "
                                     f"{what} as they are")
    from secure_fedgraph.privacy.mechanisms.gaussian import clip_rows

    residuals = []
    for upload in uploads:
        raw = view.raw_upload(upload)
        if raw is not None:
            for name, value in upload.tensors.items():
                clean, _ = clip_rows(np.asarray(raw[name], np.float64), clip)
                residuals.append((np.asarray(value, np.float64) - clean).ravel())
    if residuals:
        r = np.concatenate(residuals)
        ratio = float(r.std() / (sigma * clip))
        z_mean = float(abs(r.mean()) / (sigma * clip) * math.sqrt(r.size))
        ok = abs(ratio - 1) < 0.02 + 6 / math.sqrt(2 * r.size) and z_mean < 6
        finding = verdict(claim, ok, f"{r.size} uploaded values against the clients' clean rows clipped to {clip:g}: the noise has "
                          f"standard deviation {ratio:.3f} x sigma*clip (sigma {sigma:g}) and mean {z_mean:.1f} standard errors from 0",
                          noise_std_ratio=ratio, values=int(r.size))
        return with_plot(finding, "dp-residuals", (r[:200_000], sigma * clip))
    rows = np.concatenate([np.asarray(v, np.float64).reshape(-1, np.asarray(v).shape[-1]) for u in uploads for v in u.tensors.values()])
    d, m = rows.shape[1], rows.shape[0]
    squared = (rows**2).sum(axis=1)
    floor_ = d * (sigma * clip) ** 2
    spread = math.sqrt((4 * sigma**2 * clip**4 + 2 * d * sigma**4 * clip**4) / m)
    if floor_ - 6 * spread <= clip**2:
        return not_applicable(claim, f"sigma {sigma:g} over {d} dimensions is too little noise to tell from clean rows on the server's "
                                     "side; give the clients' transcripts")
    ok = squared.mean() >= floor_ - 6 * spread
    finding = verdict(claim, ok, f"server-side: the {m} uploaded rows have mean squared norm {squared.mean():.3g}; noise of sigma "
                      f"{sigma:g} x clip {clip:g} alone gives {floor_:.3g} (a clean clipped row at most {clip ** 2:g})",
                      mean_squared_norm=float(squared.mean()), noise_floor=floor_)
    return with_plot(finding, "dp-norms", (squared[:200_000], floor_, clip**2))


@checks("DP-UNIT")
def gradients_are_not_noised(view: RunView) -> Finding:
    """A statement of what DP does not cover: the uploaded gradients dL/dh_G (the label-leakage
    attack beside it measures what they give away)."""
    grads = view.uploads_named(GRADIENTS)
    if not grads:
        return not_applicable("DP-UNIT", f"plan {view.plan} uploads no gradients")
    return passed("DP-UNIT", f"as stated: the server received {len(grads)} gradient uploads dL/dh_G, not noised; DP covers the hidden "
                             "states only, per window of one client")


@checks("ST-SUMS", plans={"fedstgd"})
def fedstgd_inputs_only_in_sums(view: RunView) -> Finding:
    return _only_sums("ST-SUMS", view)


@checks("FR-SUMS", plans={"fedrel"})
def fedrel_inputs_only_in_sums(view: RunView) -> Finding:
    return _only_sums("FR-SUMS", view)


def _only_sums(claim: str, view: RunView) -> Finding:
    """The server received no individual upload but the clients' DP-SGD reports (four numbers
    each, no data), every secure-sum input masked or encrypted, and (with client records) none of
    the clients' contributions in any byte it received."""
    inputs = sum(len(a.inputs) for a in view.sums)
    clear = sum(len(a.inputs) for a in view.sums if a.request.encoding is None and view.backend != "ckks")
    probe = plaintext_probe(view)
    individual = [u for u in view.uploads if u.name != DPSGD_REPORT or any(np.asarray(t).size > 4 for t in u.tensors.values())]
    if individual:
        return failed(claim, f"the server received {len(individual)} individual uploads ({sorted(_count_names(individual))})")
    if clear or probe.leaked:
        return failed(claim, f"{clear} of {inputs} inputs reached the server in the clear ({view.backend} backend){probe.sentence}",
                      clear_inputs=clear, **probe.details)
    kinds = "ciphertexts" if view.backend == "ckks" else "masked ring elements"
    reports = len(view.uploads) - len(individual)
    return passed(claim, f"every one of the {inputs} client inputs went through a secure sum as {kinds}; no individual upload"
                  f"{f' but {reports} DP-SGD reports (counts, no data)' if reports else ''}{probe.sentence}", **probe.details)


@checks("NF-LATENT", plans={"nfedgnn"})
def nfedgnn_server_gets_latents_only(view: RunView) -> Finding:
    """Every upload is one (1, d) row per latent, named h / h_eval (never x_i's F values or a
    W_i); with per-user weights no key set-up and no sum; FedAvg'ed W_i (FedSGD's dL/dW_i and
    W_i^(0)) only through a sum that hides them (mask, ckks), as SL-NORAW for CNFGNN's weights."""
    d = run_plan(view).config.latent_size
    odd = sorted({u.name for u in view.uploads if u.name not in NFEDGNN_LATENTS})
    wide = [u for u in view.uploads if u.name in NFEDGNN_LATENTS
            and (not set(u.tensors) <= set(NFEDGNN_LATENTS) or any(np.shape(t) != (1, d) for t in u.tensors.values()))]
    if odd or wide:
        example = wide[0] if wide else None
        shapes = "" if example is None else f"; e.g. client {example.client}'s {example.name} of round {example.round}: " + ", ".join(
            f"{k} {tuple(np.shape(t))}" for k, t in example.tensors.items())
        return failed("NF-LATENT", f"{len(wide)} latent uploads are not one (1, {d}) row per latent; other uploads: {odd or 'none'}{shapes}",
                      wide=len(wide), other=odd)
    users = len({u.client for u in view.uploads})
    evidence = f"the server received {len(view.uploads)} uploads from {users} users ({', '.join(f'{n} x{k}' for n, k in sorted(_count_names(view.uploads).items()))}), each one (1, {d}) row per latent"
    if view.plan_config.get("user_weights", "own") == "own":
        extra = [what for what, there in (("key set-ups", view.advertised), ("secure sums", view.sums)) if there]
        return verdict("NF-LATENT", not extra, evidence + ("; with per-user weights no key set-up and no secure sum" if not extra else
                                                         f"; but per-user weights and {' and '.join(extra)} in the transcript"))
    plan = run_plan(view)
    allowed = {plan.weights_sum} | ({"W0"} if plan.shares_initial_sum else set())  # fedavg: W_i; fedsgd: dL/dW_i (and W_i^(0))
    weights = [a for a in view.sums if a.name in allowed]
    clear = sum(len(a.inputs) for a in weights if a.request.encoding is None and view.backend != "ckks")
    others = sorted({a.name for a in view.sums} - allowed)
    what = "W_i" if plan.config.user_weights == "fedavg" else "dL/dW_i" + (" and W_i^(0)" if plan.shares_initial_sum else "")
    evidence += f"; {sum(len(a.inputs) for a in weights)} summed inputs of {what}, " + (
        f"{clear} in the clear (the {view.backend} backend shows each one)" if clear else "masked or encrypted")
    return verdict("NF-LATENT", not clear and not others, evidence + (f"; other sums: {others}" if others else ""), clear_weights=clear)


@checks("NF-DP", plans={"nfedgnn"})
def nfedgnn_latents_are_clipped_and_noised(view: RunView) -> Finding:
    """Every uploaded h_i / h_eval row is clipped and noised as announced (:func:`noise_finding`)."""
    return noise_finding("NF-DP", view, latent_uploads(view), "the latents")


@checks("NF-LINK", plans={"nfedgnn"})
def nfedgnn_latents_are_individual(view: RunView) -> Finding:
    """A statement of whom the link attack beside it measures: the latents are individual (one
    row per user), the graph is the server's own; a party holding the latents without the graph
    learns what the attack measures."""
    uploads = latent_uploads(view)
    if not uploads:
        return not_applicable("NF-LINK", "no latent uploads in this run")
    sigma = (dp_settings(view) or (0.0, 0.0))[0]
    return passed("NF-LINK", f"as stated: {len(uploads)} individual latent uploads of {len({u.client for u in uploads})} users "
                             f"({'noised, sigma ' + format(sigma, 'g') if sigma else 'not noised'}); the server holds the graph itself, so the "
                             "link attack beside this claim measures a party that sees the latents but not the edges")
