"""The one client TLS context relayd makes, for Redis and for every sink that speaks TLS itself.

Always verified: the server's certificate must chain to a trusted CA and name the host; there
is no switch that turns either off (README.md#security). A CA bundle, given as a file or as its
bytes (a watched file's current content), replaces the system trust store, or is added to it
where the caller asks (``trust_only_ca=False``: Redis through sentinels, ``relayd.connect``).
"""

from __future__ import annotations

import ssl

from relayd.errors import ConfigError
from relayd.security.material import Material, WatchedFile


def verified_context(
    *, ca_file: str | None = None, ca_pem: bytes | None = None, trust_only_ca: bool = True
) -> ssl.SSLContext:
    """A client context verifying the server against ``ca_pem`` or ``ca_file`` (None: the system store).

    Raises:
        ssl.SSLError: the bundle holds no usable certificate.
        OSError: ``ca_file`` cannot be read.
    """
    ca_text = ca_pem.decode("ascii", "replace") if ca_pem is not None else None
    if trust_only_ca and (ca_text is not None or ca_file is not None):
        context = ssl.create_default_context(cafile=ca_file, cadata=ca_text)
    else:
        context = ssl.create_default_context()
        if ca_text is not None or ca_file is not None:
            context.load_verify_locations(cafile=ca_file, cadata=ca_text)
    context.check_hostname = True
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class WatchedCaContext:
    """The verified context of a sink whose CA bundle and client certificate may rotate
    (``--<sink>-ca-file``, ``--<sink>-cert-file``, ``--<sink>-key-file``).

    ``ca`` is the watched file's current content (``relayd.security.material``); a new context is made
    when its bytes change, and a bundle that does not load keeps the last context. Without ``ca``
    the context comes from ``ca_file`` once (None: the system trust store). ``cert`` and ``key``
    (both or neither) are the client certificate chain and its key, presented to servers that
    ask for one: a new context is made when either takes new material, loaded from the files as
    they are then (the ``ssl`` module loads a chain from paths only); a certificate whose key has
    not been replaced yet does not load, and the last context stays until both match.
    """

    def __init__(
        self,
        ca: Material[bytes] | None,
        ca_file: str | None,
        *,
        option: str,
        cert: WatchedFile[bytes] | None = None,
        key: WatchedFile[bytes] | None = None,
        cert_option: str = "",
    ) -> None:
        self._ca = ca
        self._ca_file = ca_file
        self._option = option
        self._cert: WatchedFile[bytes] | None = cert if key is not None else None
        self._key: WatchedFile[bytes] | None = key if cert is not None else None
        self._cert_option = cert_option
        self._context: ssl.SSLContext | None = None
        self._made_from: tuple[object, int, int] | None = None
        #: Why the current files do not make a context (the last one stays in use), or None.
        self.problem: str | None = None

    def current(self) -> ssl.SSLContext:
        """The context for the next connections.

        Raises:
            ConfigError: the first bundle holds no usable CA, or the first certificate and key
                do not load.
        """
        made_from = (
            self._ca.value if self._ca is not None else None,
            self._cert.generation if self._cert is not None else -1,
            self._key.generation if self._key is not None else -1,
        )
        if self._context is not None and self._made_from is not None and _same(made_from, self._made_from):
            return self._context
        self._made_from = made_from
        try:
            context = self._build()
        except ssl.SSLError as exc:
            reason = f"{self._cert_option} does not load ({exc.reason or type(exc).__name__})"
            if not isinstance(exc, _ClientCertError):
                reason = f"{self._option} holds no usable CA"
            if self._context is None:
                raise ConfigError(reason) from None
            self.problem = f"{reason}; the previous TLS material stays in use"
        else:
            self._context, self.problem = context, None
        return self._context

    def _build(self) -> ssl.SSLContext:
        if self._ca is None:
            context = verified_context(ca_file=self._ca_file)
        else:
            context = verified_context(ca_pem=self._ca.value)
        if self._cert is not None and self._key is not None:
            try:
                context.load_cert_chain(str(self._cert.path), str(self._key.path))
            except (ssl.SSLError, OSError) as exc:
                reason = exc.reason if isinstance(exc, ssl.SSLError) else exc.strerror
                raise _ClientCertError(reason or type(exc).__name__) from None
        return context


class _ClientCertError(ssl.SSLError):
    """The client certificate and key did not load (as opposed to the CA bundle)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _same(made_from: tuple[object, int, int], before: tuple[object, int, int]) -> bool:
    """Whether the material is what the context was made from (the CA bundle compared by identity)."""
    return made_from[0] is before[0] and made_from[1:] == before[1:]
