"""Benchmark: one secure-sum round (key set-up + one sum) per backend, over n clients and L values.

What is measured
----------------
For each backend (plain, mask, ckks), number of clients n and vector length L, one *round*:
``session.start_round()`` (key set-up: nothing for plain; advertise + share keys for mask; advertise,
key deal and key install for ckks) followed by ``session.secure_sum("bench", inputs)``, on a fresh
``local_session`` (fresh identity keys, fresh session). Every client contributes one float32 vector
of length L drawn uniformly from [-1, 1) with a seeded ``np.random.default_rng`` (the same inputs
for every backend at a given n, L and repeat).

Everything runs in one process through ``LocalRunner``: the server and all n clients run one after
another, every message is serialised to the real protobuf wire format and parsed again. So the wall
time of a round is roughly the *sum* of every party's work, and ``client_seconds`` (from
``Traffic.client_seconds``: decode request + handle + encode response, summed over the round) is
one client's share of it. By default each measurement runs in a fresh child process, so the peak
RSS reported is that measurement's own (``--in-process`` runs them in this process instead; peak RSS
is then the process peak so far).

How to run
----------
    # full default sweep: n in {10, 100, 1000}, L in {1e5, 1e6}, plain/mask/ckks
    # (about 15 min on a 2-core AMD EPYC box; the mask n=1000, L=1e6 cell alone takes 5 min and 17 GB RSS)
    .venv/bin/python benchmarks/secure_sum.py

    # quick
    .venv/bin/python benchmarks/secure_sum.py --n 10,100 --L 1e5

    # only mask, 3 repeats, sparse graph forced, JSON only
    .venv/bin/python benchmarks/secure_sum.py --backends mask --graph sparse --repeats 3 --json-only

    # cProfile each measurement (writes .prof and a top-40 .txt per measurement; timings are inflated)
    .venv/bin/python benchmarks/secure_sum.py --n 1000 --L 1e5 --backends mask --profile /tmp/prof

Output: stdout gets one JSON object per line, flushed as soon as it exists. The first line is
``"record": "meta"`` (versions, CPU model, cores, memory, date, git commit, arguments). Then one
``"record": "run"`` line per measurement (one per repeat), or ``"record": "skip"`` / ``"record":
"error"`` lines saying which cell was not measured and why. After all measurements, one
``"record": "floor"`` line per mask cell (benchmarks/floor.py: what its key set-up and sum's
cryptography must cost on the one core this process runs every party on, over the plain wall of
the same n and L in this run; ``plain_s`` null where plain did not run) and (unless
``--json-only``) two markdown tables follow. Progress goes to stderr.

How to read the JSON fields of a run line
-----------------------------------------
- ``client_seconds``: median over clients of that client's CPU-bound work for the whole round
  (set-up + one sum); ``client_seconds_max`` the slowest client (for ckks, the key dealer),
  ``client_seconds_total`` the sum over clients.
- ``server_seconds``: the server's work, including encoding every request it sends.
- ``wall_seconds``: the whole round in this single process (~ server + all clients + runner overhead).
  ``process_cpu_seconds`` is the CPU time of the process over the same interval (> wall means a
  library used more than one thread).
- ``upload_bytes_per_client`` / ``download_bytes_per_client``: median over clients of the protobuf
  wire bytes the client sent / received during the round (``Traffic.up`` / ``Traffic.down``).
  ``upload_over_float32`` = upload / (4 L): 1.0 means "as many bytes as sending the raw float32 vector".
- ``max_abs_error``: max |result - float64 sum of the float32 inputs| over the L elements, from the
  server's result (plain, mask) or a client's decrypted result (ckks: the server never sees the sum).
  ``error_bound`` is ``SumResult.error_bound``; ``within_bound`` compares the two. ``clients_agree``
  says whether the first and last clients' results equal the one checked.
- mask only (null for the others): ``graph``, ``degree`` (neighbours per client), ``threshold``, ``ring_bits``;
  ``prg_floor_seconds``: the time one client needs just to generate its PRG streams (degree + 1 self
  mask streams of L + 1 ring elements each, with ``MaskPRG.keystream``, median of 5 after a warm-up,
  measured in the same process right after the round); ``prg_add_floor_seconds`` adds the
  unavoidable ring additions into one accumulator; ``client_over_prg_floor`` = client_seconds /
  prg_floor_seconds (the whole round, key set-up included); ``mask_input_seconds`` is the median
  client's time to mask its input for the sum (the INPUT stage handler: fixed-point encoding,
  self-mask and pairwise masks; protobuf serialisation is counted in client_codec_seconds), and ``input_over_prg_floor`` = mask_input_seconds / prg_floor_seconds:
  the cost of each further sum of a round, which the key set-up is not repeated for.
- ckks only: ``ckks_params`` (poly_modulus_degree, coeff_mod_bit_sizes, scale_bits, slots, chunks).
- ``client_stage_seconds``: median over clients of the time in each stage's handler (the client's
  ``handle`` is wrapped); ``client_codec_seconds``: median time decoding requests and encoding
  responses (client_seconds minus the handlers).
- ``peak_rss_mb``: peak resident memory (``resource.getrusage``) of the process that ran it;
  ``estimated_peak_mb`` is the estimate used to decide whether to skip (see ``--mem-limit-gb``).
  Inputs are handed to the clients without this script keeping a reference (``HandOff``), so
  memory is what the library itself holds.
- ``up_by_stage`` / ``down_by_stage``: total bytes over all clients per protocol stage.

The tables: one row per (n, L); per backend the median (over repeats) of client seconds, server
seconds, wall seconds and upload bytes per client (MB and multiple of float32), then ratios
mask/plain and ckks/plain for wall and client seconds (only between measurements of this run), and
mask wall / that floor ("mask floor s", "mask wall ÷ floor"; "—" without a plain cell in this run) and
mask client seconds / PRG floor. The second table gives errors, bounds and peak memory.

Targets (from the issue)
------------------------
- mask: per-client cost within 2x of the time to generate that client's PRG streams. We read it
  per sum (``input_over_prg_floor`` <= 2: the masking cost of a sum), and report the whole round
  with its key set-up (``client_over_prg_floor``) beside it: key agreement with every neighbour
  is paid once per round, however many sums follow.
- mask: upload bytes <= float32 bytes (``upload_over_float32`` <= 1.0) wherever the 32-bit ring fits
  (it does with the defaults here: clip range 1, 20 fractional bits, n <= 1000).
- For scale (shared/research/peer-benchmark.md): Flower 1.41 SecAgg+ uploads 2.0x float32 bytes
  and spends about 60 ms of client CPU per client at n=100, L=1e5 on this kind of machine (2 cores);
  Flower's SecAgg+ round at n=100, L=1e5 took 8.95 s wall vs 0.87 s for plain FedAvg.

Cells skipped by design: ckks cells with n * L > ``--ckks-max-work`` (default 1e8; n=1000, L=1e6
ckks would take about 20 minutes), and any cell whose estimated memory exceeds ``--mem-limit-gb``
(default 20). Each prints a skip line with the reason.

This file is a benchmark, not a test: pytest does not collect it (no test_ names).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np
from floor import floor_cell, floor_of_sums, ratio_to_floor
from progress import running

BACKENDS = ("plain", "mask", "ckks")
BASE_MEMORY_BYTES = 400 * 2**20  # interpreter + numpy + tenseal + cryptography, measured roughly


# --------------------------------------------------------------------------------------------
# argument parsing


def _int_list(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        value = float(part)
        if value != int(value) or value < 1:
            raise argparse.ArgumentTypeError(f"{part!r} is not a positive integer")
        out.append(int(value))
    if not out:
        raise argparse.ArgumentTypeError("empty list")
    return out


def _backend_list(text: str) -> list[str]:
    out = [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in out if b not in BACKENDS]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"backends must be among {','.join(BACKENDS)}, got {text!r}")
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Benchmark one secure-sum round (set-up + one sum) for the plain, mask and ckks backends.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--n", type=_int_list, default=_int_list("10,100,1000"), help="comma list of client counts")
    p.add_argument("--L", type=_int_list, default=_int_list("1e5,1e6"), help="comma list of vector lengths (1e5 style ok)")
    p.add_argument("--backends", type=_backend_list, default=list(BACKENDS), help="comma list among plain,mask,ckks")
    p.add_argument("--repeats", type=int, default=1, help="measurements per cell (fresh session and inputs each)")
    p.add_argument("--clip-range", type=float, default=1.0, help="clip range of mask and ckks (inputs are in [-1,1))")
    p.add_argument("--precision-bits", type=int, default=20, help="mask fixed-point fractional bits")
    p.add_argument("--graph", choices=("auto", "complete", "sparse"), default="auto",
                   help="mask neighbour graph; auto = complete up to 100 clients, sparse O(log n) above")
    p.add_argument("--seed", type=int, default=0, help="seed of the input vectors")
    p.add_argument("--ckks-max-work", type=float, default=1e8, help="skip ckks cells with n*L above this")
    p.add_argument("--mem-limit-gb", type=float, default=20.0, help="skip cells whose estimated peak memory exceeds this")
    p.add_argument("--in-process", action="store_true", help="run every measurement in this process (no child processes)")
    p.add_argument("--profile", metavar="DIR", default=None, help="cProfile each round; write DIR/<cell>.prof and .txt")
    p.add_argument("--json-only", action="store_true", help="print only the JSON lines (no tables, no progress)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if not args.clip_range > 0:
        p.error("--clip-range must be > 0")
    return args


# --------------------------------------------------------------------------------------------
# metadata


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total_gb() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 2)
    except OSError:
        pass
    return None


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


def metadata(args: argparse.Namespace) -> dict[str, Any]:
    import cryptography

    try:
        import tenseal

        tenseal_version = getattr(tenseal, "__version__", None) or _version("tenseal")
    except Exception:
        tenseal_version = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True, text=True, timeout=10,
        ).stdout.strip() or None
    except Exception:
        commit = None
    return {
        "record": "meta",
        "benchmark": "secure_sum",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cryptography": cryptography.__version__,
        "tenseal": tenseal_version,
        "protobuf": _version("protobuf"),
        "secure_fedgraph": _version("secure-fedgraph"),
        "git_commit": commit,
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "mem_total_gb": _mem_total_gb(),
        "platform": platform.platform(),
        "args": {k: v for k, v in vars(args).items()},
    }


# --------------------------------------------------------------------------------------------
# one measurement


def make_config(backend: str, args: argparse.Namespace):
    from secure_fedgraph.protocol.sum_backends import Backend, CkksConfig, GraphKind, MaskConfig, SecureSumConfig

    return SecureSumConfig(
        backend=Backend(backend),
        mask=MaskConfig(clip_range=args.clip_range, precision_bits=args.precision_bits, graph=GraphKind(args.graph)),
        ckks=CkksConfig(clip_range=args.clip_range),
    )


def estimate_memory_bytes(backend: str, n: int, L: int, args: argparse.Namespace | None = None) -> int:
    """Rough peak RSS of one measurement, from what the library keeps per client (measured with
    tracemalloc and /proc at smaller sizes):

    - every client holds its float32 input from ``contribute`` until its sum is delivered, and then
      keeps a float64 copy of the result in ``ClientRole.results``; inputs are handed over (this
      script keeps no reference), so the peak is about max(4, 8) bytes per value per client, plus
      the float64 results of the last clients while the first inputs' memory is reused;
    - mask: each client's ``MaskPRG`` keeps two scratch buffers of (L+1) ring elements for good,
      and each client builds its own copy of the neighbour graph (about 70 bytes per edge end);
    - ckks: each client's TenSEAL secret context takes about 3.6 MB.
    """
    per_client = 8 * L  # float64 result (inputs, 4 L, are freed as results arrive)
    extra = 16 * 8 * L  # transients: flatten/clip/encode copies, wire buffers, the server's sum
    if backend == "mask":
        ring_bytes = 4
        if args is not None:
            try:
                ring_bytes = make_config(backend, args).mask.encoding(n, L).ring_bits // 8
                degree = make_config(backend, args).mask.resolve(n, None).degree
            except Exception:
                degree = n - 1
        else:
            degree = n - 1
        per_client += 2 * ring_bytes * (L + 1) + n * (70 * degree + 250)
    elif backend == "ckks":
        per_client += int(3.6 * 2**20)
        extra += 3 * 8 * 4 * L  # serialised ciphertexts in flight and the encrypted accumulator
    return BASE_MEMORY_BYTES + n * per_client + extra


class HandOff(Mapping):
    """The inputs mapping given to ``secure_sum``: hands each client's tensors over once.

    ``LocalSession.secure_sum`` iterates ``items()`` once to call ``contribute`` on every client,
    then reads the first value to build the SumSpec. Dropping our reference as each item is handed
    over means a client's input is freed as soon as the client itself lets go of it (when its sum
    is delivered), instead of this script holding all n inputs to the end of the round.
    """

    def __init__(self, data: dict[int, dict[str, np.ndarray]]) -> None:
        self._data = data
        self._first = next(iter(data)) if data else None

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def items(self):  # type: ignore[override]
        for key in list(self._data):
            value = self._data[key] if key == self._first else self._data.pop(key)
            yield key, value
            del value


def make_inputs(n: int, L: int, seed: int, repeat: int) -> tuple[dict[int, dict[str, np.ndarray]], np.ndarray]:
    """float32 vectors uniform in [-1, 1), one per client, and their exact float64 sum."""
    rng = np.random.default_rng([seed, n, L, repeat])
    inputs: dict[int, dict[str, np.ndarray]] = {}
    reference = np.zeros(L, dtype=np.float64)
    for c in range(n):
        x = rng.random(L, dtype=np.float32)
        x *= 2
        x -= 1  # exact in float32: [0, 1) -> [-1, 1)
        np.add(reference, x, out=reference)
        inputs[c] = {"x": x}
    return inputs, reference


def prg_floor(streams: int, count: int, ring_bits: int, trials: int = 5) -> tuple[float, float]:
    """(keystream-only seconds, keystream + ring add seconds) for one client's PRG streams; medians."""
    from secure_fedgraph.crypto.prg import MaskPRG, ring_dtype

    keys = [os.urandom(32) for _ in range(streams)]
    prg = MaskPRG()
    prg.keystream(keys[0], stream_id=1, count=count, ring_bits=ring_bits)  # warm-up: scratch buffers
    only, with_add = [], []
    acc = np.zeros(count, dtype=ring_dtype(ring_bits))
    for _ in range(trials):
        started = time.perf_counter()
        for k in keys:
            prg.keystream(k, stream_id=1, count=count, ring_bits=ring_bits)
        only.append(time.perf_counter() - started)
        started = time.perf_counter()
        for k in keys:
            np.add(acc, prg.keystream(k, stream_id=1, count=count, ring_bits=ring_bits), out=acc)
        with_add.append(time.perf_counter() - started)
    return statistics.median(only), statistics.median(with_add)


