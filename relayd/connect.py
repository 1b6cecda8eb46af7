"""Open relayd's Redis connection from Settings: credential files, verified TLS, retry with backoff.

TLS is always verified (``ssl_cert_reqs="required"``, hostname checked). With
``--redis-ca-file`` on a standalone Redis the CA bundle *replaces* the system trust store
(a private CA is then the only thing trusted); on a cluster redis-py builds the TLS context
itself and the bundle is added to the system store instead.

The first PING is retried with exponential backoff: forever (until ``stop`` is set) for the
long-running ``sweep``, a few times for ``--once``, ``status`` and ``dlq``. An authentication
failure or a server certificate that fails verification (wrong CA, wrong host) is not
retried: it raises ``RedisUnreachable`` at once (exit 3). No log line or error
carries the URL's password: only ``RedisAddress.display`` (``relayd.redis_url``) is shown.

``redis+sentinel://`` gives a client of the master the sentinels name (``store.clients``
builds the options, ``--sentinel-*-file`` the sentinels' credentials); with a CA file the
bundle is added to the system store, as on a cluster.
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
from redis.asyncio.connection import ConnectionPool, SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.backoff import ExponentialWithJitterBackoff

from relayd.errors import RedisUnreachable
from relayd.settings import Settings
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


class _PinnedTrustSSLConnection(SSLConnection):
    """An SSL connection whose context trusts exactly the given CA bundle (not the system store)."""

    def __init__(self, *, trust_context: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # RedisSSLContext.get() returns a prepared context as-is.
        self.ssl_context.context = trust_context


def _trust_context(settings: Settings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(settings.redis_ca_file))
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    if settings.redis_cert_file is not None and settings.redis_key_file is not None:
        context.load_cert_chain(str(settings.redis_cert_file), str(settings.redis_key_file))
    return context


def build_client(settings: Settings) -> AsyncRedis:
    """Create (without connecting) the asyncio client the URL asks for."""
    address = settings.redis
    username, password = settings.redis_credentials
    common: dict[str, Any] = {
        "username": username,
        "password": password.get_secret_value() if password is not None else None,
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
    if address.sentinel:
        return _sentinel_master(settings, common | tls)
    if address.tls and settings.redis_ca_file is not None:
        pool = ConnectionPool(
            connection_class=_PinnedTrustSSLConnection,
            trust_context=_trust_context(settings),
            host=address.host,
            port=address.port,
            db=address.db,
            **common,
        )
        return aioredis.Redis(connection_pool=pool)
    return aioredis.Redis(host=address.host, port=address.port, db=address.db, **common, **tls)


def _sentinel_master(settings: Settings, connection: dict[str, Any]) -> aioredis.Redis:
    """A client of the master the sentinels name; each new connection asks them again.

    redis-py drops a connection whose server turned replica (``ReadOnlyError``) and one that
    fails; the next command then reconnects to whatever master the sentinels name by then, so
    relayd follows a failover with its ordinary Redis-error backoff and nothing else.
    """
    address = settings.redis
    sentinel_username, sentinel_password = settings.sentinel_credentials
    parsed = parse_url(settings.redis_url)
    sentinels, master = sentinel_options(
        parsed,
        sentinel_username=sentinel_username,
        sentinel_password=sentinel_password.get_secret_value() if sentinel_password is not None else None,
        connection=connection,
    )
    # Files win over the URL for the master's credentials, as for redis://.
    master |= {"username": connection["username"], "password": connection["password"]}
    sentinel = Sentinel(list(address.nodes), sentinel_kwargs=sentinels)  # type: ignore[no-untyped-call]
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
