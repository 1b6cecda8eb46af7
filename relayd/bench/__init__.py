"""``relayd bench``: throwaway backlogs and writers, the real engine, measured beside a baseline.

- ``runner``: picks the suites, runs them, assembles the report (the ``bench`` command calls it).
- ``harness``: the configuration, throwaway prefixes, sinks and a long-running relay every suite uses.
- ``meter``: the instruments (a timing sink wrapper; CPU, RSS and Redis command readings).
- the suites, one module each: ``drain``, ``scale``, ``timers``, ``idle``, ``wake``, ``steady``
  (with ``writer``, the steady suite's paced writer process).
- ``seed``: backlogs in the stored format, and the incumbent-style drain the core is compared with.
- ``server``: a throwaway redis-server, INFO readings, prefix clean-up.
- ``stats``: pure arithmetic on the figures (rates, percentiles, ratios).
- ``baselines``: per sink, the least its own client library must do to deliver the same bodies.
- ``options``: the command's options (``BenchOptions``), light: the CLI imports it for its flags.

Nothing under ``relayd`` imports this package except the ``bench`` command: its options to build
its flags, the rest lazily.
"""
