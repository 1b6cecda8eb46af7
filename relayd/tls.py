"""The one client TLS context relayd makes, for Redis and for every sink that speaks TLS itself.

Always verified: the server's certificate must chain to a trusted CA and name the host; there
is no switch that turns either off (README.md#security). A CA bundle, given as a file or as its
bytes (a watched file's current content), replaces the system trust store, or is added to it
where the caller asks (``trust_only_ca=False``: Redis through sentinels, ``relayd.connect``).
"""

from __future__ import annotations

import ssl


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
