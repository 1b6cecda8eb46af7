"""The one client TLS context relayd makes, for Redis and for every sink that speaks TLS itself.

Always verified: the server's certificate must chain to a trusted CA and name the host; there
is no switch that turns either off (README.md#security). A CA bundle, given as a file or as its
bytes (a watched file's current content), replaces the system trust store, or is added to it
where the caller asks (``trust_only_ca=False``: Redis through sentinels, ``relayd.connect``).
"""

from __future__ import annotations

import ssl

from relayd.errors import ConfigError
from relayd.material import Material


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
    """The verified context of a sink whose CA bundle may rotate (``--<sink>-ca-file``).

    ``ca`` is the watched file's current content (``relayd.material``); a new context is made
    when its bytes change, and a bundle that does not load keeps the last context. Without ``ca``
    the context comes from ``ca_file`` once (None: the system trust store).
    """

    def __init__(self, ca: Material[bytes] | None, ca_file: str | None, *, option: str) -> None:
        self._ca = ca
        self._ca_file = ca_file
        self._option = option
        self._context: ssl.SSLContext | None = None
        self._made_from: bytes | None = None

    def current(self) -> ssl.SSLContext:
        """The context for the next connections.

        Raises:
            ConfigError: the first bundle holds no usable CA.
        """
        if self._ca is None:
            if self._context is None:
                self._context = verified_context(ca_file=self._ca_file)
            return self._context
        bundle = self._ca.value
        if self._context is None or bundle is not self._made_from:
            self._made_from = bundle
            try:
                self._context = verified_context(ca_pem=bundle)
            except ssl.SSLError:
                if self._context is None:
                    raise ConfigError(f"{self._option} holds no usable CA") from None
        return self._context
