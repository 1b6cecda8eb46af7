"""Generate a throw-away PKI and run redis-server with TLS on loopback, for the TLS tests.

``make_pki(directory, now=...)`` writes a CA, a server certificate for 127.0.0.1 and
localhost (SAN IP + DNS), a client certificate (for mutual TLS) and a second, unrelated CA
(the "wrong CA" a client must refuse the server with). Keys are EC P-256: generating them takes
milliseconds, unlike RSA.

``start_tls_redis_server(pki)`` runs ``redis-server --port 0 --tls-port P ...
--tls-auth-clients optional`` (plaintext port disabled unless asked for); the session fixture
``tls_redis_server`` yields it as a ``TlsRedisServer``. Import the fixture into a conftest
with ``from support.tls import tls_redis_server`` and list it in the conftest's ``__all__``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import random
import shutil
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from support.ports import pick_ports
from support.processes import end_process

#: How long the generated certificates stay valid around ``now``, in days.
VALIDITY_DAYS = 2


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the generated PEM files."""

    dir: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    wrong_ca_cert: Path


#: What a CA key may do: sign certificates and revocation lists, nothing else.
_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True,
    key_cert_sign=True,
    crl_sign=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    encipher_only=False,
    decipher_only=False,
)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _ca(common_name: str, now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=VALIDITY_DAYS))
        .not_valid_after(now + dt.timedelta(days=VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(
    common_name: str,
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    now: dt.datetime,
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=VALIDITY_DAYS))
        .not_valid_after(now + dt.timedelta(days=VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        sans: list[x509.GeneralName] = [
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.DNSName("localhost"),
        ]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(directory: Path, *, now: dt.datetime) -> Pki:
    """Write a CA, server and client certificates, and an unrelated CA into ``directory``."""
    pem = serialization.Encoding.PEM
    ca = _ca("relayd test CA", now)
    wrong_ca, _ = _ca("relayd unrelated CA", now)
    server_cert, server_key = _leaf("127.0.0.1", ca, now, server=True)
    client_cert, client_key = _leaf("relayd test client", ca, now, server=False)
    pki = Pki(
        dir=directory,
        ca_cert=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
        wrong_ca_cert=directory / "wrong-ca.crt",
    )
    pki.ca_cert.write_bytes(ca[0].public_bytes(pem))
    pki.wrong_ca_cert.write_bytes(wrong_ca.public_bytes(pem))
    pki.server_cert.write_bytes(server_cert.public_bytes(pem))
    pki.client_cert.write_bytes(client_cert.public_bytes(pem))
    _write_key(pki.server_key, server_key)
    _write_key(pki.client_key, client_key)
    return pki


def old_and_new_pki(directory: Path) -> tuple[Pki, Pki]:
    """Two PKIs of unrelated CAs, in ``directory``/a and /b: before and after a CA rotation."""
    now = dt.datetime.now(dt.UTC)
    (directory / "a").mkdir()
    (directory / "b").mkdir()
    return make_pki(directory / "a", now=now), make_pki(directory / "b", now=now)


@dataclass
class TlsRedisServer:
    """A redis-server answering TLS on ``tls_port`` (and plaintext on ``plain_port`` if set)."""

    pki: Pki
    tls_port: int
    plain_port: int | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.tls_port}"

    @property
    def ca_path(self) -> Path:
        return self.pki.ca_cert

    @property
    def wrong_ca_path(self) -> Path:
        return self.pki.wrong_ca_cert

    def client(self, **kwargs: object) -> redis.Redis:
        """A verified TLS client trusting the test CA (hostname checked against the SAN)."""
        options: dict[str, object] = {"ssl_ca_certs": str(self.ca_path), "socket_timeout": 2.0}
        options.update(kwargs)
        return redis.Redis.from_url(self.url, **options)

    def stop(self) -> None:
        end_process(self.proc)
        self.proc = None


def start_tls_redis_server(
    pki: Pki, *, plain_port: bool = False, timeout_s: float = 10.0, attempts: int = 3
) -> TlsRedisServer:
    """Start redis-server with TLS on a free loopback port; the caller stops it.

    A server that exits at once lost its port to a parallel test: it is retried on fresh ports.
    """
    for _ in range(attempts - 1):
        server = _start_tls_once(pki, plain_port=plain_port, timeout_s=timeout_s)
        if server is not None:
            return server
    server = _start_tls_once(pki, plain_port=plain_port, timeout_s=timeout_s)
    if server is None:
        raise RuntimeError("TLS redis-server could not bind a port")
    return server


def _start_tls_once(pki: Pki, *, plain_port: bool, timeout_s: float) -> TlsRedisServer | None:
    ports = pick_ports(2, random.Random())
    server = TlsRedisServer(pki=pki, tls_port=ports[0], plain_port=ports[1] if plain_port else None)
    argv = [
        "redis-server",
        "--port", str(server.plain_port or 0),
        "--tls-port", str(server.tls_port),
        "--bind", "127.0.0.1",
        "--tls-cert-file", str(pki.server_cert),
        "--tls-key-file", str(pki.server_key),
        "--tls-ca-cert-file", str(pki.ca_cert),
        # a client certificate is checked when presented, not required
        "--tls-auth-clients", "optional",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(pki.dir),
        "--loglevel", "warning",
    ]  # fmt: skip
    server.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return None  # exited: the port was taken between the pick and the bind
        client = server.client(socket_timeout=0.5)
        try:
            if client.info("server").get("process_id") == server.proc.pid:
                return server
        except (redis.ConnectionError, ssl.SSLError, OSError):
            time.sleep(0.02)
        finally:
            client.close()
    server.stop()
    raise RuntimeError(f"TLS redis-server did not start on port {server.tls_port}")


@pytest.fixture(scope="session")
def tls_redis_server() -> Iterator[TlsRedisServer]:
    """A TLS-only redis-server (plaintext port off) with its PKI; removed after the session."""
    directory = Path(tempfile.mkdtemp(prefix="relayd-tls-"))
    try:
        pki = make_pki(directory, now=dt.datetime.now(dt.UTC))
        server = start_tls_redis_server(pki)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
