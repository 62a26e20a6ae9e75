"""The looks behind a client's TLS set-up mistakes (protocol/transports/tls_mistakes.py), against
a real TLS server on a socket, with real certificates: what each says of a server certificate
from the run's CA, from another CA or expired, and of a server that refuses the client's
certificate or accepts it and speaks first (as gRPC sends its HTTP/2 settings). The client
processes' lines are checked end to end in tests/integration/test_grpc_runtime.py."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from secure_fedgraph.crypto.pki import VALIDITY_DAYS, KeyDirectory, init_keys
from secure_fedgraph.protocol.transports.grpc_client import Waiting, connect, secure_channel
from secure_fedgraph.protocol.transports.tls_mistakes import (TlsMistake, certificate_names, refuses_certificate, server_certificate_fails,
                                                             tls_mistake)


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> tuple[KeyDirectory, KeyDirectory]:
    """The run's keys, and another ``keys init``'s."""
    root = tmp_path_factory.mktemp("tls")
    return init_keys(root / "run", clients=1), init_keys(root / "other", clients=1)


def _expired_server_cert(keys: KeyDirectory, folder: Path) -> tuple[Path, Path]:
    """A server certificate the run's CA signed, valid until yesterday."""
    ca_key = serialization.load_pem_private_key((keys.root / "ca.key").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(keys.ca.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=10)).not_valid_after(now - datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(exist_ok=True)
    (folder / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    return folder / "server.pem", folder / "server.key"


@contextmanager
def tls_server(cert: Path, key: Path, *, client_ca: Path, hang_up: bool = False) -> Iterator[str]:
    """A TLS server on a free port that requires a client certificate from ``client_ca`` and, once
    the handshake is done, speaks first (a gRPC server sends its HTTP/2 settings) or, with
    ``hang_up``, closes without a byte (what gRPC does to a certificate it refuses); yields its
    HOST:PORT. A client certificate it refuses ends the connection with an alert."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cafile=str(client_ca))
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            with raw:
                try:
                    with context.wrap_socket(raw, server_side=True) as tls:
                        if not hang_up:
                            tls.sendall(b"\x00")
                            tls.recv(1)  # until the client hangs up
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=5)


def test_the_server_certificate_look_gives_openssls_reason_or_none(keys, tmp_path):
    run, other = keys
    with tls_server(run.server_cert, run.server_key, client_ca=run.ca) as address:
        ours = dict(ca=run.ca.read_bytes(), cert=run.client_cert(0), key=run.client_key(0))
        assert server_certificate_fails(address, **ours) is None
        assert certificate_names(address, **ours) == ["localhost", "127.0.0.1"]
        assert server_certificate_fails(address, ca=other.ca.read_bytes(), cert=other.client_cert(0), key=other.client_key(0)) in (
            "certificate signature failure", "unable to get local issuer certificate")
    cert, key = _expired_server_cert(run, tmp_path / "expired")
    with tls_server(cert, key, client_ca=run.ca) as address:
        assert server_certificate_fails(address, ca=run.ca.read_bytes(), cert=run.client_cert(0), key=run.client_key(0)) == "certificate has expired"
    assert server_certificate_fails(_nobody_listening(), ca=run.ca.read_bytes(), cert=run.client_cert(0), key=run.client_key(0)) is None


def _nobody_listening() -> str:
    """HOST:PORT of a port just closed: the looks cannot tell anything there."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        return f"127.0.0.1:{closed.getsockname()[1]}"


def test_the_refusal_look_tells_a_refused_certificate_from_an_accepted_one(keys):
    run, other = keys
    ca = run.ca.read_bytes()
    with tls_server(run.server_cert, run.server_key, client_ca=run.ca) as address:
        assert not refuses_certificate(address, ca=ca, cert=run.client_cert(0), key=run.client_key(0))  # accepted: it speaks first
        assert refuses_certificate(address, ca=ca, cert=other.client_cert(0), key=other.client_key(0))  # another CA's: an alert
        # a server certificate the client's CA did not sign is the other mistake, not a refusal
        assert not refuses_certificate(address, ca=other.ca.read_bytes(), cert=other.client_cert(0), key=other.client_key(0))
    with tls_server(run.server_cert, run.server_key, client_ca=run.ca, hang_up=True) as address:  # completes the handshake, says nothing, hangs up
        assert refuses_certificate(address, ca=ca, cert=run.client_cert(0), key=run.client_key(0), timeout_s=2)
    assert not refuses_certificate(_nobody_listening(), ca=ca, cert=run.client_cert(0), key=run.client_key(0))  # cannot tell


def test_a_connect_to_a_server_with_an_expired_certificate_stops_at_once_saying_to_issue_it_again(keys, tmp_path):
    """Through gRPC's own handshake and :func:`connect`: the failure is not waited out (the
    Waiting allows 60 s), and the line gives OpenSSL's reason and the fix for it."""
    run, _ = keys
    cert, key = _expired_server_cert(run, tmp_path / "expired")
    ca = run.ca.read_bytes()
    with tls_server(cert, key, client_ca=run.ca) as address:
        mistake = partial(tls_mistake, server=address, server_name="localhost", ca=ca, cert=run.client_cert(0), key=run.client_key(0),
                          ca_file=run.ca, validity_days=VALIDITY_DAYS)
        began = time.monotonic()
        with secure_channel(address, ca=ca, cert=run.client_cert(0).read_bytes(), key=run.client_key(0).read_bytes(),
                            server_name="localhost", max_message_bytes=2**20) as channel, pytest.raises(TlsMistake) as stopped:
            connect(channel, [0], version="test", waiting=Waiting(60.0, "--connect-timeout", "gave up", mistake=mistake), timeout_s=10,
                    max_message_bytes=2**20)
    assert time.monotonic() - began < 30
    assert str(stopped.value) == (f"the certificate of the server at {address} fails the check against the CA this client trusts "
                                  f"({run.ca}: certificate has expired): keys init certificates last 30 days: make the run's keys again and give "
                                  "every host its folder")
