"""The run's PKI: what a client accepts as a participant's identity."""

from __future__ import annotations

import dataclasses
import json

import pytest

from secure_fedgraph.crypto.pki import client_of, init_keys, load_identity
from secure_fedgraph.errors import ConfigError


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    return init_keys(tmp_path_factory.mktemp("a"), clients=3), init_keys(tmp_path_factory.mktemp("b"), clients=3)


def test_a_certificate_binds_the_id_and_the_identity_key(two_runs):
    keys, _ = two_runs
    for client in range(3):
        cert_client, identity = client_of(keys.client_cert(client).read_bytes(), keys.ca.read_bytes())
        assert cert_client == client
        assert identity == load_identity(keys.identity_key(client)).public_bytes


def test_certificates_of_another_ca_are_refused(two_runs):
    keys, other = two_runs
    with pytest.raises(ConfigError, match="not signed by the run's CA"):
        client_of(other.client_cert(0).read_bytes(), keys.ca.read_bytes())


def test_the_server_certificate_is_not_a_client_certificate(two_runs):
    keys, _ = two_runs
    with pytest.raises(ConfigError, match="not a secure_fedgraph client certificate"):
        client_of(keys.server_cert.read_bytes(), keys.ca.read_bytes())


def test_malformed_certificates_are_refused(two_runs):
    keys, _ = two_runs
    with pytest.raises(ConfigError, match="malformed certificate"):
        client_of(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", keys.ca.read_bytes())


def test_a_client_refuses_a_welcome_with_a_swapped_certificate(two_runs):
    """The server relays the participants' certificates; one from another CA (carrying an
    identity key the server controls) makes the client refuse the run."""
    from secure_fedgraph.clients.runtime import ClientOptions, _Shared, _welcome
    from secure_fedgraph.papers import FedAvgVector
    from secure_fedgraph.protocol.core.messages import SERVER, Header, Welcome
    from secure_fedgraph.protocol.sum_backends import SecureSumConfig
    from secure_fedgraph.protocol.sum_backends.config import config_to_dict
    from secure_fedgraph.protocol.core.stages import Stage

    keys, other = two_runs
    config = json.dumps({"plan": json.loads(FedAvgVector().config_json()), "secure_sum": config_to_dict(SecureSumConfig())})
    certs = [keys.client_cert(c).read_bytes() for c in range(3)]
    welcome = Welcome(Header(bytes(16), -1, 1, Stage.WELCOME, SERVER), config, (0, 1, 2), tuple(certs))
    options = ClientOptions(server="x", ids=[0], keys=keys.root)
    shared = lambda: _Shared(keys.ca.read_bytes())  # noqa: E731
    _, build, _ = _welcome(0, welcome, options, keys, shared(), None)
    assert build(bytes(16)).client_id == 0
    swapped = dataclasses.replace(welcome, certificates=(certs[0], other.client_cert(1).read_bytes(), certs[2]))
    with pytest.raises(ConfigError, match="not signed by the run's CA"):
        _welcome(0, swapped, options, keys, shared(), None)


def test_a_host_certificate_names_its_clients_and_is_no_participant_certificate(tmp_path):
    """threat_model.md R-HOST: `keys host` issues a certificate naming exactly the given ids (SAN
    URIs), signed by the run's CA, with no identity key: the server cannot relay it as a
    participant's certificate (a client refuses it), so it adds no identity to the run."""
    from secure_fedgraph.crypto.pki import host_ids, issue_host

    keys = init_keys(tmp_path / "k", clients=5, hosts={"0-2": [0, 1, 2]})
    assert host_ids(keys.host_cert("0-2").read_bytes()) == {0, 1, 2}
    path = issue_host(keys.root, label="3-4", ids=[3, 4])
    assert path == keys.host_cert("3-4") and host_ids(path.read_bytes()) == {3, 4}
    assert oct(keys.host_key("3-4").stat().st_mode & 0o777) == "0o600"
    for label in ("0-2", "3-4"):
        with pytest.raises(ConfigError, match="does not name exactly one client id and identity key|not a secure_fedgraph client certificate"):
            client_of(keys.host_cert(label).read_bytes(), keys.ca.read_bytes())
    with pytest.raises(ConfigError, match="a host certificate names 1 to"):
        issue_host(keys.root, label="none", ids=[])
    # ids as runs: a certificate for 2,708 clients stays small (gRPC's TLS refuses client certificates of 8 to 64 KB)
    big = issue_host(keys.root, label="0-2707", ids=range(2708))
    assert host_ids(big.read_bytes()) == set(range(2708)) and len(big.read_bytes()) < 1500
