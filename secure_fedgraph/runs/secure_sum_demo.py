"""A secure-sum demonstration: what the server saw, what it recovered, and the aggregate.

Runs one round of the chosen backend in this process (every message through the real wire
codec), drops one client after the key set-up to show recovery, and then checks, from the
messages the server actually received, that it saw only masked (or encrypted) uploads and
that the aggregate equals the plaintext sum within the stated error. It prints no key, seed,
share or individual input.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.engine.local import local_session
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig, Stage
from secure_fedgraph.protocol.sum_backends.messages import InputResponse


@dataclass(frozen=True)
class DemoConfig:
    """Options of ``secure-fedgraph demo`` (see ``--help``)."""

    clients: int = 8
    backend: Backend = Backend.MASK
    size: int = 10_000
    drop: int | None = 2
    seed: int = 0


def _human(nbytes: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if nbytes < 1000 or unit == "GB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{int(nbytes)} B"
        nbytes /= 1000
    raise AssertionError


def run(config: DemoConfig, out: Callable[[str], None] = print) -> bool:
    """Run the demonstration; return True when every check passed."""
    n = config.clients
    rng = np.random.default_rng(config.seed)
    inputs = {
        c: {"weight": rng.normal(0, 0.5, (config.size // 10, 10)).astype(np.float32), "bias": rng.normal(0, 0.5, 10).astype(np.float32)}
        for c in range(n)
    }
    drop = {Stage.INPUT: {config.drop}} if config.drop is not None else None
    session = local_session(SecureSumConfig(backend=config.backend), range(n), drop=drop, record=True)
    out(f"secure-fedgraph demo: a secure sum over {n} clients with the {config.backend.value} backend, in one process")
    out(f"  each client holds weight {inputs[0]['weight'].shape} and bias {inputs[0]['bias'].shape} (float32, {_human(4 * (config.size + 10))})")
    if config.drop is not None:
        out(f"  client {config.drop} will drop out after the key set-up, before sending its input")
    started = time.perf_counter()
    session.start_round()
    server_result = session.secure_sum("model", inputs)
    seconds = time.perf_counter() - started
    client_result = session.clients[min(server_result.contributors)].last_result
    contributors = sorted(client_result.contributors)

    out("\nWhat the server received (its transcript):")
    uploads = [(c, codec.decode(d)) for s, c, d in session.runner.received if s is Stage.INPUT]
    checks = []
    first_client, first = uploads[0]
    truth = np.concatenate([inputs[first_client][k].ravel() for k in ("weight", "bias")]).astype(np.float64)
    if config.backend is Backend.MASK:
        y = first.payload
        counts = np.bincount(np.frombuffer(y.tobytes(), dtype=np.uint8), minlength=256)
        p_uniform = stats.chisquare(counts).pvalue
        r = float(np.corrcoef(y[: truth.size].astype(np.float64), truth)[0, 1])
        out(f"  client {first_client}'s upload: {y.size} elements of Z_2^{8 * y.dtype.itemsize}, first ones {y[:4].tolist()}")
        r_limit = 4 / np.sqrt(truth.size)  # 4 standard errors of r for independent data
        out(f"  its bytes look uniform (chi-square p = {p_uniform:.2f}); correlation with the true input r = {r:+.4f}")
        checks.append(("uploads are uniform and uncorrelated with inputs", p_uniform > 1e-6 and abs(r) < r_limit))
        for (_, _, client), kinds in sorted(session.server.revealed.items()):
            secrets = " and ".join(sorted(kind.replace("_", " ") for kind in kinds))
            out(f"  recovered for dropped client {client}: its {secrets} from Shamir shares (never both)")
        checks.append(("no client had both recovery secrets rebuilt", all(len(k) == 1 for k in session.server.revealed.values())))
    elif config.backend is Backend.CKKS:
        size = sum(map(len, first.ciphertexts))
        out(f"  client {first_client}'s upload: {len(first.ciphertexts)} CKKS ciphertexts, {_human(size)} ({size / (4 * truth.size):.1f}x its float32 bytes)")
        out(f"  the server's context holds a secret key: {session.server.context.has_secret_key}")
        checks.append(("server context has no secret key", not session.server.context.has_secret_key))
    else:
        out(f"  client {first_client}'s upload is its tensor in the clear (the plain backend is the insecure baseline)")
        checks.append(("plain uploads equal the inputs", np.allclose(first.payload, truth, atol=1e-6)))
    assert isinstance(first, InputResponse)

    reference = {k: np.sum([inputs[c][k].astype(np.float64) for c in contributors], axis=0) for k in ("weight", "bias")}
    error = max(float(np.abs(client_result.values[k] - reference[k]).max()) for k in reference)
    out("\nThe aggregate:")
    out(f"  contributors: {len(contributors)} of {n} clients")
    out(f"  bias sum (secure):    {np.array2string(client_result.values['bias'][:5], precision=5)}")
    out(f"  bias sum (plaintext): {np.array2string(reference['bias'][:5], precision=5)}")
    out(f"  max |secure - plaintext| over all {config.size + 10} values = {error:.2e} (stated bound {client_result.error_bound:.2e})")
    checks.append(("aggregate equals the plaintext sum within the stated bound", error <= client_result.error_bound + 1e-12))
    traffic = session.runner.traffic
    up = np.median(list(traffic.up.values()))
    out(f"  round time {seconds:.2f} s; per client: {_human(up)} up ({up / (4 * (config.size + 10)):.2f}x float32), "
        f"{_human(np.median(list(traffic.down.values())))} down")
    out("")
    for name, ok in checks:
        out(f"  [{'PASS' if ok else 'FAIL'}] {name}")
    return all(ok for _, ok in checks)
