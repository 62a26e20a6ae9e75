"""Checkers of the privacy claims a transcript can show (threat_model.md DP-ACCOUNT, DP-SGD,
DDP-NOISE, DDP-RANGE, DDP-ACCOUNT). The epsilons are recomputed by the project's own
accountants (privacy/accountant.py, protocol/engine/noise_ledger.py) from what the transcript shows the
server received, and compared with what the run reported: the audit counts, it does not trust
the count.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from secure_fedgraph.audit.findings import Finding, checks, failed, not_applicable, passed, verdict
from secure_fedgraph.audit.replay import RunView, SumAttempt, run_plan

DPSGD_REPORT = "privacy:dpsgd"  # protocol/engine/contexts.py DPSGD_REPORT: each client's (sigma, sample rate, steps, sensitivity)


def dpsgd_reports(view: RunView) -> dict[int, tuple[float, float, int, float]]:
    """client -> (sigma, sample rate, steps, sensitivity) it reported for its DP-SGD training
    (nonzero only; transcripts from before the sensitivity was reported have sensitivity 1)."""
    out = {}
    for upload in view.uploads_named(DPSGD_REPORT):
        sigma, rate, steps, sensitivity, *_ = (*(float(v) for v in np.asarray(upload.tensors["steps"]).ravel()), 1.0)
        if steps > 0:
            out[upload.client] = (sigma, rate, int(steps), max(1.0, sensitivity))  # as the server prices it
    return out


def transcript_accountant(view: RunView):
    """The accountant the server kept, rebuilt from the uploads its transcript shows: every
    ``h_c:<split>`` upload releases each of its rows; split learning's i-th ``h_c`` upload of a
    round releases the i-th batch of the shared order (papers/cnfgnn.py server_batches); every
    nFedGNN upload releases the user's one row once per latent in it (the plan's ``released``);
    each client's DP-SGD report its steps. None: the run has no noised uploads and no DP-SGD."""
    from secure_fedgraph.audit.plan_claims import ACTIVATIONS, activation_uploads, dp_settings, latent_uploads
    from secure_fedgraph.privacy import PrivacyAccountant, RowRelease, Steps

    settings, reports = dp_settings(view), dpsgd_reports(view)
    sigma = settings[0] if settings else 0.0
    if not sigma and not reports:
        return None
    accountant = PrivacyAccountant()
    batch_index: dict[tuple[int, int], int] = defaultdict(int)
    for upload in activation_uploads(view):  # with sigma 0 too (DP-SGD alone): un-noised hidden states cost an infinite epsilon
        rows = next(iter(upload.tensors.values())).shape[0]
        if upload.name == ACTIVATIONS:
            accountant.record(upload.client, RowRelease("train", _batch(view, upload.client, upload.round, batch_index), sigma))
        else:
            accountant.record(upload.client, RowRelease(upload.name.split(":", 1)[1], np.arange(rows), sigma))
    for upload in latent_uploads(view):
        release = run_plan(view).released(len(upload.tensors))
        if release is not None:
            accountant.record(upload.client, release)
    for client, (s, rate, steps, sensitivity) in reports.items():
        accountant.record_steps(client, Steps(s, rate, steps, sensitivity))
    return accountant


def _batch(view: RunView, client: int, round_index: int, seen: dict[tuple[int, int], int]) -> np.ndarray:
    from secure_fedgraph.papers.cnfgnn import server_batches

    c = view.plan_config
    train = int(next(u for u in view.uploads_named("window_counts") if u.client == client).tensors["windows"].ravel()[0])
    batches = server_batches(int(c["seed"]), round_index, 0, train, int(c["server_batch_size"]), c.get("max_server_batches"))
    index = seen[(client, round_index)]
    seen[(client, round_index)] += 1
    return batches[index]


def transcript_epsilons(view: RunView) -> tuple[dict[int, float], dict[int, int], float] | None:
    """Per client: the RDP epsilon for one member of the run's privacy unit and its releases K,
    from :func:`transcript_accountant`; and the delta. None without DP uploads or DP-SGD
    (computed once per view: DP-ACCOUNT and every attack's epsilon read it)."""
    if "epsilons" not in view.cache:
        view.cache["epsilons"] = _transcript_epsilons(view)
    return view.cache["epsilons"]


