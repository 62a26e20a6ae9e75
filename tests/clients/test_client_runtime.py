"""The client runtime (clients/runtime.py): what a client process checks in a server's Welcome
(every relayed certificate signed by the run's CA, threat_model.md R-PKI; a resumed run only
where the process holds state of it, R-RESUME). How it connects is the transport's:
tests/protocol/transports/test_grpc_client.py."""

from __future__ import annotations

import json

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
