"""A fuzzing campaign against a real server process with honest client processes running.

One campaign is one fedavg-vector run (mask backend, the secure defaults) of ``honest`` clients
hosted by a real client process and ``fuzzers`` clients hosted here by the fuzzer. Before its
fuzz identities join, the fuzzer opens stream after stream and sends what tests/fuzzing/grammar.py
makes instead of a Hello (generated Envelopes of every message type, byte-level mutations of a
Hello, raw bytes), connects with certificates of another CA and with a certificate of the run's
CA for a client outside the run, and opens second streams under a joined identity. In the run,
each fuzz identity answers honestly (a real client host computes its answers) until its
scheduled request, where it sends in place of its answer a structural mutation (wrong session,
replay of its own earlier answer, stage skip, another sender or message type, a wrong shape,
truncation, a generated Envelope, or a frame over the size limit), or after its answer an extra
one (a duplicate, an answer to a step not yet asked, a generated Envelope).

Every probe has an expected outcome, and the campaign counts what happened:
- before joining: refused with a status code (or by the TLS handshake);
- in the run: the sender is dropped at that step (or, for extra messages, at the next one);
  the server accepting anything the oracle (``grammar.is_other_answer``) calls invalid, or a
  probe left unanswered, is a failure.
The same run is then made without the fuzzer: each fuzz identity leaves (closes its stream) at
the step where its message got it dropped. The honest clients must end with the same model
(``model_sha256``), the same clients per round and the same dropped clients, and the server
must finish both runs (a crash is a failure).
"""

from __future__ import annotations

import functools
import json
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from secure_fedgraph import __version__
from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
from secure_fedgraph.crypto.pki import KeyDirectory, init_keys
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.core.messages import Hello, SessionRequest, Welcome
from secure_fedgraph.protocol.transports.batch import Frame
from secure_fedgraph.protocol.transports.grpc_client import ClientStream
from secure_fedgraph.protocol.transports.grpc_service import channel_options
from secure_fedgraph.runs.launch import LocalRun, start_server
from tests.fuzzing import grammar
from tests.helpers.grpc import mtls_channel

MAX_MESSAGE_BYTES = 2**20  # the server's --max-message-mb 1: an oversized frame stays cheap
REPLACE = (*grammar.STRUCTURAL, "replay", "generated", "oversized")
EXTRA = ("duplicate", "early", "generated extra")


@dataclass(frozen=True)
class Attack:
    """What fuzz identity ``client`` does in the run: at its ``at``-th request (1 is the
    Welcome), ``kind`` (a REPLACE kind: instead of its answer; an EXTRA kind: after it)."""

    client: int
    at: int
    kind: str


@dataclass(frozen=True)
class CampaignConfig:
    honest: int = 10
    fuzzers: int = 4
    hello_probes: int = 200  # junk first messages, spread over the fuzz identities
    tls_probes: int = 10  # connections with certificates of another CA
    rounds: int = 2
    length: int = 1000
    seed: int = 0
    kinds: tuple[str, ...] = ()  # the fuzz identities' attacks in turn (default: drawn from REPLACE + EXTRA)

    @property
    def clients(self) -> int:
        return self.honest + self.fuzzers


@dataclass
class CampaignResult:
    counts: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    fuzzed: dict[str, Any] = field(default_factory=dict)  # the server's metrics, with the fuzzer
    baseline: dict[str, Any] = field(default_factory=dict)  # ... and without it
    dropped_at: dict[int, int] = field(default_factory=dict)  # fuzz identity -> request index it was dropped at

    def same_result(self) -> bool:
        keys = ("model_sha256",)
        return (all(self.fuzzed.get(k) == self.baseline.get(k) for k in keys)
                and [r["clients"] for r in self.fuzzed["rounds"]] == [r["clients"] for r in self.baseline["rounds"]]
                and set(self.fuzzed["dropped"]) == set(self.baseline["dropped"]))


def schedule(config: CampaignConfig) -> list[Attack]:
    """One attack per fuzz identity, drawn from the campaign's seed."""
    rng = random.Random(config.seed)
    last = 7 * config.rounds  # a fedavg-vector round asks each client at least seven times (key set-up, broadcast, sum)
    kinds = config.kinds or tuple(rng.choice(REPLACE + EXTRA) for _ in range(config.fuzzers))
    return [Attack(client, rng.randint(1, last), kinds[i % len(kinds)]) for i, client in enumerate(range(config.honest, config.clients))]


