"""The run's PKI, made with ``cryptography``'s x509: a CA, a server certificate, and per client a
TLS certificate and an Ed25519 identity key.

Each client certificate names the client (CN ``client-<id>``, SAN URI
``urn:secure-fedgraph:client:<id>``) and carries the client's Ed25519 identity public key in an
extension, so the CA binds both the TLS identity and the protocol identity to the id. The
server relays the participants' certificates to every client, which checks each one against
the CA before trusting its identity key: a server that swaps an identity key is caught
(threat_model.md R-PKI). TLS keys are ECDSA P-256 (what every TLS stack accepts).

A host certificate (CN ``host <ids>``, one SAN URI ``urn:secure-fedgraph:clients:<lo>-<hi>`` per
contiguous run of its ids, no identity key) lets one
client process speak for every client it names on one connection (threat_model.md R-HOST); each
of those clients still signs with its own identity key, whose certificate the Welcome relays.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from secure_fedgraph.crypto.keys import IdentityKey
from secure_fedgraph.errors import ConfigError
from secure_fedgraph.identity_uris import URI_PREFIX, range_uris, uri_ranges

# A UUID-derived OID (the 2.25 arc needs no registration) for the Ed25519 identity extension.
IDENTITY_OID = x509.ObjectIdentifier("2.25.181402545102683785924541733412287367529")
VALIDITY_DAYS = 30


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "secure_fedgraph run"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _write(path: Path, data: bytes, *, secret: bool) -> None:
    path.write_bytes(data)
    if secret:
        os.chmod(path, 0o600)


@dataclass(frozen=True)
class KeyDirectory:
    """Paths of a directory made by :func:`init_keys`."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def server_cert(self) -> Path:
        return self.root / "server.pem"

    @property
    def server_key(self) -> Path:
        return self.root / "server.key"

    def client_cert(self, client: int) -> Path:
        return self.root / "clients" / f"client-{client}.pem"

    def client_key(self, client: int) -> Path:
        return self.root / "clients" / f"client-{client}.key"

    def identity_key(self, client: int) -> Path:
        return self.root / "clients" / f"client-{client}.identity"

    def host_cert(self, label: str) -> Path:
        """The host certificate of the clients ``label`` names ("0-249": ``--ids`` as written)."""
        return self.root / "hosts" / f"host-{label}.pem"

    def host_key(self, label: str) -> Path:
        return self.root / "hosts" / f"host-{label}.key"

    def require(self, *paths: Path) -> None:
        for path in paths:
            if not path.is_file():
                raise ConfigError(f"missing {path}: make the run's keys with `secure-fedgraph keys init {self.root} --clients N`")


