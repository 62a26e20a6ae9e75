"""The client runtime (clients/runtime.py): what a client process checks in a server's Welcome
(every relayed certificate signed by the run's CA, threat_model.md R-PKI; a resumed run only
where the process holds state of it, R-RESUME), and how it connects (turned away at the
server's stream limit, it tries again and joins, R-STREAMS)."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.secure_sum import Backend, SecureSumConfig
from secure_fedgraph.protocol.transports import codec
from secure_fedgraph.protocol.transports.batch import Frame
from secure_fedgraph.protocol.transports.grpc import ClientStream
from tests.helpers import defence_stops
from tests.helpers.grpc import mtls_channel, transport_server

MASK = SecureSumConfig(backend=Backend.MASK)


def test_attack_a_welcome_relaying_a_certificate_of_another_ca(monkeypatch, tmp_path):
    """The server relays, for client 1, a certificate its own CA issued: the identity key in it
    is the server's, which could then sign as client 1 (consistency signatures, adverts). Every
    certificate in a Welcome must be signed by the run's CA."""
    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.crypto import pki
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.protocol.core.messages import SERVER, Header, Welcome
    from secure_fedgraph.protocol.secure_sum.config import config_to_dict

    keys, other = pki.init_keys(tmp_path / "run", clients=3), pki.init_keys(tmp_path / "attacker", clients=3)
    config = json.dumps({"plan": json.loads(FedAvgVector().config_json()), "secure_sum": config_to_dict(MASK)})
    certs = (keys.client_cert(0).read_bytes(), other.client_cert(1).read_bytes(), keys.client_cert(2).read_bytes())
    welcome = Welcome(Header(bytes(16), -1, 1, Stage.WELCOME, SERVER), config, (0, 1, 2), certs)
    attacker_key = pki.load_identity(other.identity_key(1)).public_bytes

    def attack() -> bool:
        shared = _Shared(keys.ca.read_bytes())
        _, build, _ = _welcome(0, welcome, ClientOptions(server="x", ids=[0], keys=keys.root), keys, shared, None)
        return build(bytes(16)).role.directory[1] == attacker_key

    defence_stops(attack, monkeypatch, pki, "verify_issuer", lambda cert, ca: None)


def test_a_client_process_rejoins_only_the_run_it_holds_state_of(tmp_path):
    """A resumed Welcome reaching a client process that holds nothing of the run (it restarted,
    or never took part) is refused, and so is a new run reaching one that is in a run."""
    import dataclasses

    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.errors import ConfigError, ProtocolError
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.protocol.core.messages import SERVER, Header, Welcome
    from secure_fedgraph.server.runtime import run_config

    keys = init_keys(tmp_path / "keys", clients=3)
    run = run_config(FedAvgVector(), SecureSumConfig(backend=Backend.MASK))
    certs = tuple(keys.client_cert(c).read_bytes() for c in range(3))
    fresh = Welcome(Header(bytes(16), -1, 1, Stage.WELCOME, SERVER), json.dumps(run), (0, 1, 2), certs)
    resumed = dataclasses.replace(fresh, config_json=json.dumps({**run, "resume": {"round": 0}}))
    options, shared = ClientOptions(server="x", ids=[0], keys=keys.root), _Shared(keys.ca.read_bytes())
    with pytest.raises(ConfigError, match="resumes a run at round 0 that this client process holds nothing of"):
        _welcome(0, resumed, options, keys, shared, None)
    _, build, memory = _welcome(0, fresh, options, keys, shared, None)
    host = build(bytes(16))
    assert memory.rounds == [0] and host.context.resumed is None  # the plan, started, kept its state as round 0 began
    with pytest.raises(ProtocolError, match="the server started a new run, but this client is in a run the server left"):
        _welcome(0, fresh, options, keys, shared, None, memory)
    _, build, same = _welcome(0, resumed, options, keys, shared, None, memory)
    again = build(bytes(16))
    assert same is memory and again.context.resumed.round == 0 and again.role.n_run == 3


def test_attack_a_client_turned_away_at_the_stream_limit_tries_again_and_joins(monkeypatch, tmp_path):
    """The server runs one stream at once (the runtime's n + 8, made small), and client 0 holds
    it, silent, when client 1's process connects: gRPC turns client 1 away with
    RESOURCE_EXHAUSTED ("Concurrent RPC limit exceeded!"). Client 1 tries again with the backoff
    and within the --connect-timeout it uses while nobody listens (UNAVAILABLE), and joins once
    the server cuts client 0 at its --hello-timeout (R-STREAMS). Giving up on RESOURCE_EXHAUSTED
    at once, client 1 is kept out of the run."""
    from secure_fedgraph.clients import runtime as client_runtime
    from secure_fedgraph.clients.runtime import ClientOptions, _connect, _Shared, _Waiting
    from secure_fedgraph.protocol.core.messages import SERVER, Ack, EndRequest, Header
    from secure_fedgraph.protocol.core.steps import Step

    keys = init_keys(tmp_path / "keys", clients=2)
    options = ClientOptions(server="", ids=[1], keys=keys.root, connect_timeout_s=30.0)
    waiting = _Waiting(options.connect_timeout_s, "--connect-timeout", "waited {s:g} s for the server", ("connect",), "waiting")

    def attack() -> bool:
        with transport_server(keys, step_timeout_s=10, hello_timeout_s=2.0, streams=1) as (transport, port), \
                mtls_channel(f"127.0.0.1:{port}", keys, 0) as holder_channel, mtls_channel(f"127.0.0.1:{port}", keys, 1) as channel:
            holder = ClientStream(holder_channel, timeout_s=30)  # says nothing: holds the one stream until --hello-timeout
            deadline = time.monotonic() + 10
            while 0 not in transport.streams:
                assert time.monotonic() < deadline, "the holder's stream never reached the server"
                time.sleep(0.01)
            turned_away: list[grpc.RpcError] = []

            def join() -> None:
                try:
                    stream, _ = _connect([1], channel, options, _Shared(keys.ca.read_bytes()), lambda line: None, waiting)
                except grpc.RpcError as exc:
                    turned_away.append(exc)
                    return
                stream.send_frames([Frame(1, codec.encode(Ack(Header(bytes(16), 0, 1, Stage.END, 1))))])  # answers the request it joined on

            thread = threading.Thread(target=join, daemon=True)
            thread.start()
            deadline = time.monotonic() + 20
            while 1 not in transport.connections and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            joined = transport.wait_for_clients(0.0)
            outcome = transport.execute(Step(Stage.END, {1: EndRequest(Header(bytes(16), 0, 1, Stage.END, SERVER), "x")}, lambda c, r: None)) \
                if joined else None
            thread.join(10)
            holder.cancel()
        if turned_away:
            assert turned_away[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED, turned_away
        return outcome is None or 1 not in outcome.accepted

    def gives_up_on_resource_exhausted(exc: grpc.RpcError) -> bool:
        return exc.code() == grpc.StatusCode.UNAVAILABLE and not any(w in (exc.details() or "").lower() for w in ("ssl_error", "certificate", "tsi_", "alert"))

    codes: list[grpc.StatusCode] = []  # what client 1 was told before it joined (with the defence on)
    retries = client_runtime._server_not_up
    monkeypatch.setattr(client_runtime, "_server_not_up", lambda exc: (codes.append(exc.code()), retries(exc))[1])
    defence_stops(attack, monkeypatch, client_runtime, "_server_not_up", gives_up_on_resource_exhausted)
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes, codes  # it was turned away, and tried again
