"""``relayd demo --console``: the console on the demo's embedded Redis has dead letters to show."""

from __future__ import annotations

import time

import httpx
import pytest
from support.console import launch_console

#: What the demo seeds or provokes, as the dead-letter page shows it.
EXPECTED_REASONS = ("bad_json", "missing_field", "bad_member", "webhook answered 410 Gone for order-13")


@pytest.mark.slow
def test_the_demo_console_shows_malformed_entries_and_a_failing_target() -> None:
    running = launch_console(
        ["demo", "--console", "--duration", "3", "--console-addr", "127.0.0.1:0"], token_line=True
    )
    token = running.lines[-1].rsplit(" ", 1)[-1]
    try:
        with httpx.Client(
            base_url=running.url, timeout=30, headers={"Authorization": f"Bearer {token}"}
        ) as client:
            deadline = time.monotonic() + 60  # bounds a hang only: the relay parks them within a pass
            while True:
                page = client.get("/dead-letters?prefix=demo").text
                if all(reason in page for reason in EXPECTED_REASONS) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            anonymous = httpx.get(running.url + "/", timeout=30)
    finally:
        code = running.stop()

    assert [reason for reason in EXPECTED_REASONS if reason not in page] == []
    assert anonymous.status_code == 401  # actions are on, so the generated token guards every page
    assert code == 0