def _time_client_stages(session) -> dict[str, dict[int, float]]:
    """Wrap every client's ``handle`` to record seconds per stage (handler only, without the wire
    codec, which ``Traffic.client_seconds`` also counts). Costs two perf_counter calls per message."""
    seconds: dict[str, dict[int, float]] = {}
    for cid, client in session.clients.items():
        inner = client.handle

        def handle(request, _inner=inner, _cid=cid):
            started = time.perf_counter()
            try:
                return _inner(request)
            finally:
                per = seconds.setdefault(request.header.stage.value, {})
                per[_cid] = per.get(_cid, 0.0) + time.perf_counter() - started

        client.handle = handle
    return seconds


def _median(values) -> float:
    values = list(values)
    return float(statistics.median(values)) if values else 0.0


def _result_vector(result) -> np.ndarray | None:
    if result is None or result.values is None:
        return None
    return np.asarray(result.values["x"], dtype=np.float64)


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """Run one round for (backend, n, L, repeat) and return the run record."""
    args = argparse.Namespace(**job["args"])
    backend, n, L, repeat = job["backend"], job["n"], job["L"], job["repeat"]
    from secure_fedgraph.protocol.engine.local import local_session

    config = make_config(backend, args)
    record: dict[str, Any] = {"record": "run", "backend": backend, "n": n, "L": L, "repeat": repeat, "graph": None, "degree": None}
    if backend == "mask":
        plan = config.mask.resolve(n, config.min_survivors)
        encoding = config.mask.encoding(n, L)
        record.update(graph=plan.graph.value, degree=plan.degree, threshold=plan.threshold,
                      min_survivors=plan.min_survivors, ring_bits=encoding.ring_bits,
                      clip_range=args.clip_range, precision_bits=args.precision_bits)
    elif backend == "ckks":
        params = config.ckks.params
        record.update(ckks_params={
            "poly_modulus_degree": params.poly_modulus_degree,
            "coeff_mod_bit_sizes": list(params.coeff_mod_bit_sizes),
            "scale_bits": params.scale_bits,
            "slots": params.slots,
            "chunks": params.chunks(L),
        }, clip_range=args.clip_range)

    t0 = time.perf_counter()
    inputs, reference = make_inputs(n, L, args.seed, repeat)
    session = local_session(config, range(n))
    stage_seconds = _time_client_stages(session)
    handoff = HandOff(inputs)
    del inputs
    record["prepare_seconds"] = time.perf_counter() - t0  # inputs + identity keys; not part of the round
    record["estimated_peak_mb"] = estimate_memory_bytes(backend, n, L, args) / 2**20
    gc.collect()

    profiler = None
    if job.get("profile_path"):
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    session.start_round()
    result = session.secure_sum("bench", handoff)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    if profiler is not None:
        profiler.disable()
        _dump_profile(profiler, job["profile_path"])
    del handoff  # clients dropped their contributions when the sum was delivered

    traffic = session.runner.traffic
    client_s = [traffic.client_seconds.get(c, 0.0) for c in range(n)]
    ups = [traffic.up.get(c, 0) for c in range(n)]
    downs = [traffic.down.get(c, 0) for c in range(n)]
    record.update(
        wall_seconds=wall,
        process_cpu_seconds=cpu,
        client_seconds=_median(client_s),
        client_seconds_max=max(client_s),
        client_seconds_min=min(client_s),
        client_seconds_total=sum(client_s),
        server_seconds=traffic.server_seconds,
        runner_overhead_seconds=wall - traffic.server_seconds - sum(client_s),
        upload_bytes_per_client=_median(ups),
        upload_bytes_max=max(ups),
        download_bytes_per_client=_median(downs),
        download_bytes_max=max(downs),
        upload_over_float32=_median(ups) / (4 * L),
        download_over_float32=_median(downs) / (4 * L),
        client_stage_seconds={st: _median(per.get(c, 0.0) for c in range(n)) for st, per in stage_seconds.items()},
        client_codec_seconds=_median(client_s[c] - sum(per.get(c, 0.0) for per in stage_seconds.values()) for c in range(n)),
        up_by_stage={s.value: b for s, b in traffic.up_by_stage.items()},
        down_by_stage={s.value: b for s, b in traffic.down_by_stage.items()},
        contributors=len(result.contributors),
        clipped=result.clipped,
        error_bound=result.error_bound,
    )

    # correctness: the server's sum (plain, mask) or a client's decrypted sum (ckks)
    first, last = session.clients[0].last_result, session.clients[n - 1].last_result
    checked = _result_vector(result) if backend != "ckks" else _result_vector(first)
    if checked is None:
        record["max_abs_error"] = None
        record["within_bound"] = False
    else:
        err = float(np.max(np.abs(checked - reference))) if L else 0.0
        record["max_abs_error"] = err
        record["within_bound"] = bool(err <= result.error_bound) if backend != "plain" else None
    others = [_result_vector(first), _result_vector(last)]
    record["clients_agree"] = bool(checked is not None and all(o is not None and np.array_equal(o, checked) for o in others))
    if backend == "ckks":
        record["client_clipped"] = first.clipped if first is not None else None
    del session, result, first, last, checked, others, reference
    gc.collect()

    if backend == "mask":
        floor, floor_add = prg_floor(record["degree"] + 1, L + 1, record["ring_bits"])
        masking = record["client_stage_seconds"].get("input")
        record.update(prg_streams=record["degree"] + 1, prg_floor_seconds=floor, prg_add_floor_seconds=floor_add,
                      client_over_prg_floor=record["client_seconds"] / floor if floor > 0 else None,
                      mask_input_seconds=masking,
                      input_over_prg_floor=masking / floor if masking is not None and floor > 0 else None)

    record["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    record["peak_rss_scope"] = job.get("rss_scope", "child process")
    record["profiled"] = bool(job.get("profile_path"))
    return record


def _dump_profile(profiler, path: str) -> None:
    import io
    import pstats

    profiler.dump_stats(path + ".prof")
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(40)
    with open(path + ".txt", "w") as f:
        f.write(out.getvalue())


def _child(conn, job: dict[str, Any]) -> None:
    try:
        conn.send(("ok", measure(job)))
    except BaseException as exc:  # report anything, including MemoryError, to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def run_job(job: dict[str, Any], in_process: bool) -> tuple[str, Any]:
    if in_process:
        job = dict(job, rss_scope="whole process so far")
        try:
            return "ok", measure(job)
        except Exception as exc:
            return "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, job), daemon=True)
    proc.start()
    child.close()
    try:
        status, payload = parent.recv()
    except EOFError:
        proc.join()
        return "error", f"child process died without a result (exit code {proc.exitcode}; killed for memory?)"
    proc.join()
    return status, payload


# --------------------------------------------------------------------------------------------
# sweep and tables


def emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, default=str), flush=True)


