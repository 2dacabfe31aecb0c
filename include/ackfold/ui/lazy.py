"""An ASGI app that builds the real one on its first request.

Airflow 3 imports every plugin in every task process (the task runner's
`integrate_macros_plugins`), not only in the api-server that mounts its `fastapi_apps`.
Building the UI at import would cost each task the FastAPI app, Airflow's api-server
modules and the settings (about a second), and a configuration error would fail every
task. The plugin hands the api-server a `LazyApp` instead: importing this module imports
nothing but the standard library, and the factory runs once, on the first HTTP request.

- `http` and `websocket` scopes build the app (once, under a lock, in a worker thread so
  the event loop keeps serving) and go to it.
- `lifespan`: Starlette does not forward it to mounted apps; should a server send it
  anyway, startup and shutdown are acknowledged without building anything.
- A factory that raises is logged and answered 503 for that request; the next request
  tries again (a fixed configuration needs no restart).

Example:
    >>> built = []
    >>> app = LazyApp(lambda: built.append(1) or (lambda scope, receive, send: None))
    >>> built, app.built
    ([], False)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)


class LazyApp:
    """An ASGI app standing for `factory()`, which is called once, on first use."""

    def __init__(self, factory: Callable[[], ASGIApp]) -> None:
        self._factory = factory
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._app is not None

    def get(self) -> ASGIApp:
        """The real app, built now if it is not yet (thread-safe: built once)."""
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
        return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _acknowledge_lifespan(receive, send)
            return
        app = self._app
        if app is None:
            from anyio import to_thread  # a Starlette dependency, imported on first use

            try:
                app = await to_thread.run_sync(self.get)
            except Exception:
                log.exception("the ackfold UI could not be built")
                if scope["type"] == "http":
                    await _unavailable(send)
                return
        await app(scope, receive, send)


async def _acknowledge_lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _unavailable(send: Send) -> None:
    body = b"The ackfold UI is unavailable: see the api-server's log."
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
