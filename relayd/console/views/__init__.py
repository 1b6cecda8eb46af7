"""The console's pages, one module per page group, each with the ``ROUTES`` it serves.

``overview`` (``/``, ``/events``), ``dead_letters`` (``/dead-letters``, ``/dead-letter``),
``groups``, ``timers``, ``audit``, ``actions`` (replay and purge, their previews) and ``login``.
Every view reads; only the action and login posts change anything. The frame every page shows
comes from ``rendering.page_context``; failures are raised and answered by ``error_pages``.
"""