def note(args: argparse.Namespace, text: str) -> None:
    if not args.json_only:
        print(text, file=sys.stderr, flush=True)


def skip_reason(backend: str, n: int, L: int, args: argparse.Namespace) -> str | None:
    if backend == "ckks" and n * L > args.ckks_max_work:
        return (f"ckks n*L = {n * L:.3g} exceeds --ckks-max-work={args.ckks_max_work:.3g} "
                f"(ckks costs about 1.5 ms of client encryption per 1e3 values; raise --ckks-max-work to run it)")
    need = estimate_memory_bytes(backend, n, L, args)
    if need > args.mem_limit_gb * 2**30:
        return (f"estimated peak memory {need / 2**30:.1f} GB (each client keeps a float64 result, and for mask two "
                f"PRG scratch buffers and a neighbour graph; ckks a 3.6 MB context) exceeds --mem-limit-gb={args.mem_limit_gb:g}")
    if backend == "mask":
        try:
            make_config(backend, args).mask.encoding(n, L)
        except Exception as exc:
            return f"mask encoding does not fit: {exc}"
    return None


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    if x >= 0.01:
        return f"{x:.3f}"
    return f"{x:.2g}"


def _fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "—"
    r = a / b
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x"


def _fmt_bytes(b: float | None, L: int) -> str:
    if b is None:
        return "—"
    return f"{b / 1e6:.2f} MB ({b / (4 * L):.2f}x)"


