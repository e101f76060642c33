"""``offpoc dashboard --web``: the same dashboard served to a browser by textual-serve.

textual-serve starts one dashboard process per browser tab and relays its terminal over a websocket. What
is ours on top of it:

- **Who may drive it.** On a loopback address (the default) the view has every key. On any other
  address (``--host``) it is read-only, no stop or resume, unless ``--allow-control``.
- **Only our own page opens the websocket.** A browser lets any site open a websocket to
  ``127.0.0.1``, and it would type keys into the dashboard. So a connection whose ``Origin`` is not this
  server's own host is refused (403). A site could still rebind its own name to 127.0.0.1 (DNS rebinding:
  then its page, Host and Origin all say its name), so a server on a loopback or a named address answers
  only requests whose ``Host`` is that address (:func:`allowed_hosts`); only one listening on every address
  (``0.0.0.0``), open to the network by the user's choice, takes any.
- **A bounded number of tabs.** Each tab is a dashboard process: past :data:`MAX_TABS` at once, 503.
- **Ctrl+C or SIGTERM closes the open tabs' websockets** at once, so their dashboards end with the server.
- **The page's address comes from the request**, not from the listening address: served on
  ``0.0.0.0``, the page still connects its websocket to the host the browser used.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: another machine may resolve it to this one
        return False


def read_only_for(host: str, allow_control: bool, read_only: bool) -> bool:
    """Whether the served view lacks stop and resume: asked for, or on a non-loopback address without
    ``--allow-control``."""
    return read_only or (not is_loopback(host) and not allow_control)


def app_command(db: Path, refresh: float, read_only: bool, until: int | None, window_args: list[str]) -> str:
    """The shell command textual-serve runs for each browser tab: this Python's ``offpoc dashboard``."""
    args = [sys.executable, "-m", "offpoc_tui.cli", "dashboard", "--db", str(db.resolve()), "--refresh", str(refresh)]
    args += window_args + (["--until", str(until)] if until is not None else [])
    return shlex.join(args + (["--read-only"] if read_only else []))


def url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def same_origin(origin: str | None, host: str) -> bool:
    """Whether a websocket request's ``Origin`` header is this server's own page (``host`` is the request's
    ``Host``); no ``Origin`` is a client that is not a browser page, which no other site can make a browser
    send."""
    if origin is None:
        return True
    return urlsplit(origin).netloc.lower() == host.lower()


MAX_TABS = 8
"""Browser tabs served at once: each is a dashboard process on this machine (``OFFPOC_WEB_TABS`` sets it)."""


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The ``Host`` headers a server on ``host:port`` answers (lower case); None: any (every address)."""
    if host in ("0.0.0.0", "::", "[::]", ""):
        return None
    names = {host.lower()}
    if is_loopback(host):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    names = {f"[{name}]" if ":" in name and not name.startswith("[") else name for name in names}
    return {f"{name}:{port}" for name in names} | ({*names} if port == 80 else set())


def check_address(host: str, port: int) -> None:
    """Raise OSError when ``host:port`` cannot be listened on (a port in use, a name that does not resolve),
    before anything says it is served: aiohttp binds only after its start-up hooks have run."""
    (family, kind, proto, _, address), *_ = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp's own listener
        probe.bind(address)


def serve(db: Path, host: str, port: int, command: str, read_only: bool, say: Any) -> None:
    """Serve ``command`` (:func:`app_command`) on ``host:port`` until Ctrl-C or SIGTERM; ``say`` prints a line
    for the user. Raises OSError when the address cannot be listened on."""
    import asyncio
    import logging

    from aiohttp import web
    from textual_serve.server import Server

    hosts = allowed_hosts(host, port)
    tabs: set[asyncio.Task[Any]] = set()
    most = int(os.environ.get("OFFPOC_WEB_TABS", MAX_TABS))

    def check_host(request: web.Request) -> None:
        if hosts is not None and request.host.lower() not in hosts:  # a rebound name: not this server's
            raise web.HTTPMisdirectedRequest(text=f"refused: this server answers {url(host, port)} only\n")

    class DashboardServer(Server):
        def initialize_logging(self) -> None:
            logging.basicConfig(level=logging.WARNING, format="%(message)s")  # not a line per connection

        async def on_startup(self, app: web.Application) -> None:
            mode = "read-only: no stop or resume keys" if read_only else "stop (x x) and resume (r) keys on"
            say(f"serving the dashboard of {db} at {url(host, port)} ({mode}); Ctrl+C stops")

        async def on_shutdown(self, app: web.Application) -> None:
            for task in list(tabs):  # each tab's handler cancelled: it closes its websocket and ends its dashboard
                task.cancel()
            await asyncio.gather(*tabs, return_exceptions=True)
            await super().on_shutdown(app)

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            check_host(request)
            self.public_url = f"{request.scheme}://{request.host}"  # the address the browser used
            response: web.StreamResponse = await super().handle_index(request)
            return response

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            check_host(request)
            if not same_origin(request.headers.get("Origin"), request.host):
                raise web.HTTPForbidden(text="refused: a page of another site\n")
            if len(tabs) >= most:
                raise web.HTTPServiceUnavailable(text=f"refused: {most} tabs are open; close one\n")
            task = asyncio.current_task()
            assert task is not None
            tabs.add(task)
            try:
                return await super().handle_websocket(request)
            finally:
                tabs.discard(task)

    check_address(host, port)
    DashboardServer(command, host=host, port=port, title="offpoc dashboard").serve()
