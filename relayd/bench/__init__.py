"""``relayd bench``: throwaway backlogs drained by the real engine, measured beside a baseline.

- ``runner``: the suites (drain, scale, timers, idle, wake) and the report.
- ``seed``: backlogs in the stored format, and the incumbent-style drain the core is compared with.
- ``server``: a throwaway redis-server, INFO readings, prefix clean-up.
- ``stats``: pure arithmetic on the figures (rates, percentiles, ratios).
- ``wake``: the wake-up suite (commit to delivery with keyspace notifications on and off).
- ``baselines``: per sink, the least its own client library must do to deliver the same bodies.

Nothing under ``relayd`` imports this package except the ``bench`` command, lazily.
"""
