"""The console's security defaults (docs/console.md#security), checked with plain HTTP on a real console."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import redis
from support.console import ConsoleProcess, console_env, start_console
from support.redis_server import RedisServer
from support.secret_files import SecretDir
from support.waiting import wait_until

from relayd.console.security import SESSION_COOKIE
from relayd.state.attempts import AttemptRecord, encode_record
from relayd.state.keys import RelayKeys
from store.keys import Keyspace, timer_member
from tests.relayd.console.parked import park_outbox, park_timers

TOKEN = "s3cret-console-token"
#: Every page the console serves to a GET, with query strings that exercise filters and previews.
PAGES = [
    "/",
    "/dead-letters?prefix={p}",
    "/dead-letters?prefix={p}&kind=outbox&reason_code=permanent&target=order-3",
    "/dead-letters?prefix={p}&id={p}:outbox:3&exact_id=1",
    "/dead-letters?prefix={p}&page=outbox:0",
    "/dead-letter?prefix={p}&kind=outbox&id={p}:outbox:3",
    "/groups?prefix={p}",
    "/timers?prefix={p}",
    "/timers?prefix={p}&execution=exe-1",
    "/audit?prefix={p}",
    "/pauses?prefix={p}",
    "/retrying?prefix={p}",
    "/retrying?prefix={p}&page=outbox:0",
    "/replay?prefix={p}&kind=outbox",
    "/replay?prefix={p}&ids={p}:outbox:1",
    "/purge?prefix={p}&kind=timer",
    "/login",
    "/static/htmx.min.js",
    "/static/console.js",
    "/static/console.css",
]


@pytest.fixture(scope="module")
def prefix() -> str:
    """One prefix for the module: its tests share one console (each start costs a process)."""
    return "console" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def seeded(redis_server: RedisServer, prefix: str) -> Iterator[redis.Redis]:
    client = redis_server.client()
    park_outbox(client, prefix, range(10))
    park_timers(client, prefix, 3)
    client.zadd(Keyspace(prefix).timers, {timer_member("exe-1", "wait"): 1.0})
    client.hset(Keyspace(prefix).outbox, "1000", b'{"t": null, "e": "{}"}')
    yield client
    client.close()


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("console") / "console-token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture(scope="module")
def console(
    redis_server: RedisServer, seeded: redis.Redis, prefix: str, token_file: Path
) -> Iterator[ConsoleProcess]:
    running = start_console(
        redis_server.url, [prefix], "--console-token-file", str(token_file), "--allow-actions"
    )
    yield running
    running.stop()


def _dump(client: redis.Redis, prefix: str) -> dict[bytes, object]:
    """Every key of the prefix with its type, content and TTL (DUMP's bytes follow the hash table's
    internal order, which a read may rehash, so the content is compared instead)."""
    readers = {
        b"string": client.get,
        b"hash": client.hgetall,
        b"zset": lambda key: client.zrange(key, 0, -1, withscores=True),
        b"list": lambda key: client.lrange(key, 0, -1),
        b"set": client.smembers,
    }
    keys = sorted(client.scan_iter(match=f"{prefix}:*", count=1000))
    return {key: (kind, readers[kind](key), client.pttl(key)) for key in keys for kind in [client.type(key)]}


@contextlib.contextmanager
def _signed_in(console: ConsoleProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        answer = client.post("/login", data={"token": TOKEN}, headers={"Origin": console.url})
        assert answer.status_code == 303
        yield client


def test_without_the_token_every_page_and_action_is_401(console: ConsoleProcess, prefix: str) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        pages = [
            client.get(page.format(p=prefix)) for page in PAGES if not page.startswith(("/static", "/login"))
        ]
        action = client.post("/replay", data={"prefix": prefix, "kind": "outbox"})
        wrong = client.get("/", headers={"Authorization": "Bearer not-the-token"})
        login = client.post("/login", data={"token": "guess"})

    assert {answer.status_code for answer in pages} == {401}
    assert (action.status_code, wrong.status_code, login.status_code) == (401, 401, 401)
    assert all(TOKEN not in answer.text for answer in [*pages, action, wrong, login])


def test_a_cross_site_post_is_403_even_with_a_session(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    before = _dump(seeded, prefix)
    with _signed_in(console) as client:
        form = {"prefix": prefix, "kind": "outbox"}
        evil_origin = client.post("/replay", data=form, headers={"Origin": "https://evil.example"})
        cross_site = client.post("/replay", data=form, headers={"Sec-Fetch-Site": "cross-site"})
        purge = client.post(
            "/purge", data={**form, "confirm": prefix}, headers={"Origin": "http://127.0.0.1:1"}
        )
        no_csrf = client.post(
            "/replay", data=form, headers={"Origin": console.url, "Sec-Fetch-Site": "same-origin"}
        )

    assert [a.status_code for a in (evil_origin, cross_site, purge, no_csrf)] == [403, 403, 403, 403]
    assert _dump(seeded, prefix) == before


@pytest.mark.slow
@pytest.mark.parametrize("actions", [["--allow-actions"], []], ids=["actions", "read-only"])
def test_signing_out_ends_the_session(
    redis_server: RedisServer, seeded: redis.Redis, prefix: str, token_file: Path, actions: list[str]
) -> None:
    running = start_console(redis_server.url, [prefix], "--console-token-file", str(token_file), *actions)
    try:
        with _signed_in(running) as client:
            session = client.cookies[SESSION_COOKIE]
            page = client.get(f"/?prefix={prefix}").text
            sign_out = re.search(r'action="/logout".*?name="csrf" value="([^"]+)"', page, re.DOTALL)
            assert sign_out is not None, "the page has no sign-out form carrying its form token"
            answer = client.post("/logout", data={"csrf": sign_out[1]}, headers={"Origin": running.url})
        # The old cookie, sent again, no longer opens a page: the server closed the session.
        after = httpx.get(f"{running.url}/", headers={"Cookie": f"{SESSION_COOKIE}={session}"}, timeout=30)
    finally:
        running.stop()

    assert (answer.status_code, answer.headers.get("location")) == (303, "/login")
    assert after.status_code == 401


def test_a_rebound_host_name_is_refused_before_anything_is_read(console: ConsoleProcess) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        rebound = client.get("/login", headers={"Host": "attacker.example"})
        own = client.get("/login", headers={"Host": "localhost"})

    assert (rebound.status_code, own.status_code) == (400, 200)


def test_the_session_cookie_is_httponly_and_samesite_strict(console: ConsoleProcess) -> None:
    with httpx.Client(base_url=console.url, timeout=30) as client:
        answer = client.post("/login", data={"token": TOKEN}, headers={"Origin": console.url})

    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    assert TOKEN.lower() not in cookie


def test_every_get_leaves_redis_unchanged(console: ConsoleProcess, seeded: redis.Redis, prefix: str) -> None:
    before = _dump(seeded, prefix)
    with _signed_in(console) as client:
        answers = [client.get(page.format(p=prefix)) for page in PAGES]
        with client.stream("GET", "/events") as events:
            first_event = next(events.iter_lines())

    assert [a.status_code for a in answers] == [200] * len(PAGES)
    assert first_event.startswith("event: overview")
    assert _dump(seeded, prefix) == before
    assert len(before) >= 4  # outbox, timers and two dead-letter hashes were there to change


def test_every_answer_carries_the_security_headers(console: ConsoleProcess, prefix: str) -> None:
    with _signed_in(console) as client:
        answers = [client.get(page.format(p=prefix)) for page in PAGES]
    answers.append(httpx.get(console.url + "/", timeout=30))  # a 401 too

    for answer in answers:
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert "script-src 'self'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
        # The policy allows no inline script: a javascript: link would do nothing when clicked.
        assert 'href="javascript:' not in answer.text


def test_a_query_the_console_cannot_use_is_the_error_page_saying_why(
    console: ConsoleProcess, prefix: str
) -> None:
    with _signed_in(console) as client:
        answers = {
            "page token": client.get(f"/dead-letters?prefix={prefix}&page=no-such-kind:7"),
            "kind": client.get(f"/groups?prefix={prefix}&kind=parcel"),
            "gone": client.get(f"/dead-letter?prefix={prefix}&kind=outbox&id={prefix}:outbox:404"),
            "no page": client.get(f"/no-such-page?prefix={prefix}"),
        }
    # A bearer client (not a browser) may send any method; the overview takes only GET and HEAD.
    wrong_method = httpx.put(
        f"{console.url}/?prefix={prefix}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )

    assert {name: a.status_code for name, a in answers.items()} == {
        "page token": 400,
        "kind": 400,
        "gone": 404,
        "no page": 404,
    }
    assert "invalid page token" in answers["page token"].text
    assert "kind must be one of" in answers["kind"].text
    assert "no such dead letter" in answers["gone"].text
    assert wrong_method.status_code == 405
    assert set(wrong_method.headers["allow"].split(", ")) == {"GET", "HEAD"}
    for answer in [*answers.values(), wrong_method]:
        assert 'id="error"' in answer.text  # the console's own page, in its frame
        assert f"<code>{prefix}</code>" in answer.text
        assert "default-src 'none'" in answer.headers["content-security-policy"]


def test_a_bearer_token_replays_and_the_action_is_audited(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    keyspace = Keyspace(prefix)
    with httpx.Client(
        base_url=console.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as client:
        answer = client.post("/replay", data={"prefix": prefix, "ids": f"{prefix}:outbox:4"})
        assert answer.status_code == 303
        # The job records its action when it is done.
        wait_until(lambda: seeded.llen(RelayKeys(keyspace).audit), 60, "the replay's audit record")

    assert seeded.hlen(keyspace.outbox) == 2  # the live one seeded, and the replayed one (a new seq)
    assert not seeded.hexists(RelayKeys(keyspace).dead("outbox"), f"{prefix}:outbox:4")
    assert f"relayd dlq replay --prefix {prefix} {prefix}:outbox:4".encode() in seeded.lindex(
        RelayKeys(keyspace).audit, 0
    )


def test_a_bearer_token_pauses_and_resumes_and_both_are_audited(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    """The pause is the one ``relayd pause`` writes: shown on the overview and the pauses page,
    with the console client as its author; the resume removes it; both are in the audit trail."""
    keys = RelayKeys(Keyspace(prefix))
    form = {"prefix": prefix, "kind": "outbox", "target": "order-3", "sink": ""}
    with httpx.Client(
        base_url=console.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as client:
        empty = client.post("/pause", data={**form, "reason": "  "})
        bad_kind = client.post("/pause", data={**form, "kind": "outbx", "reason": "r"})
        paused = client.post("/pause", data={**form, "reason": "tenant <b>migration</b>"})
        stored = seeded.hgetall(keys.pauses)
        page = client.get(f"/pauses?prefix={prefix}")
        overview = wait_until(
            lambda: (
                (answer := client.get("/")).status_code == 200 and "data-paused" in answer.text and answer
            ),
            30,
            "the pause on the overview",
        )
        resumed = client.post("/resume", data=form)

    assert (empty.status_code, bad_kind.status_code, paused.status_code, resumed.status_code) == (
        400,
        400,
        303,
        303,
    )
    (value,) = stored.values()
    assert b'"by":"console:127.0.0.1"' in value
    assert "kind=outbox target=order-3" in page.text
    assert "tenant &lt;b&gt;migration&lt;/b&gt;" in page.text  # escaped, never markup
    assert "tenant &lt;b&gt;migration&lt;/b&gt;" in overview.text
    assert not seeded.exists(keys.pauses)
    actions = [orjson.loads(r) for r in seeded.lrange(keys.audit, 0, 1)]
    assert [(a["action"], a["source"]) for a in actions] == [
        ("resume", "console:127.0.0.1"),
        ("pause", "console:127.0.0.1"),
    ]
    assert actions[1]["command"] == (
        f"relayd pause --prefix {prefix} --kind outbox --target order-3 --reason 'tenant <b>migration</b>'"
    )


def test_the_retrying_page_lists_an_entry_in_backoff_with_its_error_and_next_attempt(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    keys = RelayKeys(Keyspace(prefix))
    (now_s, _) = seeded.time()
    record = AttemptRecord(
        4, now_s - 60.0, now_s - 5.0, "HTTP 503: <html>busy</html>", now_s + 120.0, "order-9"
    )
    seeded.hset(keys.attempts("outbox"), "9", encode_record(record))
    try:
        with httpx.Client(
            base_url=console.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as client:
            page = client.get(f"/retrying?prefix={prefix}")
            bad_token = client.get(f"/retrying?prefix={prefix}&page=nope")
    finally:
        seeded.hdel(keys.attempts("outbox"), "9")

    assert page.status_code == 200
    row = re.search(r'<tr class="retrying">(.*?)</tr>', page.text, re.S)
    assert row is not None
    assert f"{prefix}:outbox:9" in row.group(1)
    assert "order-9" in row.group(1)
    assert "HTTP 503: &lt;html&gt;busy&lt;/html&gt;" in row.group(1)
    assert re.search(r"in (1\d\d\.\d s|2\.0 min)", row.group(1))  # the next attempt, about two minutes out
    assert bad_token.status_code == 400


def test_the_favicon_asks_no_sign_in(console: ConsoleProcess) -> None:
    """Browsers fetch it on every page: 204, not the sign-in page's 401."""
    answer = httpx.get(f"{console.url}/favicon.ico", timeout=30)

    assert answer.status_code == 204


