"""The overview of nine prefixes in headless Chromium: a summary table, the one prefix nothing
relays first (in the table and among the cards) though it is configured last; the selector
narrows the page to one prefix. The page is screenshotted (``overview-nine.png``)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from support.browser import Browser
from support.console import ConsoleProcess, start_console
from support.redis_server import RedisServer

from store import Keyspace

pytestmark = pytest.mark.slow


def _order(driver, selector: str) -> list[str]:
    script = "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.dataset.prefix);"
    return list(driver.execute_script(script, selector))


def test_nine_prefixes_show_the_unhealthy_one_first_and_the_selector_narrows(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:6]
    prefixes = [f"tenant{i}-{run}" for i in range(9)]
    client = redis_server.client()
    for prefix in prefixes:  # each in use (an engine's counter): no "holds nothing" hint
        client.set(Keyspace(prefix).outbox_seq, 0)
    for prefix in prefixes[:-1]:  # a relay holds every lease but the last prefix's
        client.set(Keyspace(prefix).relay("lease"), f"relay-host/{100 + len(prefix)}/token", px=600_000)
    orphan = prefixes[-1]
    screenshots = Path(os.environ.get("RELAYD_CONSOLE_SCREENSHOTS") or tmp_path)
    console: ConsoleProcess | None = None
    browser: Browser | None = None
    try:
        console = start_console(redis_server.url, prefixes)
        browser = Browser()
        driver = browser.driver
        driver.set_window_size(1280, 1000)
        driver.get(f"{console.url}/")
        rows, cards = _order(driver, "tr.summary"), _order(driver, "section.prefix-card")
        unhealthy = _order(driver, "tr.summary.unhealthy")
        driver.save_screenshot(str(screenshots / "overview-nine.png"))
        print(f"console screenshot: {screenshots / 'overview-nine.png'}")
        driver.get(f"{console.url}/?prefix={prefixes[3]}")
        narrowed = _order(driver, "section.prefix-card")
    finally:
        if browser is not None:
            browser.quit()
        if console is not None:
            console.stop()
        for prefix in prefixes:
            client.delete(Keyspace(prefix).relay("lease"), Keyspace(prefix).outbox_seq)
        client.close()

    assert rows == [orphan, *prefixes[:-1]]
    assert cards == [orphan, *prefixes[:-1]]
    assert unhealthy == [orphan]
    assert narrowed == [prefixes[3]]