def _transcript_epsilons(view: RunView) -> tuple[dict[int, float], dict[int, int], float] | None:
    from secure_fedgraph.privacy import rdp_epsilon

    accountant = transcript_accountant(view)
    if accountant is None:
        return None
    plan = run_plan(view)
    unit = plan.privacy_unit() if hasattr(plan, "privacy_unit") else plan.dpsgd_unit
    delta = float(view.plan_config.get("dp_delta", 1e-5))
    clients = sorted({u.client for u in view.uploads})
    epsilons = {c: rdp_epsilon(accountant.history(c, unit), delta) for c in clients}
    releases = {c: sum(n for _, _, n in accountant.uploads_history(c, unit)) for c in clients}
    return epsilons, releases, delta


@checks("DP-ACCOUNT")
def epsilon_matches_the_releases(view: RunView) -> Finding:
    """Epsilon recomputed from the releases and DP-SGD steps the transcript shows equals the run's report."""
    if "dp_sigma" not in view.plan_config and "dpsgd_sigma" not in view.plan_config:
        return not_applicable("DP-ACCOUNT", f"plan {view.plan} has no Gaussian DP option")
    if view.plan_config.get("ddp_noise") and run_plan(view).ddp_composes_dpsgd:
        return not_applicable("DP-ACCOUNT", f"plan {view.plan} reports one epsilon for its DP-SGD steps and its noised sums: DDP-ACCOUNT "
                                            "recomputes it")
    found = transcript_epsilons(view)
    if found is None:
        return not_applicable("DP-ACCOUNT", "no noised uploads and no DP-SGD steps in this run")
    epsilons, releases, delta = found
    most = max(epsilons.values())
    details = {"epsilon": most, "delta": delta, "releases": max(releases.values(), default=0)}
    said = (f"the transcript shows at most {details['releases']} releases of one member of the unit per client"
            f"{' and the clients DP-SGD steps' if dpsgd_reports(view) else ''}: epsilon {most:.4g} at delta {delta:g}")
    reported = (view.metrics or {}).get("privacy")
    if reported is None or "epsilon_max" not in reported:
        return not_applicable("DP-ACCOUNT", f"{said}; no metrics.json privacy report to compare with")
    theirs_releases = {c: n for c, n in reported.get("releases_per_client", {}).items() if n}
    ours_releases = {str(c): n for c, n in sorted(releases.items()) if n}
    same = ours_releases == theirs_releases and math.isclose(most, float(reported["epsilon_max"]), rel_tol=1e-6)
    return verdict("DP-ACCOUNT", same, f"{said}; the run reported {float(reported['epsilon_max']):.4g}"
                   + ("" if ours_releases == theirs_releases else "; the per-client release counts differ"), **details)


@checks("DP-SGD")
def dpsgd_steps_are_noised_as_announced(view: RunView) -> Finding:
    """Each client's DP-SGD report (what its optimiser counted) has the announced noise multiplier
    and some steps; the noise itself is inside the clients' optimisers, which no transcript shows."""
    announced = float(view.plan_config.get("dpsgd_sigma", 0) or 0)
    if "dpsgd_sigma" not in view.plan_config:
        return not_applicable("DP-SGD", f"plan {view.plan} has no DP-SGD option")
    reports = dpsgd_reports(view)
    if not announced and not reports:
        return not_applicable("DP-SGD", "dpsgd_sigma 0: the run claims no DP-SGD (no client reported steps)")
    reporters = {u.client for u in view.uploads_named(DPSGD_REPORT)}
    silent = sorted(reporters - set(reports))
    low = sorted(c for c, (s, *_) in reports.items() if s < announced * (1 - 1e-9))
    if silent or low:
        return failed("DP-SGD", f"dpsgd_sigma {announced:g} announced; {len(silent)} clients reported no DP-SGD steps, {len(low)} a lower noise "
                                f"multiplier (e.g. client {(silent or low)[0]})", silent=len(silent), lower=len(low))
    rates = sorted({round(r, 6) for _, r, *_ in reports.values()})
    steps = sum(n for _, _, n, _ in reports.values())
    return passed("DP-SGD", f"{len(reports)} clients reported {steps} DP-SGD steps at noise multiplier {announced:g} (sample rates "
                            f"{', '.join(f'{r:g}' for r in rates[:3])}{'...' if len(rates) > 3 else ''}), as their optimisers counted them; "
                            "the per-sample clipping and noise happen inside the clients", steps=steps, clients=len(reports))


