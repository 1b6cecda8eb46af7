"""Process-wide tweaks of the libraries relayd runs on, each in its own module.

- ``packing``: ``redis.asyncio`` clients pack commands with hiredis and bound writes with
  ``asyncio.timeout`` (no Task per command).
- ``gc_tuning``: the garbage collector's settings while relays run, and as the process exits.
- ``lean_imports``: structlog imported without rich's traceback machinery, for a fast start-up.

Each is applied explicitly by the code that needs it; importing this package changes nothing.
"""
