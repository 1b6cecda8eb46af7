"""The excerpt of an HTTP error answer kept with a failure: one line, bounded, no credentials."""

from __future__ import annotations

import pytest

from relayd.sinks.base import Permanent, Retry
from relayd.sinks.webhook.http_excerpt import MAX_CHARS, body_excerpt
from relayd.sinks.webhook.http_policy import classify_status


@pytest.mark.parametrize(
    ("body", "excerpt"),
    [
        (b"", ""),
        (b'{"error": "missing field order_id"}\n', '{"error": "missing field order_id"}'),
        (b"line one\r\n\tline two", "line one line two"),
        (
            b'{"api_key": "sk-live-1", "token":"abc", "password=hunter2"}',
            '{"api_key": "***", "token":"***", "password=***"}',
        ),
        (b"Authorization: Bearer eyJhbGciOi.x.y failed", "Authorization: *** *** failed"),
        (b"see https://user:pw@hooks.example/x", "see https://***@hooks.example/x"),
        (b"\xff\xfe bad bytes", "\ufffd\ufffd bad bytes"),
    ],
    ids=["empty", "json", "whitespace", "secret-fields", "bearer", "url-user-info", "invalid-utf8"],
)
def test_body_excerpt(body: bytes, excerpt: str) -> None:
    assert body_excerpt(body) == excerpt


def test_a_long_body_is_cut_and_a_huge_one_is_read_only_at_its_start() -> None:
    excerpt = body_excerpt(b"x" * 10_000_000)

    assert len(excerpt) == MAX_CHARS
    assert excerpt.endswith("…")


def test_a_failure_keeps_its_status_and_the_excerpt() -> None:
    assert classify_status(422, None, 0.0, b'{"error":"bad"}') == Permanent('http 422: {"error":"bad"}')
    assert classify_status(503, None, 0.0, b"") == Retry(error="http 503")
