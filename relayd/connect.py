"""Open relayd's Redis connection from Settings: credential files, verified TLS, retry with backoff.

TLS is always verified (``ssl_cert_reqs="required"``, hostname checked). With
``--redis-ca-file`` on a standalone Redis the CA bundle *replaces* the system trust store
(a private CA is then the only thing trusted); on a cluster redis-py builds the TLS context
itself and the bundle is added to the system store instead.

The first PING is retried with exponential backoff: forever (until ``stop`` is set) for the
long-running ``sweep``, a few times for ``--once``, ``status`` and ``dlq``. An authentication
failure or a server certificate that fails verification (wrong CA, wrong host) is not
retried: it raises ``RedisUnreachable`` at once (exit 3). No log line or error
carries the URL's password: only ``RedisAddress.display`` (``relayd.config.redis_url``) is shown.

``redis+sentinel://`` gives a client of the master the sentinels name (``store.clients``
builds the options, ``--sentinel-*-file`` the sentinels' credentials); with a CA file the
bundle is added to the system store, as on a cluster.

Rotation: every new connection asks for the current material. The username and password come
from a redis-py ``credential_provider`` reading the watched files (``Settings.redis_credentials``),
for the master, the sentinels and a cluster's nodes alike; on a standalone Redis and through
sentinels the TLS context comes from ``relayd.security.redis_tls.RedisTls``, rebuilt when the CA,
certificate or key file changed (on a cluster redis-py loads the files by path when it creates
a connection; one that reconnects keeps its context). ``refresh`` (``MaterialWatch.check_now``)
is called first, so a connection made after an authentication or TLS failure reads the files at
once. Connections that still work carry on with what they were opened with.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import redis.asyncio as aioredis
import redis.exceptions
import structlog
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.credentials import CredentialProvider, UsernamePasswordCredentialProvider

from relayd.config.settings import Settings
from relayd.errors import ConfigError, RedisUnreachable
from relayd.security.redis_tls import CurrentTlsConnection, CurrentTlsSentinelConnection, RedisTls
from relayd.security.secret import Secret
from relayd.security.watch import MaterialWatch
from store import parse_url, sentinel_options

log = structlog.get_logger(__name__)

AsyncRedis = aioredis.Redis | RedisCluster

#: How long one TCP connect may take before it counts as a failed attempt, in seconds.
CONNECT_TIMEOUT_S: Final = 5.0
#: How long one command may wait for its reply, in seconds (relayd's commands are all bounded).
SOCKET_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often the first PING is tried: ``attempts`` None means until stopped."""

    attempts: int | None
    base_s: float = 0.2
    cap_s: float = 30.0

    def delay_s(self, attempt: int) -> float:
        """Delay after the ``attempt``-th failure (1-based), doubling up to the cap."""
        return float(min(self.cap_s, self.base_s * 2 ** (attempt - 1)))


#: ``sweep``: keep trying while Redis is away (a sidecar may start before its Redis).
FOREVER: Final = RetryPolicy(attempts=None)
#: ``--once``, ``status``, ``dlq``: a few tries over about 3 s, then exit 3.
BRIEF: Final = RetryPolicy(attempts=5, base_s=0.2, cap_s=1.6)


