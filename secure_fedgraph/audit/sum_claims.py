"""Checkers of the secure-sum claims (threat_model.md sections plain, mask and ckks) that a
run's transcripts can show. Server-only: what the server received. With client transcripts:
also the clients' plaintext contributions, so sums and probes are checked against ground truth.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from scipy import stats

from secure_fedgraph.audit.findings import Finding, checks, failed, not_applicable, passed, verdict, with_plot
from secure_fedgraph.audit.replay import RunView, SumAttempt
from secure_fedgraph.protocol.sum_backends import messages as sm
from secure_fedgraph.protocol.sum_backends.config import config_from_dict


def _inputs_of(view: RunView) -> list[tuple[SumAttempt, int, sm.InputResponse]]:
    return [(a, c, m) for a in view.sums for c, m in a.inputs.items()]


@checks("M-UNIFORM")
def masked_uploads_are_uniform(view: RunView) -> Finding:
    """Per sum, pool every client's masked upload: a chi-square over their bytes, and (with
    client records) the correlation of the masked values with the plaintexts, in standard errors."""
    if view.backend == "ckks":
        return not_applicable("M-UNIFORM", "ckks backend: the server received ciphertexts (C-* claims), not masked ring elements")
    inputs = _inputs_of(view)
    if not inputs:
        return not_applicable("M-UNIFORM", "the run has no secure sums")
    clear = [(a, c) for a, c, m in inputs if a.request.encoding is None]
    if clear:
        return failed("M-UNIFORM", f"{len(clear)} of {len(inputs)} secure-sum inputs were plain float tensors, not masked ring elements "
                                   f"({view.backend} backend)", plain_inputs=len(clear))
    worst_p, worst_ratio, tested_p, tested_r = 1.0, 0.0, 0, 0
    pooled_bytes = []
    pairs_all: list[tuple[np.ndarray, np.ndarray]] = []
    for attempt in view.sums:
        payloads = [(c, m.payload) for c, m in attempt.inputs.items() if m.payload is not None]
        if not payloads:
            continue
        pooled = np.concatenate([np.frombuffer(y.tobytes(), dtype=np.uint8) for _, y in payloads])
        if pooled.size >= 256 * 20:  # at least ~20 expected counts per byte value
            worst_p = min(worst_p, float(stats.chisquare(np.bincount(pooled, minlength=256)).pvalue))
            tested_p += 1
        pooled_bytes.append(pooled[: 1 << 16])
        pairs = []
        for c, y in payloads:
            x = view.contribution(attempt, c)
            if x is not None:
                pairs.append((y[: x.size].astype(np.float64), x))
        if pairs:
            ys, xs = np.concatenate([y for y, _ in pairs]), np.concatenate([x for _, x in pairs])
            ring = 2.0 ** (8 * payloads[0][1].dtype.itemsize)
            pairs_all.append((ys[:5000] / ring, (xs[:5000] - xs.mean()) / (xs.std() or 1.0)))  # for the figure: [0, 1) against z-scores
            if xs.size >= 100 and xs.std() > 0:
                r = float(np.corrcoef(ys, xs)[0, 1])
                worst_ratio = max(worst_ratio, abs(r) * np.sqrt(xs.size))
                tested_r += 1
    evidence = (f"{len(inputs)} masked uploads in {len(view.sums)} sums; smallest chi-square p-value over a sum's bytes "
                f"{worst_p:.3g} ({tested_p} sums large enough to test; limit 1e-6)")
    if tested_r:
        evidence += f"; largest correlation with the clients' plaintexts {worst_ratio:.2f} standard errors ({tested_r} sums; limit 5)"
    else:
        evidence += "; correlation with the plaintexts not tested (no client audit records)"
    finding = verdict("M-UNIFORM", worst_p > 1e-6 and worst_ratio < 5, evidence, smallest_p=worst_p, largest_correlation_se=worst_ratio,
                      sums_tested=tested_p)
    return with_plot(finding, "uniformity", (np.concatenate(pooled_bytes) if pooled_bytes else np.zeros(0, np.uint8), pairs_all))


@checks("M-NOPLAIN")
def no_input_in_the_clear(view: RunView) -> Finding:
    """Structure (server-only): every secure-sum input arrived masked or encrypted. Probe (with
    client records): no client's plaintext contribution occurs in the bytes the server received
    from that client (as float32 or float64), so the probe is not blind where they do (plain)."""
    inputs = _inputs_of(view)
    if not inputs:
        return not_applicable("M-NOPLAIN", "the run has no secure sums")
    clear = sum(1 for a, _, m in inputs if a.request.encoding is None and not m.ciphertexts)
    probe = plaintext_probe(view)
    if clear:
        return failed("M-NOPLAIN", f"{clear} of {len(inputs)} secure-sum inputs reached the server in the clear ({view.backend} backend: "
                                   f"P-CLEAR){probe.sentence}", clear_inputs=clear, **probe.details)
    kinds = "ciphertexts" if view.backend == "ckks" else "masked ring elements"
    if probe.leaked:
        return failed("M-NOPLAIN", f"every input was {kinds}, yet{probe.sentence}", **probe.details)
    released = sum(len(a.released) for a in view.sums)
    extra = f"; {released} released sums (aggregates the plan asked the clients to release)" if released else ""
    return passed("M-NOPLAIN", f"all {len(inputs)} secure-sum inputs the server received were {kinds}{extra}{probe.sentence}", **probe.details)


class _Probe:
    def __init__(self, contributions: int, found: int, run_wide: int, found_run_wide: int) -> None:
        self.contributions, self.found, self.run_wide, self.found_run_wide = contributions, found, run_wide, found_run_wide

    @property
    def sentence(self) -> str:
        if not self.contributions:
            return ""
        return (f"; plaintext probe: {self.found} of {self.contributions} client contributions found in the client's own message of "
                f"that step, {self.found_run_wide} of {self.run_wide} (up to {RUN_WIDE_PER_CLIENT} per client) in any byte the server "
                "received from the client (float32 and float64)")

    @property
    def leaked(self) -> bool:
        return bool(self.found or self.found_run_wide)

    @property
    def details(self) -> dict:
        return {"probe_contributions": self.contributions, "probe_found": self.found, "probe_run_wide": self.run_wide,
                "probe_found_run_wide": self.found_run_wide}


RUN_WIDE_PER_CLIENT = 8  # contributions per client searched for in everything it sent (the cost is bytes x probes)


def plaintext_probe(view: RunView) -> _Probe:
    """Search what the server received for runs of 4 consecutive values of each client's plaintext
    contributions, as float32 and float64: every contribution in the client's own message of that
    step (where plain puts it), and a few per client, spread over the run, in every byte the
    server received from that client (where a leak elsewhere would put it). Computed once per view."""
    if "probe" in view.cache:
        if view.cache["probe"].contributions:
            view.client_reads += 1  # the cached probe read the clients' records: so does the claim that reads it now
        return view.cache["probe"]
    contributions = found = run_wide = found_run_wide = 0
    per_client: dict[int, list[tuple[np.ndarray, list[int]]]] = defaultdict(list)
    for attempt in view.sums:
        for client in attempt.inputs:
            x = view.contribution(attempt, client)
            if x is None:
                continue
            starts = _probe_starts(x)
            contributions += 1
            found += _occurs(x, starts, view.received_bytes.get(client, {}).get(attempt.at, b""))
            per_client[client].append((x, starts))
    for client, items in per_client.items():
        haystack = b"".join(view.received_bytes.get(client, {}).values())
        picked = items[:: max(1, len(items) // RUN_WIDE_PER_CLIENT)][:RUN_WIDE_PER_CLIENT]
        run_wide += len(picked)
        found_run_wide += sum(_occurs(x, starts[:1], haystack) for x, starts in picked)
    view.cache["probe"] = _Probe(contributions, found, run_wide, found_run_wide)
    return view.cache["probe"]


def _occurs(x: np.ndarray, starts: list[int], haystack: bytes) -> bool:
    for start in starts:
        window = x[start : start + 4]
        if window.astype(np.float32).tobytes() in haystack or window.astype(np.float64).tobytes() in haystack:
            return True
    return False


def _probe_starts(x: np.ndarray, count: int = 3) -> list[int]:
    """Starts of up to ``count`` runs of 4 values that are not all zero (zeros prove nothing)."""
    starts = [i for i in range(0, max(0, x.size - 3), max(1, x.size // 16)) if np.count_nonzero(x[i : i + 4]) >= 2]
    return starts[:count]


@checks("P-CLEAR", backends={"plain"})
def plain_shows_every_input(view: RunView) -> Finding:
    inputs = _inputs_of(view)
    probe = plaintext_probe(view)
    evidence = f"as stated: the server received {len(inputs)} secure-sum inputs as plain float tensors{probe.sentence}"
    return verdict("P-CLEAR", not probe.contributions or probe.found == probe.contributions, evidence, **probe.details)


@checks("M-SUM", backends={"mask"})
def aggregates_equal_plaintext_sums(view: RunView) -> Finding:
    return _sums_equal(view, "M-SUM")


@checks("C-SUM", backends={"ckks"})
def released_sums_equal_plaintext_sums(view: RunView) -> Finding:
    return _sums_equal(view, "C-SUM")


def _sums_equal(view: RunView, claim: str) -> Finding:
    """Every aggregate the server holds in the clear (mask: each delivered ring sum, decoded;
    ckks: each sum the clients released) against the float64 sum of the contributors' clipped
    plaintexts, within the stated bound."""
    if not view.with_clients:
        return not_applicable(claim, "needs the clients' audit records (client --transcript DIR --audit, or run --transcript) as ground truth")
    checked, worst, failures, skipped, kept, noised = 0, 0.0, [], 0, 0, 0
    for attempt in view.sums:
        if attempt.deliver is None:
            continue
        if claim == "M-SUM" and attempt.deliver.aggregate is None:
            kept += 1  # a server-only sum: the server unmasked it and delivered only its contributor set
            continue
        if attempt.request.spec.noise is not None:
            noised += 1  # the sum of the clients' records plus distributed DP noise: DDP-NOISE measures that noise
            continue
        parts = [view.contribution(attempt, c) for c in attempt.contributors]
        if any(p is None for p in parts) or not parts:
            skipped += 1
            continue
        request = attempt.request
        if claim == "M-SUM":
            clip = request.encoding.clip_range
            truth = np.sum([np.clip(p, -clip, clip) for p in parts], axis=0)
            values = request.encoding.decode_sum(np.ascontiguousarray(attempt.deliver.aggregate[: request.spec.size]))
            bound = request.encoding.error_bound(len(parts))
        else:
            if not attempt.released:
                continue
            ckks = config_from_dict(view.config["secure_sum"]).ckks
            clip, scale_bits = ckks.encoding(request.spec, len(view.run_clients))
            truth = np.sum([np.clip(p, -clip, clip) for p in parts], axis=0)
            released = next(iter(attempt.released.values()))
            values = request.spec.flatten(released).astype(np.float64)
            # the stated error, and as much again: a client releases the sum rounded to the power of two at or above it (C-RELEASE)
            bound = 2 * ckks.params.error_bound(len(parts), clip_range=clip, scale_bits=scale_bits)
        error = float(np.max(np.abs(values - truth), initial=0.0))
        worst = max(worst, error / bound if bound else 0.0)
        checked += 1
        if error > bound:
            failures.append(f"{attempt.name} (round {attempt.round}): error {error:.3g} > bound {bound:.3g}")
    also = f"; {kept} server-only sums (their aggregate stays in the server, not in its transcript)" if kept else ""
    also += f"; {noised} noised sums (distributed DP: checked under DDP-NOISE)" if noised else ""
    if not checked:
        return not_applicable(claim, f"no delivered aggregate to check against its contributors' records ({skipped} lacked some){also}")
    if failures:
        return failed(claim, "; ".join(failures[:3]) + (f" and {len(failures) - 3} more" if len(failures) > 3 else ""), sums=checked)
    return passed(claim, f"{checked} aggregates equal the plaintext sums of their contributors (largest error {worst:.2f} of its bound){also}",
                  sums=checked, largest_error_of_bound=worst)


@checks("M-DROPOUT", backends={"mask"})
def sums_need_their_survivors(view: RunView) -> Finding:
    """Every delivered sum has at least the announced min_survivors contributors; sums the
    server could not finish were never delivered (listed, with re-keys, in the report)."""
    floors = {(s, r): a.min_survivors for s, r, a in view.advertised}
    low = [a for a in view.sums if a.deliver is not None and len(a.contributors) < floors.get((a.session, a.round), 0)]
    delivered = [a for a in view.sums if a.deliver is not None]
    undelivered = [a for a in view.sums if a.deliver is None]
    dropped_in = [a for a in delivered if len(a.contributors) < len(a.asked)]
    evidence = (f"{len(delivered)} sums delivered, each with at least its announced floor of contributors; {len(dropped_in)} of them "
                f"completed without some clients asked; {len(undelivered)} started but never delivered "
                f"({sum(a.status == 'redone' for a in undelivered)} redone after a re-key)")
    if low:
        evidence = "; ".join(f"{a.name} (round {a.round}) delivered with {len(a.contributors)} contributors, below its floor" for a in low[:3])
    return verdict("M-DROPOUT", not low, evidence, delivered=len(delivered), undelivered=len(undelivered))


@checks("M-BOTH", backends={"mask"})
def never_both_secrets(view: RunView) -> Finding:
    """Per key epoch, no client has (1) its self-mask revealed (its own unmask answer, or seed
    shares from others) and shares of its mask key revealed; (2) shares of its seed and pair seeds
    with it revealed (its seed opens its self-mask of every sum); (3) its self-mask key for a sum
    and pair seeds with it for the same sum. (2) covers each holder: none reveals both a seed
    share of a client and a pair seed or mask-key share of it."""
    self_mask: dict[tuple[bytes, int, int], set[int]] = defaultdict(set)  # own key of some sum, or seed shares
    seeds: dict[tuple[bytes, int, int], set[int]] = defaultdict(set)  # seed shares
    key: dict[tuple[bytes, int, int], set[int]] = defaultdict(set)  # mask-key shares
    paired: dict[tuple[bytes, int, int], set[int]] = defaultdict(set)  # pair seeds, any sum
    own_key: dict[tuple[tuple[bytes, int, int], int], set[int]] = defaultdict(set)  # (epoch, sum) -> own self-mask keys
    paired_in: dict[tuple[tuple[bytes, int, int], int], set[int]] = defaultdict(set)  # (epoch, sum) -> pair seeds
    for reveal in view.reveals:
        epoch, message = reveal.epoch, reveal.message
        if isinstance(message, sm.PairSeedsResponse):
            peers = {p.peer for p in message.pair_seeds}
            paired[epoch] |= peers
            paired_in[(epoch, reveal.sum_index)] |= peers
        elif isinstance(message, sm.UnmaskResponse):
            if message.self_mask_key:
                self_mask[epoch].add(reveal.client)
                own_key[(epoch, reveal.sum_index)].add(reveal.client)
            key[epoch].update(s.owner for s in message.mask_key_shares)
        else:
            owners = {s.owner for s in message.self_seed_shares}
            self_mask[epoch] |= owners
            seeds[epoch] |= owners
    if not view.reveals:
        return not_applicable("M-BOTH", "no unmask step in the run (streaming sums only, or no sums)")
    both = sorted(set().union(*(self_mask[e] & key[e] for e in self_mask)))
    seed_and_pair = sorted(set().union(*(seeds[e] & paired[e] for e in seeds)))
    same_sum = sorted(set().union(*(own_key[s] & paired_in[s] for s in own_key)))
    if both or seed_and_pair or same_sum:
        return verdict("M-BOTH", False, "; ".join(
            f"clients {clients} had {what} revealed in one key epoch" for clients, what in (
                (both, "both their self-mask and their mask key"), (seed_and_pair, "both their seed and pair seeds with them"),
                (same_sum, "both their self-mask key for a sum and pair seeds with them for that sum")) if clients))
    mask_keys, pair_seeds = sum(len(v) for v in key.values()), sum(len(v) for v in paired.values())
    return verdict("M-BOTH", True, f"{len(view.reveals)} pair-seed, unmask and recovery answers in {len(self_mask | key | paired)} key epochs; "
                   f"mask-key shares revealed for {mask_keys} client-epochs, none of whose self-mask was revealed; pair seeds revealed "
                   f"with {pair_seeds} client-epochs, none of whose seed was, nor its self-mask key for the same sum")


@checks("M-ONCE", backends={"mask"})
def one_input_per_sum_index(view: RunView) -> Finding:
    """No client masked two inputs under one (key epoch, sum index)."""
    seen: dict[tuple[bytes, int, int, int, int], int] = defaultdict(int)
    for attempt in view.sums:
        for client in attempt.inputs:
            seen[(attempt.session, attempt.round, attempt.epoch, attempt.sum_index, client)] += 1
    twice = [k for k, n in seen.items() if n > 1]
    if not seen:
        return not_applicable("M-ONCE", "the run has no secure sums")
    return verdict("M-ONCE", not twice, f"{len(seen)} masked inputs, each the only one of its client under its (key epoch, sum index)"
                   if not twice else f"{len(twice)} (key epoch, sum index) pairs got two inputs from one client, e.g. client {twice[0][4]}")


@checks("M-STREAM", backends={"mask"})
def streaming_sums_are_all_or_nothing(view: RunView) -> Finding:
    streaming = [a for a in view.sums if a.streaming]
    if not streaming:
        return not_applicable("M-STREAM", "no sum took the streaming variant")
    partial = [a for a in streaming if a.deliver is not None and set(a.contributors) != set(a.asked)]
    abandoned = sum(a.deliver is None for a in streaming)
    return verdict("M-STREAM", not partial, f"{len(streaming)} streaming sums; every delivered one holds every live client's input; "
                   f"{abandoned} abandoned after a dropout" if not partial else
                   f"{len(partial)} streaming sums were delivered without every live client, e.g. {partial[0].name} (round {partial[0].round})")


@checks("M-RANGE", backends={"mask"})
def sums_fit_the_ring(view: RunView) -> Finding:
    """Every delivered mask sum fits its ring: n * max code < 2^(ring_bits-1); clipping is counted."""
    delivered = [a for a in view.sums if a.deliver is not None and a.request.encoding is not None]
    if not delivered:
        return not_applicable("M-RANGE", "no mask sum was delivered")
    unfit = [a for a in delivered if not a.request.encoding.fits(len(a.contributors))]
    clipped = sum(int(a.deliver.clipped or 0) for a in delivered)
    return verdict("M-RANGE", not unfit, f"{len(delivered)} delivered sums fit their ring for their contributors; {clipped} input values "
                   "were clipped, counted in the deliveries" if not unfit else f"{len(unfit)} sums could overflow their ring", clipped=clipped)


@checks("C-PUBLIC", backends={"ckks"})
def server_context_is_public(view: RunView) -> Finding:
    if not view.key_deals:
        return not_applicable("C-PUBLIC", "no key deal in the transcript")
    import tenseal as ts

    secret = 0
    for deal in view.key_deals:
        context = ts.context_from(deal.public_context)
        secret += bool(context.has_secret_key() or context.is_private())
    return verdict("C-PUBLIC", not secret, f"{len(view.key_deals)} public contexts the server received; {secret} hold a secret key")

