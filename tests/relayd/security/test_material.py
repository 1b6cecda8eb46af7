"""Watched secret and certificate files: what is read, stripped, reloaded, refused and reported."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry
from support.secret_files import MODES, Mode, SecretDir
from support.tls import old_and_new_pki
from typer.testing import CliRunner

from relayd.cli.app import app
from relayd.config.settings import load_settings
from relayd.observability.health import Health
from relayd.observability.logs import Redactor
from relayd.security.material import WatchedFile, pem_file, secret_file, secret_lines_file
from relayd.security.redis_tls import RedisTls
from relayd.security.secret import secret_lines, strip_secret
from relayd.security.watch import MaterialWatch
from relayd.sinks.webhook.http_policy import sign, sign_all, verify
from relayd.sinks.webhook.options import WebhookOptions


@pytest.mark.parametrize(
    ("text", "value"),
    [("pw\n", "pw"), ("pw\r\n", "pw"), ("  pw \t\n\n", "pw"), ("p w\n", "p w"), ("\n", "")],
)
def test_a_secret_is_its_text_without_surrounding_whitespace(text: str, value: str) -> None:
    assert strip_secret(text) == value


def test_a_multi_secret_file_is_one_secret_a_line_blank_lines_skipped() -> None:
    assert secret_lines("old \r\n\n  new\n") == ("old", "new")


@pytest.mark.parametrize("mode", MODES)
def test_a_rewrite_or_a_data_flip_is_reloaded_and_counted_once(tmp_path: Path, mode: Mode) -> None:
    files = SecretDir(tmp_path / "s", mode)
    files.write({"password": "one\n"})
    watched = secret_file("--redis-password-file", files.path("password"))
    registry = CollectorRegistry()
    watch = MaterialWatch([watched], registry=registry)
    heard: list[str] = []
    watch.on_reload(lambda: heard.append(watched.value))

    watch.check_now()
    files.write({"password": "two\n"})
    watch.check_now()
    watch.check_now()

    assert watched.value == "two"
    assert heard == ["two"]
    labels = {"option": "--redis-password-file", "outcome": "reloaded"}
    assert registry.get_sample_value("relayd_secret_reloads_total", labels) == 1.0
    assert watched.generation == 1


@pytest.mark.parametrize("mode", MODES)
def test_an_unreadable_then_empty_file_keeps_the_old_value_and_names_the_file(
    tmp_path: Path, mode: Mode
) -> None:
    files = SecretDir(tmp_path / "s", mode)
    files.write({"password": "one\n"})
    path = files.path("password")
    watched = secret_file("--redis-password-file", path)
    registry = CollectorRegistry()
    watch = MaterialWatch([watched], registry=registry)
    health = Health()
    health.redis_ok()
    health.watch_material(watch.problems)

    files.break_file("password")
    watch.check_now()
    unreadable = health.ready()
    files.write({"password": "  \n"})
    watch.check_now()
    empty = health.ready()
    files.write({"password": "one\n"})
    watch.check_now()
    restored = health.ready()

    assert watched.value == "one"
    assert watched.generation == 0  # never replaced
    assert unreadable.status == 503
    assert "--redis-password-file" in unreadable.reason
    assert f"cannot read {str(path)!r}" in unreadable.reason
    assert f"{str(path)!r} is empty" in empty.reason
    assert (restored.status, restored.reason) == (200, "ok")
    refused = {"option": "--redis-password-file", "outcome": "refused"}
    assert registry.get_sample_value("relayd_secret_reloads_total", refused) == 2.0


def test_a_file_bad_at_start_is_an_error_naming_the_option_not_the_content(tmp_path: Path) -> None:
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "dir").mkdir()

    with pytest.raises(ValueError, match=r"--webhook-secret-file: .* is empty"):
        secret_lines_file("--webhook-secret-file", tmp_path / "empty")
    with pytest.raises(ValueError, match=r"--redis-ca-file: cannot read .*: it is a directory"):
        pem_file("--redis-ca-file", tmp_path / "dir")


def test_a_refused_problem_is_reported_once_until_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("t\n")
    watched: WatchedFile[str] = secret_file("--console-token-file", path)
    path.write_text("")

    outcomes = [watched.check(), watched.check()]

    assert outcomes == ["refused", "unchanged"]


def test_the_watch_task_rereads_on_its_interval_until_stopped(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text("one")
    watched = secret_file("--amqp-password-file", path)
    watch = MaterialWatch([watched])

    async def scenario() -> str:
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop, interval_s=0.01))
        path.write_text("two")
        for _ in range(2000):
            if watched.value == "two":
                break
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.wait_for(task, 5)
        return watched.value

    assert asyncio.run(scenario()) == "two"


def test_the_log_redactor_learns_rotated_values() -> None:
    redactor = Redactor(["old"])
    redactor.learn(["new-secret"])

    assert redactor.text("old and new-secret") == "*** and ***"


def test_every_secret_signs_and_a_receiver_with_either_one_verifies() -> None:
    header = sign_all((b"old", b"new"), 1700000000, b"{}")

    assert header == f"{sign(b'old', 1700000000, b'{}')} {sign(b'new', 1700000000, b'{}')}"
    assert verify(b"old", "1700000000", b"{}", header)
    assert verify(b"new", "1700000000", b"{}", header)
    assert not verify(b"other", "1700000000", b"{}", header)


def test_the_redis_tls_context_is_rebuilt_from_new_files_and_kept_when_they_do_not_load(
    tmp_path: Path,
) -> None:
    old, new = old_and_new_pki(tmp_path)
    files = SecretDir(tmp_path / "tls", "kubelet")
    files.write(
        {
            "ca": old.ca_cert.read_bytes(),
            "crt": old.client_cert.read_bytes(),
            "key": old.client_key.read_bytes(),
        }
    )
    ca, crt, key = (pem_file(f"--{n}", files.path(n)) for n in ("ca", "crt", "key"))
    watch = MaterialWatch([ca, crt, key])
    tls = RedisTls(ca=ca, cert=crt, key=key, trust_only_ca=True, refresh=watch.check_now)
    first = tls.context()

    files.write({"crt": new.client_cert.read_bytes()})  # the certificate without its key: refused
    mismatched = tls.context()
    problem = tls.problem
    files.write({"ca": new.ca_cert.read_bytes(), "key": new.client_key.read_bytes()})
    rotated = tls.context()

    assert tls.context() is rotated  # built once per change
    assert mismatched is first
    assert problem is not None
    assert "previous stays in use" in problem
    assert tls.problem is None
    assert rotated is not first
    assert rotated.verify_mode == ssl.CERT_REQUIRED
    assert rotated.check_hostname
    trusted = [int(c["serialNumber"], 16) for c in rotated.get_ca_certs()]
    assert trusted == [x509.load_pem_x509_certificate(new.ca_cert.read_bytes()).serial_number]


def test_the_webhook_key_is_each_line_without_surrounding_whitespace(tmp_path: Path) -> None:
    secret = tmp_path / "signing"
    secret.write_text("  s3cret \t\r\n\n second\n")
    standard = tmp_path / "standard"
    standard.write_text("  whsec_czNjcmV0 \t\r\n\n whsec_c2Vjb25k\n")

    options = load_settings(
        sink="webhook:http://127.0.0.1:1/h", webhook_secret_file=secret, webhook_signature="relayd"
    ).own_options(WebhookOptions)
    keys = load_settings(sink="webhook:http://127.0.0.1:1/h", webhook_secret_file=standard).own_options(
        WebhookOptions
    )

    assert options.secrets is not None
    assert options.secrets.value == (b"s3cret", b"second")
    assert keys.secrets is not None
    assert keys.secrets.value == (b"s3cret", b"second")


def test_the_help_says_what_a_secret_file_loses_and_that_it_is_re_read() -> None:
    wide = {"COLUMNS": "400", "TERMINAL_WIDTH": "400"}  # rich (Typer's help) reads the width from these
    shown = CliRunner().invoke(app, ["sweep", "--help"], env=wide).output

    for option in ("--webhook-secret-file", "--redis-password-file", "--amqp-password-file"):
        (line,) = [line for line in shown.splitlines() if option in line]
        assert "surrounding whitespace stripped" in line
        assert "re-read when it changes" in line
