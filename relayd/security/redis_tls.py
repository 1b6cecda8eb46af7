"""The TLS context of relayd's Redis connections, rebuilt from the current CA, certificate and key.

``RedisTls.context()`` is asked for every new connection (``CurrentTlsConnection`` and its
sentinel twin): it returns the context built from the files as they are now, building a new
one only when a watched file took new material. Connections already open keep the context they
were made with and carry on. New material that does not make a context (a certificate whose key
has not been replaced yet) is refused: the previous context stays in use and ``problem`` says
so, until a later change of the files builds one.

The CA bundle replaces the system trust store on a standalone Redis (``trust_only_ca``) and is
added to it through sentinels, as ``relayd.connect`` describes.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

from redis.asyncio.connection import SSLConnection
from redis.asyncio.sentinel import SentinelManagedSSLConnection

from relayd.security.material import WatchedFile
from relayd.security.tls import verified_context


class RedisTls:
    """A verified client TLS context from watched files; see the module docstring."""

    def __init__(
        self,
        *,
        ca: WatchedFile[bytes] | None,
        cert: WatchedFile[bytes] | None,
        key: WatchedFile[bytes] | None,
        trust_only_ca: bool,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self._ca, self._cert, self._key = ca, cert, key
        self._trust_only_ca = trust_only_ca
        self._refresh = refresh
        self._built_for: tuple[int, ...] | None = None
        self.problem: str | None = None
        try:
            self._context = self._build()
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ValueError(f"--redis-ca-file/--redis-cert-file/--redis-key-file: {_reason(exc)}") from None
        self._built_for = self._generations()

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, from the files' current material."""
        if self._refresh is not None:
            self._refresh()
        generations = self._generations()
        if generations != self._built_for:
            try:
                context = self._build()
            except (ssl.SSLError, OSError, ValueError) as exc:
                self.problem = (
                    f"redis TLS: the new CA/certificate/key material does not load ({_reason(exc)}); "
                    "the previous stays in use"
                )
            else:
                self._context, self._built_for, self.problem = context, generations, None
        return self._context

    def _generations(self) -> tuple[int, ...]:
        return tuple(-1 if f is None else f.generation for f in (self._ca, self._cert, self._key))

    def _build(self) -> ssl.SSLContext:
        ca_pem = self._ca.value if self._ca is not None else None
        context = verified_context(ca_pem=ca_pem, trust_only_ca=self._trust_only_ca)
        if self._cert is not None and self._key is not None:
            # the ssl module loads a chain from paths only: the files as they are now
            context.load_cert_chain(str(self._cert.path), str(self._key.path))
        return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or type(exc).__name__)
    if isinstance(exc, OSError):
        return str(exc.strerror or type(exc).__name__)
    return str(exc)


class _CurrentTls:
    """Mixin: each (re)connect of the connection takes the context ``RedisTls`` hands out now."""

    ssl_context: Any
    _tls: RedisTls

    def _connection_arguments(self) -> Any:
        # RedisSSLContext.get() returns a prepared context as-is
        self.ssl_context.context = self._tls.context()
        return super()._connection_arguments()  # type: ignore[misc]


class CurrentTlsConnection(_CurrentTls, SSLConnection):
    """An SSL connection to a standalone Redis with the current TLS material."""

    def __init__(self, *, redis_tls: RedisTls, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tls = redis_tls


class CurrentTlsSentinelConnection(_CurrentTls, SentinelManagedSSLConnection):
    """An SSL connection to the master the sentinels name, with the current TLS material."""

    def __init__(self, *, redis_tls: RedisTls, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self._tls = redis_tls
