"""The client runtime (clients/runtime.py): what a client process checks in a server's Welcome
(every relayed certificate signed by the run's CA, threat_model.md R-PKI; a resumed run only
where the process holds state of it, R-RESUME), and which failures of its stream it waits out
(a lost server or network) and which it does not (a refusal). How it connects is the
transport's: tests/protocol/transports/test_grpc_client.py."""

from __future__ import annotations

import json

import grpc
import pytest

from secure_fedgraph.crypto.pki import init_keys
from secure_fedgraph.protocol.core.stages import Stage
from secure_fedgraph.protocol.sum_backends import Backend, SecureSumConfig
from tests.helpers import defence_stops

MASK = SecureSumConfig(backend=Backend.MASK)


def test_attack_a_welcome_relaying_a_certificate_of_another_ca(monkeypatch, tmp_path):
    """The server relays, for client 1, a certificate its own CA issued: the identity key in it
    is the server's, which could then sign as client 1 (consistency signatures, adverts). Every
    certificate in a Welcome must be signed by the run's CA."""
    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.crypto import pki
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.protocol.core.messages import SERVER, Header, Welcome
    from secure_fedgraph.protocol.sum_backends.config import config_to_dict

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


def test_attack_a_welcome_naming_a_folder_on_the_clients_disk(monkeypatch, tmp_path):
    """The server's plan names a graph-series folder on the client's machine (another project's
    data, say): the client would train on it and the server learn its aggregates. A client reads
    a folder only when it was given one (`client --dataset`, threat_model.md R-DATASET); given
    one, it reads its own, whatever folder the server named."""
    import dataclasses

    import numpy as np

    from secure_fedgraph.clients import dataset_choice
    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.data.graph_series import GraphSeries, write_folder
    from secure_fedgraph.errors import ConfigError
    from secure_fedgraph.papers.fedavg import FedAvgGRU
    from secure_fedgraph.protocol.core.messages import SERVER, Header, Welcome
    from secure_fedgraph.server.runtime import run_config

    def series(seed: int) -> GraphSeries:
        rng = np.random.default_rng(seed)
        return GraphSeries(name="private", signals=rng.normal(50, 5, size=(2 * 288, 3, 1)), adjacency=np.eye(3, dtype=np.float32),
                           start=np.datetime64("2020-01-01T00:00", "m"), step_minutes=5, steps_per_day=288, channels=("speed",),
                           node_ids=("a", "b", "c"))

    private = write_folder(series(1), tmp_path / "someone-elses")  # on the client's disk, not the client's to share
    own = write_folder(series(2), tmp_path / "mine")
    keys = init_keys(tmp_path / "keys", clients=3)
    plan = FedAvgGRU(dataclasses.replace(FedAvgGRU.Config(), dataset=str(private), sensors=3, rounds=1))
    run = run_config(plan, SecureSumConfig(backend=Backend.MASK))
    certs = tuple(keys.client_cert(c).read_bytes() for c in range(3))
    welcome = Welcome(Header(bytes(16), -1, 1, Stage.WELCOME, SERVER), json.dumps(run), (0, 1, 2), certs)
    options = ClientOptions(server="x", ids=[0], keys=keys.root)
    private_x = plan.load_client_data(0, None).sensor("train", 0)[0]

    def attack() -> bool:
        _, _, memory = _welcome(0, welcome, options, keys, _Shared(keys.ca.read_bytes()), None)
        return np.array_equal(memory.data.sensor("train", 0)[0], private_x)  # the client's data: the folder the server named

    with pytest.raises(ConfigError, match="a client reads only a folder it was given"):
        attack()
    defence_stops(attack, monkeypatch, dataset_choice, "names_a_folder", lambda dataset: False)
    given = _Shared(keys.ca.read_bytes(), dataset=str(own))
    _, _, memory = _welcome(0, welcome, dataclasses.replace(options, dataset=str(own)), keys, given, None)
    assert not np.array_equal(memory.data.sensor("train", 0)[0], private_x)  # its own folder's windows
    with pytest.raises(ConfigError, match="this client was started with --dataset hzmetro"):  # a name must be the one it was given
        dataset_choice.own_dataset({"plan": "fedavg-gru", "config": {"dataset": "metr-la"}}, "hzmetro")


class _Failed(grpc.RpcError):
    """A stream's failure as gRPC reports it: a status code and its details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize(
    "code,details,waits",
    [
        # a host whose link went down (its kernel finds no route), mid-run and on reconnecting
        (UNAVAILABLE, "Stream removed (recvmsg:No route to host (113))", True),
        (UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.77.0.1:7443: Failed to connect to remote host: "
                      "getsockopt(SO_ERROR): No route to host", True),
        (UNAVAILABLE, "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:10.77.0.1:7443: connect: Network is unreachable (101)", True),
        (UNAVAILABLE, "keepalive watchdog timeout", True),
        # a server process that died, or is not up again yet
        (UNAVAILABLE, "Socket closed", True),
        (UNAVAILABLE, "recvmsg:Connection reset by peer", True),
        (UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7443: Failed to connect to remote host: "
                      "Connection refused", True),
        # mistakes to fix and the server's own word: never waited for
        (UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.77.0.1:7443: Custom verification check failed "
                      "with error: UNAUTHENTICATED: Hostname Verification Check failed.", False),
        (UNAVAILABLE, "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:7443: Tls handshake failed "
                      "(TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1a000064:ECDSA routines:OPENSSL_internal:BAD_SIGNATURE: certificate "
                      "signature failure", False),
        (grpc.StatusCode.FAILED_PRECONDITION, "the run started without clients 5-6", False),
        (grpc.StatusCode.CANCELLED, "dropped from the run: no answer to input within 120 s", False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max (2097160 vs. 1048576)", False),
    ],
)
def test_a_lost_server_or_network_is_waited_for_and_a_refusal_is_not(code, details, waits, tmp_path):
    """Who waits out --reconnect-timeout after a stream failed (clients/runtime.py: reconnecting).
    The client here holds no state of a round boundary (a plan that cannot resume, such as
    fedstgd, or a run still in its first round): it too waits when the link or the server is
    gone for now, instead of stopping at once on "No route to host"; then whatever it finds is
    checked as ever (a run that went on without it refuses it). With --reconnect-timeout 0,
    nobody waits."""
    from secure_fedgraph.clients.runtime import ClientOptions, ClientOutcome, _LogicalClient, reconnecting

    def client(reconnect_timeout_s: float) -> _LogicalClient:
        options = ClientOptions(server="10.77.0.1:7443", ids=[5], keys=tmp_path, reconnect_timeout_s=reconnect_timeout_s)
        return _LogicalClient(5, options, None, None, print, ClientOutcome(5), None)

    waiting = client(60.0)
    assert not waiting.may_resume  # nothing of the run kept: the old rule let only resumable clients wait
    assert reconnecting(_Failed(code, details), [waiting]) == ([waiting] if waits else [])
    assert reconnecting(_Failed(code, details), [client(0.0)]) == []
