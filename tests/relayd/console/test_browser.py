"""The console in headless Chromium against a running relay on a real redis-server.

One scenario: poison entries (a target the sink refuses, malformed entries) are dead-lettered by a
running ``relayd sweep``; the overview shows what ``relayd status --json`` says; the dead-letter
page lists the poison entries with their reasons; a replay clicked in the page puts one back and
the relay delivers it. Every page is screenshotted into a directory the test prints
(``RELAYD_CONSOLE_SCREENSHOTS`` chooses it; docs/console/ holds the README's copies).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
import redis
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import Browser
from support.console import ConsoleProcess, console_env, start_console
from support.processes import end_process
from support.redis_server import RedisServer
from support.waiting import wait_until

from relayd.state.keys import RelayKeys
from store import Event, Execution, RedisStore, TimerOp
from store.keys import Keyspace
from tests.relayd.console.parked import park_outbox

pytestmark = pytest.mark.slow

TOKEN = "browser-test-token"
POISON = ("poison-1", "poison-2")
#: Generous bounds that only catch a hang (the machine is shared; nothing here races a clock).
WAIT_S = 60.0


def commit_workload(client: redis.Redis, prefix: str) -> None:
    """Healthy and poison emits, spawns, future timers, and two malformed entries."""
    store = RedisStore(client, prefix=prefix)
    now = time.time()
    for n in range(4):
        exe = Execution(id=f"order-{n}", definition_id="console.flow")
        store.save(exe)
        emits: list[tuple[str | None, Event]] = [
            (f"order-{m}", Event(kind="Ping", data={"n": n, "m": m})) for m in range(3)
        ]
        if n < 3:
            emits.append((POISON[n % 2], Event(kind="Charge", data={"n": n})))
        timers = [TimerOp("schedule", f"reminder/{n}", now + 3600 + n)]
        store.commit(exe, emits, timers=timers, spawns=[(f"order-{n}.ship", "ship", {"n": n})])
    keyspace = Keyspace(prefix)
    seq = client.incr(keyspace.outbox_seq)
    client.hset(keyspace.outbox, str(seq), b'{"t": "order-1", "e": not json')
    client.zadd(keyspace.timers, {b"member-without-separator": now - 30})


def status_json(redis_url: str, prefix: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "relayd", "status", "--json", "--redis-url", redis_url, "--prefix", prefix],
        capture_output=True,
        text=True,
        timeout=120,
        env=console_env(),
        check=True,
    )
    [report] = orjson.loads(done.stdout)["prefixes"]
    return dict(report)


def field_text(driver: WebDriver, prefix: str, name: str) -> str:
    """One overview figure, read in one script call (the event stream may replace the element)."""
    script = "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : null;"
    return str(driver.execute_script(script, f'[data-prefix="{prefix}"] [data-field="{name}"]'))


def shoot(driver: WebDriver, directory: Path, name: str) -> None:
    driver.save_screenshot(str(directory / f"{name}.png"))


@pytest.fixture
def prefix() -> str:
    """A readable prefix (the screenshots go into the docs), unique per run."""
    return "shop" + uuid.uuid4().hex[:6]


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("RELAYD_CONSOLE_SCREENSHOTS") or tmp_path / "console-screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {directory}")
    return directory


def test_the_console_shows_the_poison_and_a_clicked_replay_is_delivered(
    redis_server: RedisServer, prefix: str, tmp_path: Path, screenshots: Path
) -> None:
    client = redis_server.client()
    keys = RelayKeys(Keyspace(prefix))
    delivered, block = tmp_path / "delivered.jsonl", tmp_path / "blocked-targets"
    block.write_text(" ".join(POISON))
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    commit_workload(client, prefix)
    sink = f"python:tests.relayd.console.gate_sink:GateSink?path={delivered}&block={block}"
    relay = subprocess.Popen(
        [sys.executable, "-m", "relayd", "sweep", "--redis-url", redis_server.url, "--prefix", prefix,
         "--sink", sink, "--poll-interval", "0.2", "--metrics-addr", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=console_env(),
    )  # fmt: skip
    console: ConsoleProcess | None = None
    browser: Browser | None = None
    try:
        # The relay parks 3 poison emits and 1 malformed outbox entry, and 1 malformed timer.
        wait_until(
            lambda: (
                client.hlen(keys.dead("outbox")) == 4
                and client.hlen(keys.dead("timer")) == 1
                and client.hlen(Keyspace(prefix).outbox) == 0
                and client.hlen(Keyspace(prefix).spawns) == 0
            ),
            WAIT_S,
            "the relay to dead-letter the poison",
        )
        console = start_console(
            redis_server.url, [prefix], "--console-token-file", str(token_file), "--allow-actions"
        )
        browser = Browser()
        driver = browser.driver
        driver.get(console.url + "/")
        shoot(driver, screenshots, "login")
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.ID, "sign-in").click()
        WebDriverWait(driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "overview"))

        the_overview_shows_what_status_says(driver, redis_server.url, prefix)
        shoot(driver, screenshots, "overview")
        the_dead_letter_page_lists_the_poison_with_reasons(driver, console.url, prefix, screenshots)
        block.write_text("")  # the poison target is healthy again
        a_replay_clicked_in_the_page_is_delivered(
            driver, console.url, prefix, screenshots, client=client, delivered=delivered
        )
        the_overview_follows_live(driver, console.url, prefix, client)

        driver.get(f"{console.url}/timers?prefix={prefix}")
        assert len(driver.find_elements(By.CSS_SELECTOR, "tr.timer")) == 4
        shoot(driver, screenshots, "timers")

        end_process(relay)  # from here on only the console reads Redis
        a_hidden_page_stops_listening(driver, console.url, prefix, client)
    finally:
        if browser is not None:
            browser.quit()
        if console is not None:
            console.stop()
        end_process(relay)
        client.close()


def the_overview_shows_what_status_says(driver: WebDriver, redis_url: str, prefix: str) -> None:
    # The relay is idle now (everything delivered or parked, the timers an hour away): the numbers
    # stand still, so the page and the CLI read the same state.
    status = status_json(redis_url, prefix)
    driver.refresh()
    backlog, dead = status["backlog"], status["dead_letters"]
    assert isinstance(backlog, dict)
    assert isinstance(dead, dict)
    for kind in ("spawn", "outbox", "timer"):
        assert field_text(driver, prefix, f"backlog.{kind}") == str(backlog[kind])
        assert field_text(driver, prefix, f"dead_letters.{kind}") == str(dead[kind])
    assert field_text(driver, prefix, "due_timers") == str(status["due_timers"])
    assert (field_text(driver, prefix, "oldest_timer_lag_s") == "-") == (status["oldest_timer_lag_s"] is None)
    active = status["active"]
    assert isinstance(active, dict)
    assert field_text(driver, prefix, "active").startswith(str(active["holder"]))
    assert backlog["timer"] == 4
    assert dead["outbox"] == 4


def the_dead_letter_page_lists_the_poison_with_reasons(
    driver: WebDriver, url: str, prefix: str, screenshots: Path
) -> None:
    driver.get(f"{url}/dead-letters?prefix={prefix}")
    rows = driver.find_elements(By.CSS_SELECTOR, "tr.dead-letter")
    reasons = {
        row.find_element(By.CSS_SELECTOR, ".reason-code").text: row.find_element(
            By.CSS_SELECTOR, ".reason"
        ).text
        for row in rows
    }
    shoot(driver, screenshots, "dead-letters")

    assert len(rows) == 5
    assert set(reasons) == {"permanent", "bad_json", "bad_member"}
    assert reasons["permanent"].startswith("webhook answered 422 for poison-")

    driver.get(f"{url}/groups?prefix={prefix}")
    groups = [row.text for row in driver.find_elements(By.CSS_SELECTOR, "tr.group")]
    shoot(driver, screenshots, "groups")
    assert any(
        "webhook answered <n> for poison-<n> (request <hex>)" in text and " 3 " in text for text in groups
    )


def a_replay_clicked_in_the_page_is_delivered(
    driver: WebDriver, url: str, prefix: str, screenshots: Path, *, client: redis.Redis, delivered: Path
) -> None:
    driver.get(f"{url}/dead-letters?prefix={prefix}&kind=outbox&target=poison-2")
    [row] = driver.find_elements(By.CSS_SELECTOR, "tr.dead-letter")
    entry_id = row.get_attribute("data-id")
    parked = client.hget(RelayKeys(Keyspace(prefix)).dead("outbox"), str(entry_id))
    event_id = orjson.loads(parked or b"{}")["envelope"]["event"]["id"]  # the same under its new seq
    row.find_element(By.TAG_NAME, "a").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "stored-value"))
    assert '"kind": "Charge"' in driver.find_element(By.ID, "envelope").text
    shoot(driver, screenshots, "dead-letter")
    driver.find_element(By.ID, "replay-one").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: d.find_elements(By.ID, "dry-run-count"))
    assert driver.find_element(By.ID, "dry-run-count").text == "1"
    assert driver.find_element(By.ID, "command").text == f"relayd dlq replay --prefix {prefix} {entry_id}"
    shoot(driver, screenshots, "replay")
    driver.find_element(By.ID, "confirm-replay").click()

    wait_until(
        lambda: delivered.exists() and str(event_id).encode() in delivered.read_bytes(),
        WAIT_S,
        "the delivery",
    )
    assert not client.hexists(RelayKeys(Keyspace(prefix)).dead("outbox"), str(entry_id))
    driver.get(f"{url}/audit?prefix={prefix}")
    [record] = driver.find_elements(By.CSS_SELECTOR, "tr.record")
    assert record.find_element(By.CSS_SELECTOR, ".action").text == "replay"
    assert record.find_element(By.CSS_SELECTOR, ".count").text == "1"
    shoot(driver, screenshots, "audit")


def _overview_reads(client: redis.Redis) -> int:
    """How many overview reads Redis has served (each reads the lease's PTTL once)."""
    return int(client.info("commandstats").get("cmdstat_pttl", {}).get("calls", 0))


def a_hidden_page_stops_listening(driver: WebDriver, url: str, prefix: str, client: redis.Redis) -> None:
    driver.get(f"{url}/?prefix={prefix}")
    overview = driver.current_window_handle
    start = _overview_reads(client)
    wait_until(lambda: _overview_reads(client) > start + 1, WAIT_S, "the open page's stream to poll")

    driver.switch_to.new_window("tab")  # the overview's tab is hidden now

    def settled() -> bool:
        before = _overview_reads(client)
        time.sleep(2.5)  # more than two poll intervals: a live stream would read in between
        return _overview_reads(client) == before

    wait_until(settled, WAIT_S, "the hidden page to stop listening")
    stopped_at = _overview_reads(client)
    driver.switch_to.window(overview)  # shown again: the page listens again
    wait_until(lambda: _overview_reads(client) > stopped_at, WAIT_S, "the shown page to listen again")


def the_overview_follows_live(driver: WebDriver, url: str, prefix: str, client: redis.Redis) -> None:
    driver.get(f"{url}/?prefix={prefix}")
    assert field_text(driver, prefix, "dead_letters.outbox") == "3"

    park_outbox(client, prefix, range(900, 902))

    # No reload: only the server-sent events can change the number on the page.
    WebDriverWait(driver, WAIT_S).until(lambda d: field_text(d, prefix, "dead_letters.outbox") == "5")
