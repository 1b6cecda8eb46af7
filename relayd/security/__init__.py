"""Secrets and TLS: what relayd keeps secret, the files it reads them from, and how it verifies.

- ``secret``: ``Secret``, a value that never shows itself.
- ``material``: secret and certificate files, their last good content, re-read when they change.
- ``watch``: ``MaterialWatch``, which checks those files on an interval and on demand.
- ``tls``: the one always-verified client TLS context, for Redis and the sinks.
- ``redis_tls``: the TLS context of relayd's Redis connections, rebuilt from the current files.
- ``acl``: the Redis ACL rule relayd needs for its prefixes (``relayd acl``).

Importing this package loads none of them.
"""
