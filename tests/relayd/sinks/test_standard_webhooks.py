"""Standard Webhooks signing, checked against the spec's own example and the reference libraries."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest
import standardwebhooks
import svix.webhooks

from relayd.config.settings import load_settings
from relayd.sinks.webhook import standard_webhooks as sw
from relayd.sinks.webhook.http_policy import signature_headers
from relayd.sinks.webhook.options import WebhookOptions

#: The example of the Standard Webhooks specification (and of svix's documentation).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specification_example_signs_to_its_published_signature() -> None:
    key = sw.decode_secret(SPEC_SECRET)

    signature = sw.sign(key, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)

    assert signature == SPEC_SIGNATURE


def test_headers_with_two_keys_verify_with_either_secret_in_both_libraries() -> None:
    """Rotation with an overlap: a receiver that knows only one of the two secrets accepts."""
    old, new = (f"whsec_{base64.b64encode(raw).decode()}" for raw in (b"o" * 32, b"n" * 32))
    timestamp_s = int(time.time())
    body = b'{"id":"p:outbox:1"}'

    sent = sw.headers((sw.decode_secret(old), sw.decode_secret(new)), "p:outbox:1", timestamp_s, body)

    assert sent["webhook-id"] == "p:outbox:1"
    assert len(sent["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        standardwebhooks.Webhook(secret).verify(body, sent)
        svix.webhooks.Webhook(secret).verify(body, sent)
    with pytest.raises(svix.webhooks.WebhookVerificationError):
        svix.webhooks.Webhook(f"whsec_{base64.b64encode(b'x' * 32).decode()}").verify(body, sent)


def test_without_a_key_the_id_and_timestamp_are_still_sent_but_no_signature() -> None:
    assert signature_headers("standard", (), "i", 7, b"{}") == {"webhook-id": "i", "webhook-timestamp": "7"}
    assert signature_headers("relayd", (), "i", 7, b"{}") == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("hunter2", "secret 1 is not a 'whsec_<base64>' secret"),
        ("whsec_aGk=\nwhsec_hunter2!", "secret 2 holds a 'whsec_' secret that is not valid base64"),
        ("whsec_", "secret 1 holds an empty 'whsec_' secret"),
        ("\n \n", "is empty"),
    ],
    ids=["raw", "not-base64", "empty-key", "no-secret"],
)
def test_a_secret_file_that_is_not_whsec_lines_is_refused_without_showing_the_secret(
    text: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=r".") as caught:
        sw.parse_secret_lines(text)

    assert problem == str(caught.value)
    assert "hunter2" not in str(caught.value)


def test_unpadded_base64_is_accepted_as_the_libraries_accept_it() -> None:
    assert sw.decode_secret("whsec_aGk") == b"hi"


def test_settings_give_the_sink_decoded_keys_under_standard_and_raw_lines_under_relayd(
    tmp_path: Path,
) -> None:
    standard_file, relayd_file = tmp_path / "standard", tmp_path / "relayd"
    standard_file.write_text("whsec_aGk=\nwhsec_b2s=\n")
    relayd_file.write_text("plain-1\nplain-2\n")

    standard = load_settings(webhook_secret_file=standard_file).own_options(WebhookOptions)
    relayd = load_settings(webhook_secret_file=relayd_file, webhook_signature="relayd").own_options(
        WebhookOptions
    )

    assert standard.secrets is not None
    assert relayd.secrets is not None
    assert (standard.signature, standard.secrets.value) == ("standard", (b"hi", b"ok"))
    assert (relayd.signature, relayd.secrets.value) == ("relayd", (b"plain-1", b"plain-2"))


def test_the_format_batch_and_cloudevents_options_reach_the_sinks() -> None:
    settings = load_settings(
        format="cloudevents",
        cloudevents_mode="structured",
        cloudevents_source="urn:x:{prefix}",
        webhook_batch=50,
    )
    options = settings.sink_options()

    assert (options.output_format, options.cloudevents_mode) == ("cloudevents", "structured")
    assert (options.cloudevents_source, settings.own_options(WebhookOptions).batch) == ("urn:x:{prefix}", 50)
    defaults = load_settings()
    assert (defaults.sink_options().output_format, defaults.own_options(WebhookOptions).batch) == (
        "relayd",
        1,
    )
