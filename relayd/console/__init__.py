"""``relayd console``: the operator web console (docs/console.md#security), served in its own process.

Pure parts: ``signatures`` (error text → signature), ``filters`` (which dead letters a view
or an action means), ``paging`` (HSCAN cursors as page tokens), ``groups`` and ``rates``.
I/O: ``reads`` (bounded Redis reads), ``actions`` (replay, purge, audit), ``poller`` (the one
shared overview loop), ``security`` (token, origin, headers), ``app`` (Starlette routes) and
``server`` (uvicorn). The optional extra ``relayd[console]`` brings Starlette, Jinja2, uvicorn
and sse-starlette; htmx ships as a static file in ``static/``.
"""
