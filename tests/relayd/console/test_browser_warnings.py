"""The overview's warnings in headless Chromium, following a real relay live: an overdue timer
and no relay warn; a ``relayd sweep`` that takes the lease and delivers clears both; the relay
SIGKILLed, its lease runs out and the page warns again, without a reload (server-sent events)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import Browser
from support.console import ConsoleProcess, console_env, start_console
from support.processes import end_process
from support.redis_server import RedisServer

from store import Event, Execution, RedisStore, TimerOp

pytestmark = pytest.mark.slow

#: Generous bounds that only catch a hang.
WAIT_S = 60.0


def visible_warnings(driver: WebDriver, prefix: str) -> list[str]:
    """The warnings shown on the prefix's card, read in one script call (the stream replaces it)."""
    script = (
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".filter(e => e.offsetParent !== null).map(e => e.textContent.trim());"
    )
    return list(driver.execute_script(script, f'[data-prefix="{prefix}"] [data-warning]'))


def test_the_overview_warns_live_when_nothing_relays_or_timers_are_late(
    redis_server: RedisServer, prefix: str, tmp_path: Path
) -> None:
    client = redis_server.client()
    store = RedisStore(client, prefix=prefix)
    late = TimerOp(action="schedule", path="wait", fire_at=time.time() - 600)
    store.commit(
        Execution(id="exe-1", definition_id="warn.flow"),
        [("t", Event(id="e", kind="k", data={}))],
        timers=[late],
    )
    console: ConsoleProcess | None = None
    browser: Browser | None = None
    relay: subprocess.Popen[bytes] | None = None
    try:
        console = start_console(redis_server.url, [prefix])
        browser = Browser()
        driver = browser.driver
        driver.get(f"{console.url}/?prefix={prefix}")
        unattended = visible_warnings(driver, prefix)

        relay = subprocess.Popen(
            [sys.executable, "-m", "relayd", "sweep", "--redis-url", redis_server.url, "--prefix", prefix,
             "--sink", "null", "--lease-ttl", "1", "--metrics-addr", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=console_env(),
        )  # fmt: skip
        WebDriverWait(driver, WAIT_S).until(lambda d: visible_warnings(d, prefix) == [])
        end_process(relay, signal.SIGKILL)
        WebDriverWait(driver, WAIT_S).until(lambda d: visible_warnings(d, prefix) != [])
        orphaned = visible_warnings(driver, prefix)
    finally:
        end_process(relay, signal.SIGKILL)
        if browser is not None:
            browser.quit()
        if console is not None:
            console.stop()
        client.close()

    assert len(unattended) == 2, unattended
    assert unattended[0] == "no relay holds the lease: nothing is delivering this prefix"
    assert unattended[1].startswith("timers overdue: 1 due, the oldest ")
    assert orphaned == ["no relay holds the lease: nothing is delivering this prefix"]
