"""``relayd demo``: the real relay on an embedded Redis while a generated workload commits.

- ``embedded``: fakeredis's TCP server on a free loopback port, in a thread (also used by
  ``relayd bench`` when no redis-server is on PATH, and by tests);
- ``run``: the workload, the counting sink, the live table and ``run_demo``.
"""
