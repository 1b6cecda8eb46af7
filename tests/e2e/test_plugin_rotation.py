"""A plugin's own secret file rotated under a running ``relayd sweep``, as a built-in's is.

The plugin (tests/plugins/token_sink.py) declares a watched secret file among its own options
and reads the token through a ``content_of`` field on every batch. The file is replaced
(``os.replace``) under the running relay: the next deliveries go with the new token, the reload
is one ``secret_reloaded`` line and one ``relayd_secret_reloads_total`` increment. Then the file
is emptied: the old token stays in use and ``/readyz`` names the option until it is fixed. Before
a plugin's files joined the watch, they were read once at start-up: no reload was ever seen.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pytest
from support.redis_server import RedisServer
from support.secret_files import SecretDir
from support.seeding import commit_outbox
from support.sweeper_process import SweepProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.slow]

TIMEOUT_S = 60.0
#: How relayd names the plugin's option in its log lines, metric and ``/readyz``.
OPTION = "--sink-option tokens.token_file"
RELOADS = "relayd_secret_reloads_total"


def delivered(out: Path) -> dict[str, str]:
    """The token each delivered id went with, as the plugin noted it."""
    if not out.exists():
        return {}
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    return {record["id"]: record["token"] for record in records}


def test_a_plugins_secret_file_is_reloaded_counted_and_refused_like_a_built_ins(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    stem = uuid.uuid4().hex[:10]
    prefix, old, new = f"prot-{stem}", f"old-token-{stem}", f"new-token-{stem}"
    secrets = SecretDir(tmp_path / "secret", "replace")
    secrets.write({"token": f"{old}\n"})
    out = tmp_path / "delivered.jsonl"
    args = [
        "--redis-url", redis_server.url, "--prefix", prefix,
        "--sink", "python:tests.plugins.token_sink:TokenSink",
        "--sink-option", f"tokens.token_file={secrets.path('token')}",
        "--sink-option", f"tokens.out={out}",
    ]  # fmt: skip
    relay = SweepProcess(args, tmp_path / "relay.log")
    admin = redis_server.client()

    def arrived(wanted: set[str]) -> bool:
        assert relay.running, relay.log_text()[-3000:]
        return wanted <= delivered(out).keys()

    try:
        first = commit_outbox(admin, prefix, range(1, 21))
        wait_until(lambda: arrived(first), TIMEOUT_S, "the first batch")

        secrets.write({"token": f"{new}\n"})  # os.replace of a new file
        wait_until(lambda: relay.metric(RELOADS, option=OPTION, outcome="reloaded") == 1, TIMEOUT_S, "reload")
        second = commit_outbox(admin, prefix, range(21, 41))
        wait_until(lambda: arrived(second), TIMEOUT_S, "the second batch")

        secrets.write({"token": ""})  # emptied: refused, the new token stays in use
        wait_until(lambda: relay.metric(RELOADS, option=OPTION, outcome="refused") == 1, TIMEOUT_S, "refusal")
        status, body = relay.readyz()
        third = commit_outbox(admin, prefix, range(41, 61))
        wait_until(lambda: arrived(third), TIMEOUT_S, "the third batch")

        secrets.write({"token": f"{new}\n"})  # fixed: the same material again, ready again
        wait_until(
            lambda: relay.metric(RELOADS, option=OPTION, outcome="restored") == 1, TIMEOUT_S, "restored"
        )
        wait_until(lambda: relay.readyz()[0] == 200, TIMEOUT_S, "ready again")
    finally:
        code = relay.stop()
        admin.close()

    tokens = delivered(out)
    assert {tokens[i] for i in first} == {old}
    assert {tokens[i] for i in second} == {new}
    assert {tokens[i] for i in third} == {new}
    assert status == 503
    assert f"{OPTION}: '{secrets.path('token')}' is empty" in body, body
    assert [event["option"] for event in relay.events("secret_reloaded")] == [OPTION]
    assert [event["option"] for event in relay.events("secret_refused")] == [OPTION]
    assert [event["option"] for event in relay.events("secret_restored")] == [OPTION]
    log = relay.log_text()
    assert relay.events("tokens_delivered"), log[-2000:]  # the plugin logged its token ...
    assert old not in log
    assert new not in log
    assert code == 0, log[-2000:]
