"""The one client TLS context: always verified, the CA bundle replacing or joining the system store."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest
from support.tls import make_pki

from relayd.tls import verified_context


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
