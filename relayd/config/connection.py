"""Where relayd connects and with what: the Redis options, declared here (``relayd.options``).

``Settings`` reads them under the security rules (README.md#security): the URL's policy is
``relayd.config.redis_url``, the prefixes' ``relayd.config.prefixes``; the files are read once
and watched (``relayd.security.material``). Light on purpose: the CLI imports it for its flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from relayd.options import REDIS, SECURITY, STRIPPED_WATCHED, option


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """The Redis server, the prefixes relayed in it, and the credentials and TLS to reach it."""

    redis_url: str = option(
        "redis://127.0.0.1:6379/0",
        "Redis URL: redis://, rediss:// (verified TLS), redis+cluster://, rediss+cluster:// (any seed "
        "node), redis+sentinel://HOST:PORT,HOST:PORT/SERVICE/DB (sentinels), rediss+sentinel://.",
        panel=REDIS,
    )
    prefix: tuple[str, ...] = option(
        ("stm",),
        "Key prefix to relay; repeatable (env: comma-separated). "
        "'{shard-0..31}' expands to 32 hash-tagged prefixes.",
        panel=REDIS,
        repeatable=True,
    )
    redis_username_file: Path | None = option(
        None, f"File holding the Redis ACL username ({STRIPPED_WATCHED}).", panel=SECURITY
    )
    redis_password_file: Path | None = option(
        None, f"File holding the Redis password ({STRIPPED_WATCHED}).", panel=SECURITY
    )
    # The sentinels' own credentials (redis+sentinel://); the URL's and the files above are the master's.
    sentinel_username_file: Path | None = option(
        None,
        f"File holding the Sentinel ACL username (redis+sentinel://; {STRIPPED_WATCHED}).",
        panel=SECURITY,
    )
    sentinel_password_file: Path | None = option(
        None,
        f"File holding the sentinels' password (redis+sentinel://; {STRIPPED_WATCHED}).",
        panel=SECURITY,
    )
    redis_ca_file: Path | None = option(
        None,
        "PEM CA bundle trusted for rediss:// instead of the system store (re-read when it changes).",
        panel=SECURITY,
    )
    redis_cert_file: Path | None = option(
        None,
        "PEM client certificate for mutual TLS (with --redis-key-file; re-read when it changes).",
        panel=SECURITY,
    )
    redis_key_file: Path | None = option(
        None,
        "PEM client key for mutual TLS (with --redis-cert-file; re-read when it changes).",
        panel=SECURITY,
    )
    allow_plaintext: bool = option(
        False,
        "Permit plaintext (Redis, a broker, an http:// webhook) to a non-loopback host (never with "
        "credentials, save a webhook's: a service mesh encrypts the hop).",
        panel=SECURITY,
    )
