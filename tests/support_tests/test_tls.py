"""The TLS harness: a verified connection works with the right CA and fails with the wrong one."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import pytest
import redis
from cryptography import x509
from redis.backoff import NoBackoff
from redis.retry import Retry
from support.tls import TlsRedisServer, make_pki

NOW = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_server_certificate_names_the_loopback_ip_and_localhost(tmp_path: Path) -> None:
    """The server certificate carries SAN IP 127.0.0.1 and DNS localhost, signed by the CA."""
    pki = make_pki(tmp_path, now=NOW)

    cert = x509.load_pem_x509_certificate(pki.server_cert.read_bytes())
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value

    assert [ipaddress.ip_address("127.0.0.1")] == sans.get_values_for_type(x509.IPAddress)
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert ca.subject == cert.issuer
    cert.verify_directly_issued_by(ca)
    assert cert.not_valid_before_utc < NOW < cert.not_valid_after_utc


def test_wrong_ca_is_unrelated_to_the_server_certificate(tmp_path: Path) -> None:
    """The wrong CA did not sign the server certificate, so verification against it must fail."""
    pki = make_pki(tmp_path, now=NOW)

    cert = x509.load_pem_x509_certificate(pki.server_cert.read_bytes())
    wrong = x509.load_pem_x509_certificate(pki.wrong_ca_cert.read_bytes())

    with pytest.raises((ValueError, TypeError)):
        cert.verify_directly_issued_by(wrong)
    assert pki.server_key.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_verified_tls_with_the_right_ca_connects(tls_redis_server: TlsRedisServer, host: str) -> None:
    """redis-py verifies the chain and the host name (IP or DNS SAN) and talks to the server."""
    client = redis.Redis(
        host=host,
        port=tls_redis_server.tls_port,
        ssl=True,
        ssl_ca_certs=str(tls_redis_server.ca_path),
        ssl_cert_reqs="required",
        ssl_check_hostname=True,
    )

    try:
        client.set("tls-probe", "1")
        assert client.get("tls-probe") == b"1"
    finally:
        client.close()


def test_verified_tls_via_the_rediss_url(tls_redis_server: TlsRedisServer) -> None:
    """The fixture's ``rediss://`` URL plus the CA file is all a client needs."""
    client = redis.Redis.from_url(tls_redis_server.url, ssl_ca_certs=str(tls_redis_server.ca_path))

    try:
        assert client.ping()
    finally:
        client.close()


def test_wrong_ca_fails_certificate_verification(tls_redis_server: TlsRedisServer) -> None:
    """A client trusting only the unrelated CA refuses the server: certificate verify failed."""
    client = redis.Redis.from_url(
        tls_redis_server.url, ssl_ca_certs=str(tls_redis_server.wrong_ca_path), socket_timeout=2
    )

    try:
        with pytest.raises(redis.ConnectionError, match=r"(?i)certificate verify failed"):
            client.ping()
    finally:
        client.close()


def test_plaintext_to_the_tls_port_is_refused(tls_redis_server: TlsRedisServer) -> None:
    """Speaking plain RESP to the TLS port gets the connection reset, not an answer."""
    # no retries: redis-py's default backoff would only make the refusal slow
    client = redis.Redis(port=tls_redis_server.tls_port, socket_timeout=2, retry=Retry(NoBackoff(), 0))

    try:
        with pytest.raises(redis.ConnectionError, match=r"reset|closed"):
            client.ping()
    finally:
        client.close()


def test_no_plaintext_port_is_open_by_default(tls_redis_server: TlsRedisServer) -> None:
    """The fixture's server listens on TLS only (``--port 0``)."""
    assert tls_redis_server.plain_port is None


def test_mutual_tls_with_the_client_certificate(tls_redis_server: TlsRedisServer) -> None:
    """A client presenting the CA-signed client certificate is accepted (auth-clients optional)."""
    pki = tls_redis_server.pki
    client = tls_redis_server.client(ssl_certfile=str(pki.client_cert), ssl_keyfile=str(pki.client_key))

    try:
        assert client.ping()
    finally:
        client.close()
