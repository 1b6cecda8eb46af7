"""relayd's configuration: every option, where its value comes from, and the rules it must pass.

- ``core``: the classes declaring the core options (``relayd.options``), each beside its reader.
- ``connection``: the Redis options (URL, prefixes, credentials and TLS files).
- ``defaults``: every core option's default, gathered from those classes (for the tests).
- ``settings``: ``Settings``, the options read from flags and ``RELAYD_*`` variables and checked.
- ``sink_settings``: a sink's own options (and a plugin's), loaded the same way.
- ``errors``: a validation error as the one line relayd prints for a bad option.
- ``environment``: a ``RELAYD_*`` variable relayd does not know is refused.
- ``prefixes``: the ``--prefix`` list, its ranges and the cluster's hash-tag rule.
- ``host_port``: ``HOST:PORT`` of relayd's own listeners.
- ``redis_url``: the Redis URL policy (parse, redact, the plaintext rule).

Importing this package loads none of them.
"""
