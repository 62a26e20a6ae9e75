"""A client process: hosts one or many logical clients, each on its own mutually authenticated
stream to the server, each with its own identity key, secure-sum role, plan and data.

Per logical client: connect with its TLS certificate; send Hello; on Welcome, check the run's
configuration against this process's own security policy (ClientPolicy: the backends, the
streaming variant, the survivor floor, the least DP noise on uploaded activations; the
thresholds and graph are checked again at every key set-up) and every participant's
certificate against the CA, then build the client's host; answer each request in order until
the run ends or the stream does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import torch

from secure_fedgraph import __version__
from secure_fedgraph.crypto.pki import KeyDirectory, client_of, load_identity
from secure_fedgraph.errors import ConfigError, ProtocolError, SecureFedGraphError
from secure_fedgraph.papers import plan_class
from secure_fedgraph.protocol import codec
from secure_fedgraph.protocol.engine import ClientContext, ClientHost
from secure_fedgraph.protocol.messages import Ack, Header, Hello, UploadResponse, Welcome, named
from secure_fedgraph.protocol.secure_sum.config import config_from_dict
from secure_fedgraph.protocol.secure_sum.factory import make_client
from secure_fedgraph.protocol.secure_sum.policy import ClientPolicy
from secure_fedgraph.protocol.transcript import AUDIT, RECEIVED, SENT, TranscriptWriter
from secure_fedgraph.protocol.transports.grpc import ClientStream, channel_options, describe_rpc_error


@dataclass(frozen=True)
class ClientOptions:
    """Options of ``secure-fedgraph client`` (see its --help)."""

    server: str
    ids: Sequence[int]
    keys: Path
    data_dir: Path | None = None
    policy: ClientPolicy = field(default_factory=ClientPolicy)  # this process's own security minimums (M-POLICY)
    transcript_dir: Path | None = None
    audit: bool = False
    server_name: str = "localhost"
    session_timeout_s: float = 24 * 3600.0
    max_message_bytes: int = 256 * 2**20
    parallel: int = 2  # hosted clients that may handle a request at the same time (bounds memory)


@dataclass
class ClientOutcome:
    client: int
    finished: bool = False
    error: str = ""
    steps: int = 0


@dataclass
class _Shared:
    """What the logical clients of one process share: the CA and their outcomes."""

    ca: bytes
    working: threading.BoundedSemaphore
    outcomes: dict[int, ClientOutcome] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    verified: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)  # certificate -> (id, identity key)

    def check_certificate(self, pem: bytes) -> tuple[int, bytes]:
        """Verify a certificate against the CA once per process (every hosted client needs them all)."""
        with self.lock:
            found = self.verified.get(pem)
        if found is None:
            found = client_of(pem, self.ca)
            with self.lock:
                self.verified[pem] = found
        return found


def parse_ids(text: str) -> list[int]:
    """'A-B' (inclusive), 'A,B,C' or a mix: '0-9,12'."""
    ids: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    except ValueError:
        raise ConfigError(f"--ids must look like 0-9 or 0,3,5-7, got {text!r}") from None
    if not ids or len(set(ids)) != len(ids) or min(ids) < 0:
        raise ConfigError(f"--ids must name distinct non-negative ids, got {text!r}")
    return ids


def run_clients(options: ClientOptions, *, say: Callable[[str], None] = print) -> dict[int, ClientOutcome]:
    """Run every hosted logical client to the end of the run; returns each one's outcome."""
    keys = KeyDirectory(options.keys)
    keys.require(keys.ca, *(p for c in options.ids for p in (keys.client_cert(c), keys.client_key(c), keys.identity_key(c))))
    torch.set_num_threads(1)  # many logical clients per process; and the same numbers in every process
    if options.parallel < 1:
        raise ConfigError(f"--parallel must be at least 1, got {options.parallel}")
    shared = _Shared(keys.ca.read_bytes(), threading.BoundedSemaphore(options.parallel))
    threads = [threading.Thread(target=_run_one, args=(c, options, keys, shared, say), name=f"client-{c}") for c in options.ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return shared.outcomes


def _run_one(client: int, options: ClientOptions, keys: KeyDirectory, shared: _Shared, say) -> None:
    outcome = ClientOutcome(client)
    with shared.lock:
        shared.outcomes[client] = outcome
    transcript = TranscriptWriter(options.transcript_dir / f"client-{client}.bin") if options.transcript_dir else None
    credentials = grpc.ssl_channel_credentials(
        root_certificates=shared.ca, private_key=keys.client_key(client).read_bytes(), certificate_chain=keys.client_cert(client).read_bytes()
    )
    opts = channel_options(options.max_message_bytes) + [("grpc.ssl_target_name_override", options.server_name)]
    host: ClientHost | None = None
    try:
        with grpc.secure_channel(options.server, credentials, options=opts) as channel:
            stream = ClientStream(channel, timeout_s=options.session_timeout_s)
            stream.send(codec.encode(Hello(client, __version__)))
            try:
                for data in stream:
                    if transcript is not None:
                        transcript.record(RECEIVED, -1, data, at=time.time())  # before the bytes are decoded and dropped
                    with shared.working:  # many hosted clients, a few at work: memory stays bounded
                        request = codec.decode(data)
                        del data
                        if isinstance(request, Welcome):
                            host = _welcome(client, request, options, keys, shared, transcript)
                            response = Ack(Header(request.header.session, request.header.round, request.header.step, request.header.stage, client))
                        elif host is None:
                            raise ProtocolError(f"client {client}: a request arrived before the Welcome")
                        else:
                            response = host.handle(request)
                        reply = codec.encode(response)
                        del request, response
                    if transcript is not None:
                        transcript.record(SENT, -1, reply, at=time.time())
                    stream.send(reply)
                    outcome.steps += 1
                    if host is not None and host.ended:
                        outcome.finished = True  # keep reading: the server ends the stream once it has every Ack
            finally:
                stream.close()
    except grpc.RpcError as exc:
        outcome.error = describe_rpc_error(exc)
    except SecureFedGraphError as exc:
        outcome.error = str(exc)
    finally:
        if transcript is not None:
            transcript.close()
    if outcome.error:
        say(f"client {client}: {outcome.error}")


def _welcome(client: int, welcome: Welcome, options: ClientOptions, keys: KeyDirectory, shared: _Shared, transcript) -> ClientHost:
    """Check the run against this process's policy and the CA; build the logical client."""
    config = json.loads(welcome.config_json)
    secure = config_from_dict(config["secure_sum"])
    plan = plan_class(config["plan"]["plan"]).from_config_json(json.dumps(config["plan"]))
    try:
        options.policy.check_run(secure, n_run=len(welcome.participants), uploads_activations=plan.uploads_activations, dp_sigma=plan.dp_sigma)
    except ProtocolError as exc:
        raise ConfigError(f"client {client}: {exc}") from None
    if len(welcome.participants) != len(welcome.certificates) or client not in welcome.participants:
        raise ProtocolError(f"client {client}: the Welcome's participants and certificates do not match")
    directory = {}
    for listed, pem in zip(welcome.participants, welcome.certificates, strict=True):
        cert_client, identity = shared.check_certificate(pem)  # the CA vouches for every identity key
        if cert_client != listed:
            raise ProtocolError(f"client {client}: the certificate listed for client {listed} is client {cert_client}'s")
        directory[listed] = identity
    identity = load_identity(keys.identity_key(client))
    role = make_client(secure, client_id=client, session=welcome.header.session, identity=identity, directory=directory, policy=options.policy)
    data = plan.load_client_data(client, options.data_dir)
    host = ClientHost(role=role, plan=plan.client, context=ClientContext(client, plan.seed, data))
    if options.audit and transcript is not None:
        def record(header: Header, name: str, tensors) -> None:  # this client's own input, on its own disk
            transcript.record(AUDIT, client, codec.encode(UploadResponse(header, name, named(tensors))), at=time.time())

        host.on_contribute = record
    return host