class FuzzIdentity:
    """One fuzz identity: a channel with its certificate and a real client host for its answers."""

    def __init__(self, client: int, run: LocalRun, keys: KeyDirectory, result: CampaignResult, lock: threading.Lock) -> None:
        self.client, self.run, self.keys, self.result, self.lock = client, run, keys, result, lock
        # the fuzzer may send more than the server accepts (oversized frames), and hears everything
        options = channel_options(MAX_MESSAGE_BYTES) + [("grpc.max_send_message_length", 4 * MAX_MESSAGE_BYTES)]
        self.channel = mtls_channel(run.address, keys, client, options=options)

    def count(self, outcome: str) -> None:
        with self.lock:
            self.result.counts[outcome] += 1

    def fail(self, what: str) -> None:
        with self.lock:
            self.result.failures.append(f"client {self.client}: {what}")

    # --- before joining ----------------------------------------------------------------------
    def probe_hello(self, first: bytes) -> None:
        """Send ``first`` as a stream's first message; the server must refuse the stream."""
        raw = len(first) % 2 == 0  # half as the stream's first message itself, half as the body of a frame for this client
        if not (grammar.is_other_hello_batch(first, self.client) if raw else grammar.is_other_hello(first, self.client)):
            return  # a valid Hello would join: the oracle keeps it out of the junk
        stream = ClientStream(self.channel, timeout_s=30)
        if raw:
            stream.send(first)
        else:
            stream.send_frames([Frame(self.client, first)])
        try:
            next(iter(stream))
        except grpc.RpcError as exc:
            self.count(f"refused before joining: {exc.code().name}")
        except StopIteration:
            self.fail(f"a stream opened with {len(first)} junk bytes ended without a status")
        else:
            self.fail(f"the server answered a stream whose first message was junk ({len(first)} bytes)")
        finally:
            stream.close()
            stream.cancel()

    # --- in the run ----------------------------------------------------------------------------
    def play(self, attack: Attack, *, baseline: bool, dropped_at: int | None = None) -> None:
        """Join, answer honestly, and at the scheduled request attack (or, in the baseline run,
        leave at the request where the attack got this identity dropped)."""
        stream = ClientStream(self.channel, timeout_s=300)
        stream.hello([self.client], __version__)
        requests = (f.body for frames in stream.batches() for f in frames if f.client == self.client and not f.left)
        answers: list[bytes] = []
        host, index, pending_leave = None, 0, None
        if baseline:
            pending_leave = dropped_at
        try:
            for data in requests:
                index += 1
                if baseline and pending_leave is not None and index >= pending_leave:
                    return  # leave: the stream closes in finally
                if not baseline and pending_leave is not None and index >= pending_leave:
                    self.count(f"dropped at the next step after: {attack.kind}")
                    self.result.dropped_at[self.client] = index
                    return
                request = codec.decode(data)
                if isinstance(request, Welcome):
                    opening, build, _ = _welcome(self.client, request, ClientOptions(server="", ids=[self.client], keys=self.keys.root),
                                                 self.keys, _Shared(self.keys.ca.read_bytes()), None)
                    honest = codec.encode(opening.joined(request))
                    self.second_stream()
                elif isinstance(request, SessionRequest):
                    host = build(opening.agree(request))
                    honest = codec.encode(opening.ack(request))
                else:
                    honest = codec.encode(host.handle(request))
                if baseline or index != attack.at:
                    self.send(stream, honest)
                    answers.append(honest)
                    self.count("honest answer")
                    continue
                stage = request.header.stage.value
                if attack.kind in EXTRA:
                    self.send(stream, honest)
                    self.send(stream, self.extra(attack.kind, honest, request))
                    pending_leave = index + 1
                    continue
                bad = self.replacement(attack.kind, honest, answers)
                self.send(stream, bad)
                self.expect_dropped(requests, f"{attack.kind} at {stage}", index)
                return
        except grpc.RpcError as exc:
            if not baseline and pending_leave is not None:  # the extra message got it dropped at the next step
                self.count(f"dropped at the next step after: {attack.kind}")
                self.result.dropped_at[self.client] = index + 1
            elif not (exc.code() == grpc.StatusCode.CANCELLED and baseline):
                self.fail(f"the stream failed: {exc.code().name}: {exc.details()}")
        finally:
            stream.close()
            stream.cancel()

    def send(self, stream: ClientStream, body: bytes) -> None:
        """One answer (or attack) as this identity's frame; an oversized one goes as one batch."""
        stream.send_frames([Frame(self.client, body)])

    def expect_dropped(self, requests, what: str, index: int) -> None:
        """After an invalid answer the server must drop this identity, not ask it anything more."""
        try:
            next(requests)
        except grpc.RpcError as exc:
            code = exc.code().name
            self.count(f"rejected in the run ({code}): {what.split(' at ')[0]}")
            self.result.dropped_at[self.client] = index
            return
        except StopIteration:
            self.fail(f"{what}: the stream ended without a status")
            return
        self.fail(f"{what}: the server ACCEPTED it and sent the next request")

    def replacement(self, kind: str, honest: bytes, answers: list[bytes]) -> bytes:
        rng = random.Random(f"{self.client}/{kind}")
        if kind == "oversized":
            return bytes(MAX_MESSAGE_BYTES + 1)
        if kind == "replay":
            earlier = [a for a in answers if grammar.is_other_answer(a, honest)]
            return earlier[-1] if earlier else grammar.stage_skip(honest, rng)
        if kind == "generated":
            candidates = grammar.sample(grammar.envelopes(), 20, seed_value=self.client)
            return next((c for c in candidates if grammar.is_other_answer(c, honest)), grammar.truncated(honest, rng))
        for _ in range(20):
            bad = grammar.STRUCTURAL[kind](honest, rng)
            if grammar.is_other_answer(bad, honest):
                return bad
        return b"\xff" + honest  # never parses

    def extra(self, kind: str, honest: bytes, request) -> bytes:
        if kind == "duplicate":
            return honest
        if kind == "early":
            return grammar._with_header(honest, lambda h: setattr(h, "step", h.step + 1))
        return grammar.sample(grammar.envelopes(), 1, seed_value=self.client)[0]

    def second_stream(self) -> None:
        """While joined, a second stream under the same certificate must be refused."""
        stream = ClientStream(self.channel, timeout_s=30)
        stream.hello([self.client], __version__)
        try:
            next(iter(stream))
        except grpc.RpcError as exc:
            self.count(f"refused before joining: {exc.code().name}")
        else:
            self.fail("a second stream under a joined certificate was served")
        finally:
            stream.close()
            stream.cancel()