@dataclass(frozen=True)
class _Issuer:
    """The CA's key and certificate, and the validity window of what it issues now."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def issue(self, subject: str, public_key, extensions) -> x509.Certificate:
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (
            x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(self.cert.subject).public_key(public_key)
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + datetime.timedelta(days=VALIDITY_DAYS), self.cert.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(self.key, hashes.SHA256())


def init_keys(root: str | os.PathLike, *, clients: int, server_names: tuple[str, ...] = ("localhost",), server_ips: tuple[str, ...] = ("127.0.0.1",),
              hosts: Mapping[str, Sequence[int]] | None = None) -> KeyDirectory:
    """Make a CA, a server certificate, and a certificate plus identity key per client; and a
    host certificate per entry of ``hosts`` (label -> the client ids it names).

    Private keys are written with mode 0600. The CA key is kept (``ca.key``) so more
    certificates can be issued; keep it off the hosts that run the protocol.
    """
    if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
        raise ConfigError(f"--clients must be a positive int, got {clients!r}")
    keys = KeyDirectory(Path(root))
    (keys.root / "clients").mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("secure_fedgraph CA")).issuer_name(_name("secure_fedgraph CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    _write(keys.root / "ca.key", _pem_key(ca_key), secret=True)
    _write(keys.ca, ca_cert.public_bytes(serialization.Encoding.PEM), secret=False)
    issuer = _Issuer(ca_key, ca_cert)
    server_key = ec.generate_private_key(ec.SECP256R1())
    alt = [x509.DNSName(n) for n in server_names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in server_ips]
    server_cert = issuer.issue("secure_fedgraph server", server_key.public_key(),
                               [(x509.SubjectAlternativeName(alt), False), (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)])
    _write(keys.server_key, _pem_key(server_key), secret=True)
    _write(keys.server_cert, server_cert.public_bytes(serialization.Encoding.PEM), secret=False)
    for client in range(clients):
        tls_key = ec.generate_private_key(ec.SECP256R1())
        identity = IdentityKey.generate()
        cert = issuer.issue(f"client-{client}", tls_key.public_key(), [
            (x509.SubjectAlternativeName([x509.UniformResourceIdentifier(f"{URI_PREFIX}{client}")]), False),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
            (x509.UnrecognizedExtension(IDENTITY_OID, identity.public_bytes), False),
        ])
        _write(keys.client_key(client), _pem_key(tls_key), secret=True)
        _write(keys.client_cert(client), cert.public_bytes(serialization.Encoding.PEM), secret=False)
        _write(keys.identity_key(client), identity.private_bytes(), secret=True)
    for label, ids in (hosts or {}).items():
        _issue_host(keys, issuer, label, ids)
    return keys


# A host certificate names its clients as ranges (secure_fedgraph/identity_uris.py), so it stays small
# whatever it hosts. Measured over gRPC's TLS: a client certificate above about 8 KB (one URI per id,
# from about 260 ids) fails the handshake (SSL_ERROR_WANT_WRITE in the server's TLS layer) up to
# about 64 KB, where it passes again.
MAX_HOST_RANGES = 64  # contiguous runs of ids in one host certificate (about 40 bytes each)


def id_runs(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted ids as contiguous runs (lo, hi), inclusive."""
    runs: list[tuple[int, int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def issue_host(root: str | os.PathLike, *, label: str, ids: Sequence[int]) -> Path:
    """Issue a host certificate for ``ids`` with the CA key in ``root`` (``keys host``); returns its path.

    Raises:
        ConfigError: no ``ca.key`` there, or an empty or too long list of ids.
    """
    keys = KeyDirectory(Path(root))
    keys.require(keys.ca, keys.root / "ca.key")
    ca_key = serialization.load_pem_private_key((keys.root / "ca.key").read_bytes(), password=None)
    issuer = _Issuer(ca_key, x509.load_pem_x509_certificate(keys.ca.read_bytes()))
    return _issue_host(keys, issuer, label, ids)


def _issue_host(keys: KeyDirectory, issuer: _Issuer, label: str, ids: Sequence[int]) -> Path:
    runs = id_runs(ids)
    if not runs or len(runs) > MAX_HOST_RANGES or runs[0][0] < 0:
        raise ConfigError(f"a host certificate names 1 to {MAX_HOST_RANGES} ranges of non-negative client ids, got {len(runs)} for {label!r}; "
                          "host contiguous ids in each process")
    keys.host_cert(label).parent.mkdir(parents=True, exist_ok=True)
    tls_key = ec.generate_private_key(ec.SECP256R1())
    uris = [x509.UniformResourceIdentifier(uri) for uri in range_uris(runs)]
    cert = issuer.issue(f"host {label}", tls_key.public_key(), [(x509.SubjectAlternativeName(uris), False),
                                                                (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)])
    _write(keys.host_key(label), _pem_key(tls_key), secret=True)
    _write(keys.host_cert(label), cert.public_bytes(serialization.Encoding.PEM), secret=False)
    return keys.host_cert(label)


def host_ids(cert_pem: bytes) -> frozenset[int]:
    """The client ids a certificate names (its SAN URIs, single ids and ranges): what a stream
    holding it may speak for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset(c for lo, hi in uri_ranges(uris) for c in range(lo, hi + 1))


def verify_issuer(cert: x509.Certificate, ca: x509.Certificate) -> None:
    """The run's CA signed ``cert`` (threat_model.md R-PKI): only then does its id-to-key binding count."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise ConfigError(f"certificate {cert.subject.rfc4514_string()} is not signed by the run's CA") from None


def client_of(cert_pem: bytes, ca_pem: bytes) -> tuple[int, bytes]:
    """Check a client certificate against the CA; return (client id, Ed25519 identity key).

    Raises:
        ConfigError: not signed by the CA, expired, not a client certificate, or malformed.
    """
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
    except ValueError as exc:
        raise ConfigError(f"malformed certificate: {exc}") from None
    verify_issuer(cert, ca)
    now = datetime.datetime.now(datetime.timezone.utc)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise ConfigError(f"certificate {cert.subject.rfc4514_string()} is not valid now")
    try:
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.UniformResourceIdentifier)
        identity = cert.extensions.get_extension_for_oid(IDENTITY_OID).value.value
    except x509.ExtensionNotFound as exc:
        raise ConfigError(f"certificate {cert.subject.rfc4514_string()} is not a secure_fedgraph client certificate ({exc})") from None
    ids = [u[len(URI_PREFIX):] for u in uris if u.startswith(URI_PREFIX)]
    if len(ids) != 1 or not ids[0].isdigit() or len(identity) != 32:
        raise ConfigError(f"certificate {cert.subject.rfc4514_string()} does not name exactly one client id and identity key")
    return int(ids[0]), identity


def load_identity(path: Path) -> IdentityKey:
    data = path.read_bytes()
    if len(data) != 32:
        raise ConfigError(f"{path} is not a 32-byte Ed25519 identity key")
    return IdentityKey.from_private_bytes(data)