class CurrentCredentials(CredentialProvider):
    """The (username, password) a new connection authenticates with: read when it connects."""

    def __init__(
        self,
        current: Callable[[], tuple[str | None, Secret | None]],
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self._current = current
        self._refresh = refresh

    def get_credentials(self) -> tuple[str] | tuple[str, str]:
        if self._refresh is not None:
            self._refresh()
        username, password = self._current()
        secret = password.get_secret_value() if password is not None else None
        return UsernamePasswordCredentialProvider(username, secret).get_credentials()  # type: ignore[no-untyped-call,no-any-return]


def credential_options(
    current: Callable[[], tuple[str | None, Secret | None]], refresh: Callable[[], None] | None
) -> dict[str, Any]:
    """redis-py options for these credentials: a provider when there are any, else nothing."""
    username, password = current()
    if username is None and password is None:
        return {}
    return {"credential_provider": CurrentCredentials(current, refresh)}


def redis_tls(settings: Settings, refresh: Callable[[], None] | None = None) -> RedisTls | None:
    """The rotating TLS material of a standalone or sentinel Redis with TLS files, else None."""
    files = [settings.watched(o) for o in ("--redis-ca-file", "--redis-cert-file", "--redis-key-file")]
    if not settings.redis.tls or settings.redis.cluster or not any(files):
        return None
    ca, cert, key = files
    try:
        return RedisTls(ca=ca, cert=cert, key=key, trust_only_ca=not settings.redis.sentinel, refresh=refresh)
    except ValueError as exc:
        raise RedisUnreachable(str(exc)) from None


def build_client(settings: Settings, *, watch: MaterialWatch | None = None) -> AsyncRedis:
    """Create (without connecting) the asyncio client the URL asks for.

    With ``watch``, each new connection has the files checked first (``check_now``), and a TLS
    context that cannot be rebuilt from new material is one of the watch's problems.
    """
    address = settings.redis
    refresh = watch.check_now if watch is not None else None
    common: dict[str, Any] = {
        **credential_options(lambda: settings.redis_credentials, refresh),
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "socket_timeout": SOCKET_TIMEOUT_S,
        # One quick transparent retry heals a connection the server closed while idle; longer
        # outages are relayd's to handle (backoff here, the engine's own retry while running).
        "retry": Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.2), retries=1),
    }
    tls: dict[str, Any] = {}
    if address.tls:
        tls = {
            "ssl": True,
            "ssl_cert_reqs": "required",
            "ssl_check_hostname": True,
            "ssl_ca_certs": str(settings.redis_ca_file) if settings.redis_ca_file else None,
            "ssl_certfile": str(settings.redis_cert_file) if settings.redis_cert_file else None,
            "ssl_keyfile": str(settings.redis_key_file) if settings.redis_key_file else None,
        }
    if address.cluster:
        return RedisCluster(host=address.host, port=address.port, **common, **tls)
    rotating_tls = redis_tls(settings, refresh)
    if rotating_tls is not None and watch is not None:
        watch.add_derived_problem(lambda: rotating_tls.problem)
    if address.sentinel:
        if rotating_tls is not None:
            # the sentinels keep the ssl_* options; the master's connections take the current context
            tls |= {"connection_class": CurrentTlsSentinelConnection, "redis_tls": rotating_tls}
        return _sentinel_master(settings, common | tls, refresh)
    if rotating_tls is not None:
        pool = ConnectionPool(
            connection_class=CurrentTlsConnection,
            redis_tls=rotating_tls,
            host=address.host,
            port=address.port,
            db=address.db,
            **common,
        )
        return aioredis.Redis(connection_pool=pool)
    return aioredis.Redis(host=address.host, port=address.port, db=address.db, **common, **tls)


def _sentinel_master(
    settings: Settings, connection: dict[str, Any], refresh: Callable[[], None] | None
) -> aioredis.Redis:
    """A client of the master the sentinels name; each new connection asks them again.

    redis-py drops a connection whose server turned replica (``ReadOnlyError``) and one that
    fails; the next command then reconnects to whatever master the sentinels name by then, so
    relayd follows a failover with its ordinary Redis-error backoff and nothing else.
    """
    address = settings.redis
    parsed = parse_url(settings.redis_url)
    sentinels, master = sentinel_options(parsed, connection=connection)
    # The providers read the files (which win over the URL) for every new connection.
    master = {k: v for k, v in master.items() if k not in ("username", "password")}
    master |= credential_options(lambda: settings.redis_credentials, refresh)
    sentinels = {k: v for k, v in sentinels.items() if k not in ("username", "password")}
    sentinels |= credential_options(lambda: settings.sentinel_credentials, refresh)
    sentinel = Sentinel(list(address.nodes), sentinel_kwargs=sentinels)
    client: aioredis.Redis = sentinel.master_for(str(address.service), **master)
    return client