def _fmt_L(L: int) -> str:
    e = int(math.log10(L)) if L > 0 else 0
    return f"1e{e}" if L == 10**e else f"{L:,}"


def summarise(records: list[dict[str, Any]], skips: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], dict[str, Any]]:
    cells: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["backend"], r["n"], r["L"]), []).append(r)
    out = {}
    for key, rs in cells.items():
        med = {}
        for field in ("client_seconds", "client_seconds_max", "server_seconds", "wall_seconds", "upload_bytes_per_client",
                      "download_bytes_per_client", "prg_floor_seconds", "client_over_prg_floor",
                      "mask_input_seconds", "input_over_prg_floor", "peak_rss_mb"):
            vals = [r[field] for r in rs if r.get(field) is not None]
            med[field] = _median(vals) if vals else None
        med["max_abs_error"] = max((r["max_abs_error"] for r in rs if r.get("max_abs_error") is not None), default=None)
        med["error_bound"] = rs[0].get("error_bound")
        med["within_bound"] = all(r.get("within_bound") is not False for r in rs)
        med["graph"], med["degree"], med["ring_bits"] = rs[0].get("graph"), rs[0].get("degree"), rs[0].get("ring_bits")
        med["threshold"] = rs[0].get("threshold")
        med["repeats"] = len(rs)
        out[key] = med
    return out


