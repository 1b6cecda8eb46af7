"""``relayd console``: the operator web console (docs/console.md#security), served in its own process.

Pure parts: ``signatures`` (error text → signature), ``filters`` (which dead letters a view
or an action means), ``paging`` (HSCAN cursors as page tokens), ``groups``, ``rates``,
``commands`` and ``display`` (the templates' filters). I/O: ``reads`` (bounded Redis reads),
``actions`` (replay, purge, audit), ``poller`` (the one shared overview loop). The pages are
``views`` (one module per page group); around them ``app`` (the Starlette app), ``state``,
``rendering`` (``Jinja2Templates`` and the page context), ``error_pages`` (exception handlers),
``guard`` and ``security`` (access rules) and ``server`` (uvicorn). The optional extra
``relayd[console]`` brings Starlette, Jinja2, uvicorn, sse-starlette and python-multipart;
htmx ships as a static file in ``static/``.
"""
