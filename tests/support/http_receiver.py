"""An aiohttp handler as a webhook receiver on a free 127.0.0.1 port, for tests.

``serve_on_this_loop`` runs it on the test's own event loop (an async test driving a sink);
``serve_in_thread`` runs it on a loop of its own in a daemon thread, for a test that blocks
meanwhile (waiting on a ``relayd`` process with ``wait_until``).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _start(
    handler: Handler, path: str, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context).start()
    scheme = "https" if ssl_context is not None else "http"
    return runner, f"{scheme}://127.0.0.1:{runner.addresses[0][1]}{path}"


@asynccontextmanager
async def serve_on_this_loop(
    handler: Handler, path: str = "/hook", *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """POSTs to ``path`` go to ``handler`` on the running loop for the block; yields the URL
    (``https://`` with ``ssl_context``, the server's TLS context)."""
    runner, url = await _start(handler, path, ssl_context)
    try:
        yield url
    finally:
        await runner.cleanup()


@contextmanager
def serve_in_thread(
    handler: Handler, path: str = "/hook", *, ssl_context: ssl.SSLContext | None = None
) -> Iterator[str]:
    """POSTs to ``path`` go to ``handler`` on a thread's own loop for the block; yields the URL."""
    loop = asyncio.new_event_loop()
    runner, url = loop.run_until_complete(_start(handler, path, ssl_context))
    thread = threading.Thread(target=loop.run_forever, name="http-receiver", daemon=True)
    thread.start()
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