def floors(records: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """(n, L) -> the floor of its mask round (benchmarks/floor.py): one key set-up and one sum,
    every party's cryptography on one core (they all run in one process, one after another; no
    contribution digest: nothing here resumes), over the median plain wall of the same (n, L) in
    this run (plain_s None where plain did not run)."""
    s = summarise(records, {})
    out = {}
    for (backend, n, L), cell in s.items():
        if backend == "mask":
            plain = s.get(("plain", n, L), {}).get("wall_seconds")
            out[(n, L)] = floor_of_sums(cell, [(L, cell["ring_bits"])], n=n, plain_s=plain, fresh_keys=True, hosts=0, resumable=False, cores_used=1)
    return out


def tables(records, skips, args, floor_by_cell: dict[tuple[int, int], dict[str, Any]]) -> str:
    s = summarise(records, skips)
    pairs = sorted({(r["n"], r["L"]) for r in records} | {(n, L) for (_, n, L) in skips})
    bs = [b for b in BACKENDS if b in args.backends]

    def get(b, n, L, field):
        cell = s.get((b, n, L))
        return None if cell is None else cell.get(field)

    def cellval(b, n, L, field, fmt):
        if (b, n, L) in skips:
            return "skipped"
        if (b, n, L) not in s:
            return "error" if b in bs else "—"
        return fmt(get(b, n, L, field))

    lines = []
    head = ["n", "L", "mask graph (deg, ring)"]
    head += [f"{b} wall s" for b in bs]
    head += [f"{b} client s" for b in bs]
    head += [f"{b} server s" for b in bs]
    head += [f"{b} up/client" for b in bs]
    ratio_cols = []
    if "plain" in bs and "mask" in bs:
        ratio_cols += ["mask/plain wall", "mask/plain client"]
    if "plain" in bs and "ckks" in bs:
        ratio_cols += ["ckks/plain wall", "ckks/plain client"]
    if "mask" in bs:
        ratio_cols += ["mask floor s", "mask wall ÷ floor", "mask PRG floor s", "mask input s (per sum)", "mask input/PRG floor",
                       "mask round client/PRG floor"]
    head += ratio_cols
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for n, L in pairs:
        graph = "—"
        if ("mask", n, L) in s:
            m = s[("mask", n, L)]
            graph = f"{m['graph']} ({m['degree']}, {m['ring_bits']}-bit)"
        row = [str(n), _fmt_L(L), graph]
        row += [cellval(b, n, L, "wall_seconds", _fmt_s) for b in bs]
        row += [cellval(b, n, L, "client_seconds", _fmt_s) for b in bs]
        row += [cellval(b, n, L, "server_seconds", _fmt_s) for b in bs]
        row += [cellval(b, n, L, "upload_bytes_per_client", lambda v, L=L: _fmt_bytes(v, L)) for b in bs]
        if "plain" in bs and "mask" in bs:
            row += [_fmt_ratio(get("mask", n, L, "wall_seconds"), get("plain", n, L, "wall_seconds")),
                    _fmt_ratio(get("mask", n, L, "client_seconds"), get("plain", n, L, "client_seconds"))]
        if "plain" in bs and "ckks" in bs:
            row += [_fmt_ratio(get("ckks", n, L, "wall_seconds"), get("plain", n, L, "wall_seconds")),
                    _fmt_ratio(get("ckks", n, L, "client_seconds"), get("plain", n, L, "client_seconds"))]
        if "mask" in bs:
            floor = floor_by_cell.get((n, L))
            row += [floor_cell(floor, ".3g"), ratio_to_floor(get("mask", n, L, "wall_seconds"), floor),
                    cellval("mask", n, L, "prg_floor_seconds", _fmt_s),
                    cellval("mask", n, L, "mask_input_seconds", _fmt_s),
                    _fmt_ratio(get("mask", n, L, "mask_input_seconds"), get("mask", n, L, "prg_floor_seconds")),
                    _fmt_ratio(get("mask", n, L, "client_seconds"), get("mask", n, L, "prg_floor_seconds"))]
        lines.append("| " + " | ".join(row) + " |")

    lines.append("")
    head2 = ["n", "L"]
    for b in bs:
        head2 += [f"{b} max abs err (bound)", f"{b} client s max", f"{b} down/client", f"{b} peak RSS MB"]
    lines.append("| " + " | ".join(head2) + " |")
    lines.append("|" + "---|" * len(head2))
    for n, L in pairs:
        row = [str(n), _fmt_L(L)]
        for b in bs:
            if (b, n, L) in skips or (b, n, L) not in s:
                row += ["skipped" if (b, n, L) in skips else "error"] + ["—"] * 3
                continue
            c = s[(b, n, L)]
            err = "—" if c["max_abs_error"] is None else f"{c['max_abs_error']:.2g}"
            bound = f"{c['error_bound']:.2g}" if c["error_bound"] else "0"
            ok = "" if c["within_bound"] else " OVER"
            row += [f"{err} ({bound}){ok}", _fmt_s(c["client_seconds_max"]),
                    _fmt_bytes(c["download_bytes_per_client"], L), f"{c['peak_rss_mb']:.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    if skips:
        lines.append("")
        for (b, n, L), why in sorted(skips.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
            lines.append(f"- skipped {b} n={n} L={_fmt_L(L)}: {why}")
    reps = sorted({c["repeats"] for c in s.values()})
    lines.append("")
    lines.append(f"Medians over {', '.join(map(str, reps))} repeat(s) per cell; all ratios are between measurements of this run.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    emit(metadata(args))
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    job_args = {k: v for k, v in vars(args).items()}
    records: list[dict[str, Any]] = []
    skips: dict[tuple[str, int, int], str] = {}
    failures = 0
    for L in args.L:
        for n in args.n:
            for backend in args.backends:
                reason = skip_reason(backend, n, L, args)
                if reason is not None:
                    skips[(backend, n, L)] = reason
                    emit({"record": "skip", "backend": backend, "n": n, "L": L, "reason": reason})
                    continue
                for repeat in range(args.repeats):
                    job = {"args": job_args, "backend": backend, "n": n, "L": L, "repeat": repeat}
                    if args.profile:
                        job["profile_path"] = os.path.join(args.profile, f"{backend}_n{n}_L{L}_r{repeat}")
                    t = time.perf_counter()
                    with running(f"running {backend} n={n} L={_fmt_L(L)} repeat {repeat}") if not args.json_only else nullcontext():
                        status, payload = run_job(job, args.in_process)
                    if status == "ok":
                        payload["measurement_seconds"] = time.perf_counter() - t  # incl. child start, inputs, floor
                        records.append(payload)
                        emit(payload)
                    else:
                        failures += 1
                        emit({"record": "error", "backend": backend, "n": n, "L": L, "repeat": repeat, "error": payload})
    floor_by_cell = floors(records)
    for (n, L), floor in floor_by_cell.items():
        emit({"record": "floor", "backend": "mask", **floor})
    total = time.perf_counter() - started
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    emit({"record": "done", "total_seconds": total, "measurements": len(records), "skipped_cells": len(skips),
          "errors": failures, "peak_rss_mb_children": peak_children, "peak_rss_mb_self": peak_self})
    if not args.json_only:
        print()
        print(tables(records, skips, args, floor_by_cell))
        print()
        print(f"Total run time {total:.0f} s; peak RSS {max(peak_children, peak_self):.0f} MB.")
        sys.stdout.flush()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