def _noised(view: RunView) -> list[SumAttempt]:
    return [a for a in view.sums if a.request.spec.noise is not None]


def _precision_bits(view: RunView) -> int:
    from secure_fedgraph.protocol.sum_backends.config import config_from_dict

    return config_from_dict(view.config["secure_sum"]).mask.precision_bits


@checks("DDP-NOISE")
def sums_carry_the_announced_noise(view: RunView) -> Finding:
    """Every sum of a name the run noised carries the announced SumNoise (z, C); with the clients'
    records, the noise in what the server holds (plain: each input; mask: each delivered
    aggregate) against the clipped, rounded contributions has the stated variance."""
    announced = float(view.plan_config.get("ddp_noise", 0) or 0)
    noised = _noised(view)
    if "ddp_noise" not in view.plan_config and not noised:
        return not_applicable("DDP-NOISE", f"plan {view.plan} has no distributed DP option")
    if not announced and not noised:
        return not_applicable("DDP-NOISE", "ddp_noise 0: the run claims no distributed DP")
    names = {a.name for a in noised}
    expected = run_plan(view).noised_sums() if announced else {}  # the sums the plan noises, each at its bound
    bare = [a for a in view.sums if a.request.spec.noise is None and (a.name in names or a.name in expected)]
    clip = float(view.plan_config.get("ddp_clip", 0) or 0)
    wrong = [a for a in noised if not (math.isclose(a.request.spec.noise.noise_multiplier, announced)
                                       and math.isclose(a.request.spec.noise.l2_clip, expected.get(a.name, clip)))]
    if announced and not noised:
        return failed("DDP-NOISE", f"ddp_noise {announced:g} announced, but no sum the server started carried distributed DP noise")
    if bare or wrong:
        example = (bare or wrong)[0]
        return failed("DDP-NOISE", f"{len(bare)} sums the plan noises without noise and {len(wrong)} with other noise than the announced "
                                   f"z {announced:g} and the plan's bound (e.g. {example.name}, round {example.round})")
    bounds = ", ".join(f"{n} {expected.get(n, clip):g}" for n in sorted(names))
    said = f"{len(noised)} sums carried noise multiplier {announced:g} over their L2 bounds ({bounds})"
    ratios = _noise_ratios(view, noised)
    if not ratios:
        return passed("DDP-NOISE", f"{said}; the noise in them needs the clients' records and an aggregate the server holds (server-only sums "
                                   "keep theirs inside the server)", sums=len(noised))
    worst = max(abs(r - 1) for r, _ in ratios)
    ok = all(abs(r - 1) < 0.05 + 6 / math.sqrt(2 * n) for r, n in ratios)
    return verdict("DDP-NOISE", ok, f"{said}; against the clients' clipped, rounded contributions the noise has {worst:.3f} relative "
                                    f"deviation from its stated standard deviation at most ({len(ratios)} {'inputs' if view.backend == 'plain' else 'sums'})",
                   sums=len(noised), largest_relative_deviation=worst)


def _noise_ratios(view: RunView, noised: list[SumAttempt]) -> list[tuple[float, int]]:
    """(measured / stated noise standard deviation, values) per noisy value the server holds:
    each input with plain, each delivered aggregate with mask."""
    from secure_fedgraph.protocol.sum_backends.ddp_noise import clipped

    if not view.with_clients:
        return []
    precision = _precision_bits(view)

    def rounded(attempt: SumAttempt, client: int) -> np.ndarray | None:
        clean = view.contribution(attempt, client)
        scale = 2.0 ** attempt.request.spec.noise.grid_bits(precision)
        return None if clean is None else np.rint(clipped(clean, attempt.request.spec) * scale) / scale

    out = []
    for attempt in noised:
        bits = attempt.request.spec.noise.grid_bits(precision)
        local_sd = math.sqrt(attempt.request.spec.noise.local_variance(bits)) / 2.0**bits
        if view.backend == "plain":
            for client, message in attempt.inputs.items():
                clean = rounded(attempt, client)
                if clean is not None and message.payload is not None:
                    out.append((float(np.std(np.asarray(message.payload, np.float64)[: clean.size] - clean) / local_sd), clean.size))
        elif attempt.deliver is not None and attempt.deliver.aggregate is not None and attempt.request.encoding is not None:
            parts = [rounded(attempt, c) for c in attempt.contributors]
            if parts and all(p is not None for p in parts):
                request = attempt.request
                values = request.encoding.decode_sum(np.ascontiguousarray(attempt.deliver.aggregate[: request.spec.size]))
                residual = values - np.sum(parts, axis=0)
                out.append((float(np.std(residual) / (local_sd * math.sqrt(len(parts)))), residual.size))
    return out