def probe_foreign_certificates(run: LocalRun, work: Path, probes: int, result: CampaignResult, lock: threading.Lock,
                               outsider: tuple[KeyDirectory, int]) -> None:
    """Connections the server must refuse: certificates of another CA (the TLS handshake fails)
    and the run's CA's certificate for a client outside the run (refused before it is read)."""
    other = KeyDirectory(init_keys(work / "other-ca", clients=1).root)
    for i in range(probes):
        keys, client = (other, 0) if i % 2 == 0 else outsider
        with mtls_channel(run.address, keys, client, ca=outsider[0]) as channel:
            stream = ClientStream(channel, timeout_s=30)
            stream.hello([client], __version__)
            try:
                next(iter(stream))
            except grpc.RpcError as exc:
                label = "another CA" if keys is other else "outside the run"
                with lock:
                    result.counts[f"refused at connection ({label}): {exc.code().name}"] += 1
            else:
                with lock:
                    result.failures.append(f"a connection with a certificate {'of another CA' if keys is other else 'outside the run'} was served")
            finally:
                stream.close()


def run_campaign(config: CampaignConfig, work: Path, *, say=print) -> CampaignResult:
    """The run with the fuzzer, then the same run without it; see the module docstring."""
    work.mkdir(parents=True, exist_ok=True)
    keys = KeyDirectory(init_keys(work / "keys", clients=config.clients + 1).root)  # + 1: a certificate outside the run
    result = CampaignResult()
    lock = threading.Lock()
    attacks = schedule(config)
    hello = codec.encode(Hello(config.honest, __version__))
    junk = grammar.sample(grammar.junk(hello), config.hello_probes, seed_value=config.seed)

    # 1. the fuzzed run
    started = time.monotonic()

    def fuzzers(run: LocalRun) -> list[Callable[[], None]]:
        identities = [FuzzIdentity(a.client, run, keys, result, lock) for a in attacks]

        def fuzz(identity: FuzzIdentity, attack: Attack, mine: list[bytes]) -> None:
            for first in mine:
                identity.probe_hello(first)
            identity.play(attack, baseline=False)

        tasks = [functools.partial(fuzz, identity, attack, junk[i :: len(identities)]) for i, (identity, attack) in enumerate(zip(identities, attacks, strict=True))]
        return [*tasks, functools.partial(probe_foreign_certificates, run, work, config.tls_probes, result, lock, (keys, config.clients))]

    result.fuzzed = _run(work / "fuzzed", keys, config, fuzzers, result, "with the fuzzer")
    say(f"fuzz: campaign {config.seed}: {sum(result.counts.values())} messages in {time.monotonic() - started:.0f} s; the same run without the fuzzer")

    # 2. the same run without the fuzzer: each fuzz identity leaves where its attack got it dropped
    def leavers(run: LocalRun) -> list[Callable[[], None]]:
        return [functools.partial(FuzzIdentity(a.client, run, keys, CampaignResult(), lock).play, a, baseline=True, dropped_at=result.dropped_at.get(a.client))
                for a in attacks]

    result.baseline = _run(work / "baseline", keys, config, leavers, result, "without the fuzzer")
    if result.fuzzed and result.baseline and not result.same_result():
        result.failures.append(f"the honest clients' result differs: with the fuzzer {_summary(result.fuzzed)}, without {_summary(result.baseline)}")
    return result