def _tls_verify_failure(exc: BaseException) -> str | None:
    """The verifier's reason when ``exc`` (or what it wraps) is a refused server certificate."""
    seen: BaseException | None = exc
    for _ in range(8):  # redis-py wraps the ssl error once or twice; never loop on a cycle
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return str(seen.verify_message or seen.reason or "certificate verify failed")
        seen = seen.__cause__ or seen.__context__
    return None


def _is_auth_failure(exc: BaseException) -> bool:
    if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.AuthorizationError):
        return True
    text = str(exc)
    if isinstance(exc, MasterNotFoundError):
        # redis-py folds each sentinel's error into this one's text; no sentinel named a master
        # and at least one refused the credentials: a retry will not change that
        return "AuthenticationError" in text
    return isinstance(exc, redis.exceptions.ResponseError) and text.startswith(
        ("WRONGPASS", "NOAUTH", "NOPERM")
    )


async def connect(
    settings: Settings,
    policy: RetryPolicy,
    *,
    stop: asyncio.Event | None = None,
    sleep: Callable[[float], Any] = asyncio.sleep,
    client_factory: Callable[[Settings], AsyncRedis] = build_client,
    on_failure: Callable[[str], None] | None = None,
) -> AsyncRedis:
    """Return a client whose PING answered, retrying with backoff per ``policy``.

    ``on_failure`` hears the error class of every failed attempt (``/readyz`` shows it).

    Raises:
        RedisUnreachable: authentication failed, the attempts ran out, or ``stop`` was set.
    """
    client = client_factory(settings)
    shown = settings.redis.display
    attempt = 0
    started = time.monotonic()
    while True:
        attempt += 1
        try:
            await client.ping()
        except (redis.exceptions.RedisError, OSError) as exc:
            if _is_auth_failure(exc):
                await client.aclose()
                raise RedisUnreachable(f"Redis at {shown} rejected the credentials") from None
            if "DB index is out of range" in str(exc):
                # A configuration error, not an outage: no retry makes the database exist.
                await client.aclose()
                raise ConfigError(
                    f"Redis at {shown} has no database {settings.redis.db}: pick one below its "
                    "'databases' setting (16 by default)"
                ) from None
            reason = _tls_verify_failure(exc)
            if reason is not None:
                # a certificate the CA does not vouch for will not start verifying on a retry
                await client.aclose()
                raise RedisUnreachable(
                    f"Redis at {shown}: TLS certificate verification failed ({reason}); check --redis-ca-file"
                ) from None
            error = f"{type(exc).__name__}: {exc}"
            log.warning("redis_unreachable", attempt=attempt, error=error)
            if on_failure is not None:
                on_failure(type(exc).__name__)
            if policy.attempts is not None and attempt >= policy.attempts:
                await client.aclose()
                raise RedisUnreachable(
                    f"Redis at {shown} unreachable after {attempt} attempts over "
                    f"{time.monotonic() - started:.1f}s ({type(exc).__name__})"
                ) from None
            if stop is not None and stop.is_set():
                await client.aclose()
                raise RedisUnreachable(f"stopped while Redis at {shown} was unreachable") from None
            await _wait(policy.delay_s(attempt), stop, sleep)
            if stop is not None and stop.is_set():
                await client.aclose()
                raise RedisUnreachable(f"stopped while Redis at {shown} was unreachable") from None
            continue
        if attempt > 1:
            log.info("redis_connected", attempt=attempt)
        return client


async def _wait(delay_s: float, stop: asyncio.Event | None, sleep: Callable[[float], Any]) -> None:
    if stop is None:
        await sleep(delay_s)
        return
    # Wake early on a stop signal rather than finishing a 30 s backoff.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay_s)
