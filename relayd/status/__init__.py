"""What operators read about the relay from Redis: ``relayd status``, the console's reads.

- ``report``: each prefix's state (backlog, due timers, lag, dead letters, lease, pauses) and
  its renderers.
- ``retrying``: the entries held in backoff now, a bounded page at a time.
- ``prefix_hint``: the hint when the chosen prefix holds nothing but another prefix does.

Importing this package loads none of them (``report`` brings rich, which ``sweep`` never needs).
"""