def _run(work: Path, keys: KeyDirectory, config: CampaignConfig, tasks: Callable[[LocalRun], list[Callable[[], None]]],
         result: CampaignResult, which: str) -> dict[str, Any]:
    """One run: a server process, the honest client process, and ``tasks(run)`` in threads
    beside them; returns the server's metrics ({} if it failed, with the failure noted)."""
    run = _server(work, keys, config)
    try:
        honest = run.client(f"0-{config.honest - 1}")
        threads = [threading.Thread(target=task) for task in tasks(run)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return _finish(run, honest, result, which)
    finally:
        run.stop(grace_s=1.0)


def _server(work: Path, keys: KeyDirectory, config: CampaignConfig) -> LocalRun:
    args = ["--plan", "fedavg-vector", "--clients", str(config.clients), "--set", f"length={config.length}", "--set", f"rounds={config.rounds}",
            "--set", f"seed={config.seed}", "--max-message-mb", str(MAX_MESSAGE_BYTES / 2**20), "--join-timeout", "600", "--step-timeout", "60"]
    return start_server(work, *args, certs=keys.root)


def _finish(run: LocalRun, honest: subprocess.Popen, result: CampaignResult, which: str) -> dict[str, Any]:
    try:
        run.wait(timeout=600)
    except Exception as exc:  # noqa: BLE001 a server that crashed or failed is what the campaign reports
        result.failures.append(f"the server failed {which}: {exc}")
        return {}
    output = honest.communicate(timeout=120)[0]
    if honest.returncode != 0:
        result.failures.append(f"the honest clients failed {which}: {output.strip().splitlines()[-3:]}")
    return json.loads((run.out / "metrics.json").read_text())


def _summary(metrics: dict[str, Any]) -> str:
    return json.dumps({"model": metrics.get("model_sha256", "")[:12], "clients": [r["clients"] for r in metrics.get("rounds", [])],
                       "dropped": sorted(metrics.get("dropped", {}))})


def run_campaigns(configs: list[CampaignConfig], work: Path, *, say=print) -> CampaignResult:
    """Several campaigns; their counts and failures added up."""
    total = CampaignResult()
    started = time.monotonic()
    for config in configs:
        result = run_campaign(config, work / f"campaign-{config.seed}", say=say)
        total.counts.update(result.counts)
        total.failures += [f"campaign {config.seed}: {f}" for f in result.failures]
        say(f"fuzz: campaign {config.seed} done: {sum(result.counts.values())} messages, {len(result.failures)} failures "
            f"({time.monotonic() - started:.0f} s so far)")
    return total