def test_the_overview_names_a_sink_whose_breaker_is_open(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    """What the lease holder published (``P:relay:sinks``) shows on the prefix's card."""
    health = [
        {
            "sink": "webhook",
            "kinds": ["outbox"],
            "state": "open",
            "since": 1.0,
            "last_error": "HTTP 503",
            "retrying": 7,
        },
        {
            "sink": "kafka",
            "kinds": ["timer"],
            "state": "closed",
            "since": 1.0,
            "last_error": "",
            "retrying": 0,
        },
    ]
    seeded.set(f"{prefix}:relay:sinks", orjson.dumps(health), px=60_000)
    try:
        with httpx.Client(
            base_url=console.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
        ) as client:
            shown = wait_until(
                lambda: 'data-sink="webhook"' in (text := client.get("/").text) and text, 30, "the open sink"
            )
    finally:
        seeded.delete(f"{prefix}:relay:sinks")

    assert "sink webhook breaker open" in shown
    assert "7 waiting to go again: HTTP 503" in shown
    assert 'data-sink="kafka"' not in shown


def test_an_action_on_a_prefix_the_console_does_not_serve_is_400(
    console: ConsoleProcess, seeded: redis.Redis, prefix: str
) -> None:
    before = _dump(seeded, prefix)
    with httpx.Client(
        base_url=console.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as client:
        replay = client.post("/replay", data={"prefix": "elsewhere", "kind": "outbox"})
        purge = client.post("/purge", data={"prefix": "elsewhere", "confirm": "elsewhere"})

    assert (replay.status_code, purge.status_code) == (400, 400)
    assert "unknown prefix" in replay.text
    assert _dump(seeded, prefix) == before


@pytest.mark.slow
def test_a_read_only_console_refuses_actions(
    redis_server: RedisServer, seeded: redis.Redis, prefix: str
) -> None:
    running = start_console(redis_server.url, [prefix])
    try:
        with httpx.Client(base_url=running.url, timeout=30) as client:
            page = client.get(f"/dead-letters?prefix={prefix}")
            preview = client.get(f"/replay?prefix={prefix}")
            post = client.post("/replay", data={"prefix": prefix}, headers={"Origin": running.url})
            pause = client.post(
                "/pause", data={"prefix": prefix, "reason": "r"}, headers={"Origin": running.url}
            )
    finally:
        running.stop()

    assert page.status_code == 200
    assert "read-only" in page.text
    assert "replay selected" not in page.text
    assert (preview.status_code, post.status_code, pause.status_code) == (403, 403, 403)
    assert not seeded.exists(RelayKeys(Keyspace(prefix)).pauses)


@pytest.mark.slow
@pytest.mark.parametrize("addr", ["0.0.0.0:0", "[::]:0", "192.0.2.1:9465"], ids=["any4", "any6", "lan"])
def test_a_non_loopback_listen_without_a_token_file_is_exit_2_with_one_line(addr: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "relayd",
            "console",
            "--console-addr",
            addr,
            "--redis-url",
            "redis://127.0.0.1:1/0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=console_env(),
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--console-token-file" in done.stderr


def test_a_rotated_token_file_is_taken_without_a_restart_and_closes_the_old_sessions(
    redis_server: RedisServer, seeded: redis.Redis, prefix: str, tmp_path: Path
) -> None:
    secrets = SecretDir(tmp_path / "console", "kubelet")
    secrets.write({"token": TOKEN + "\n"})
    running = start_console(redis_server.url, [prefix], "--console-token-file", str(secrets.path("token")))
    new_token = "rotated-console-token-5Tz"
    try:
        with _signed_in(running) as client:
            session = client.cookies[SESSION_COOKIE]
        secrets.write({"token": new_token + "\n"})

        def old_token_refused() -> bool:
            return httpx.get(
                f"{running.url}/", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
            ).is_error

        wait_until(old_token_refused, 60, "the old token refused")
        new = httpx.get(
            f"{running.url}/?prefix={prefix}", headers={"Authorization": f"Bearer {new_token}"}, timeout=30
        )
        old_session = httpx.get(
            f"{running.url}/", headers={"Cookie": f"{SESSION_COOKIE}={session}"}, timeout=30
        )
    finally:
        running.stop()

    assert new.status_code == 200
    assert old_session.status_code == 401