@checks("DDP-RANGE", backends={"mask"})
def noised_sums_fit_the_ring(view: RunView) -> Finding:
    """Each noised sum's clipping range is at least its clip plus the noise's tail (the capacity
    check's input), its ring fits its contributors, and the clipped values are counted."""
    noised = [a for a in _noised(view) if a.request.encoding is not None]
    if not noised:
        return not_applicable("DDP-RANGE", "no noised mask sum")
    bits = _precision_bits(view)
    narrow = [a for a in noised if a.request.encoding.clip_range < a.request.spec.noise.value_bound(
        size=a.request.spec.size, precision_bits=a.request.spec.noise.grid_bits(bits)) * (1 - 1e-9)]
    unfit = [a for a in noised if not a.request.encoding.fits(len(a.contributors) or len(a.asked))]
    clipped = sum(int(a.deliver.clipped or 0) for a in noised if a.deliver is not None)
    return verdict("DDP-RANGE", not narrow and not unfit,
                   f"{len(noised)} noised sums: each encoding's range covers the clip plus the noise's tail ({len(narrow)} do not), each ring "
                   f"fits its contributors ({len(unfit)} do not); {clipped} values beyond the bound were clipped and counted", clipped=clipped)


@checks("DDP-ACCOUNT")
def ddp_epsilon_matches_the_noised_sums(view: RunView) -> Finding:
    """The run's distributed DP report, recomputed by the noise ledger from the noised sums the
    transcript shows delivered (their specs and contributors)."""
    from secure_fedgraph.privacy import Steps
    from secure_fedgraph.protocol.engine.noise_ledger import NoiseLedger
    from secure_fedgraph.protocol.sum_backends.config import config_from_dict

    delivered = [a for a in _noised(view) if a.deliver is not None]
    if not delivered:
        return not_applicable("DDP-ACCOUNT", "no noised sum was delivered")
    ledger = NoiseLedger()
    for attempt in delivered:
        ledger.record(attempt.round, attempt.request.spec, frozenset(attempt.contributors))
    config = config_from_dict(view.config["secure_sum"])
    terms = {"precision_bits": config.mask.precision_bits, "server_sees_inputs": view.backend == "plain",
             "colluders": config.mask.adversary.colluders(len(view.run_clients))}
    steps = {c: [Steps(s, rate, n, sensitivity)] for c, (s, rate, n, sensitivity) in dpsgd_reports(view).items()}
    ours = run_plan(view).noise_account(ledger.sums, steps, clients=sorted(view.run_clients), **terms)
    if ours is None:
        ours = ledger.report(delta=float(view.plan_config.get("ddp_delta", 1e-5)), **terms)
    said = (f"{len(delivered)} noised sums delivered: epsilon {ours['epsilon_max']:.4g} at delta {ours['delta']:g} "
            f"(with {ours['colluders']} colluders {ours['epsilon_with_colluders']:.4g})")
    reported = (view.metrics or {}).get("privacy")
    if reported is None or "epsilon_max" not in reported:
        return not_applicable("DDP-ACCOUNT", f"{said}; no metrics.json privacy report to compare with")
    same = math.isclose(ours["epsilon_max"], float(reported["epsilon_max"]), rel_tol=1e-6) and ours["sums"] == reported.get("sums")
    return verdict("DDP-ACCOUNT", same, f"{said}; the run reported {float(reported['epsilon_max']):.4g}"
                   + ("" if ours["sums"] == reported.get("sums") else "; the per-sum contributors or noise differ"),
                   epsilon=ours["epsilon_max"], sums=len(delivered))
