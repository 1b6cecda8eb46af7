"""The one client TLS context: always verified, the CA bundle replacing or joining the system store."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest
from support.tls import make_pki

from relayd.errors import ConfigError
from relayd.security.tls import WatchedCaContext, verified_context


def _subjects(context: ssl.SSLContext) -> list[str]:
    return [str(cert["subject"]) for cert in context.get_ca_certs()]


@pytest.mark.parametrize("given", ["file", "pem"])
def test_a_ca_bundle_replaces_the_system_store_and_the_server_is_always_verified(
    tmp_path: Path, given: str
) -> None:
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))
    if given == "file":
        context = verified_context(ca_file=str(pki.ca_cert))
    else:
        context = verified_context(ca_pem=pki.ca_cert.read_bytes())

    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert len(context.get_ca_certs()) == 1
    assert "relayd test CA" in _subjects(context)[0]


def test_a_bundle_that_joins_the_system_store_is_trusted_beside_it(tmp_path: Path) -> None:
    pki = make_pki(tmp_path, now=dt.datetime.now(dt.UTC))

    context = verified_context(ca_pem=pki.ca_cert.read_bytes(), trust_only_ca=False)

    assert any("relayd test CA" in subject for subject in _subjects(context))
    assert context.verify_mode is ssl.CERT_REQUIRED


def test_a_bundle_without_a_certificate_is_refused() -> None:
    with pytest.raises(ssl.SSLError):
        verified_context(ca_pem=b"not a certificate")


class _Bundle:
    """A watched CA file's content, set by the test."""

    def __init__(self, value: bytes) -> None:
        self.value = value


def test_a_watched_ca_makes_a_new_context_when_it_changes_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = make_pki(tmp_path / "first", now=dt.datetime.now(dt.UTC)).ca_cert.read_bytes()
    second = make_pki(tmp_path / "second", now=dt.datetime.now(dt.UTC)).ca_cert.read_bytes()
    bundle = _Bundle(b"not a certificate")
    watched = WatchedCaContext(bundle, None, option="--x-ca-file")
    with pytest.raises(ConfigError, match="--x-ca-file holds no usable CA"):
        watched.current()

    bundle.value = first
    made = watched.current()
    same = watched.current()
    bundle.value = b"not a certificate either"
    kept = watched.current()
    bundle.value = second
    renewed = watched.current()

    assert same is made
    assert kept is made
    assert renewed is not made
    serials = [[cert["serialNumber"] for cert in c.get_ca_certs()] for c in (made, renewed)]
    assert serials[0] != serials[1]  # the second CA, not the first again
