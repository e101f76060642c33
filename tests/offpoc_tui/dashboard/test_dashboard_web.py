"""``offpoc dashboard --web``: who may drive the served view, the CLI's refusals, and the page in a real
headless browser (Debian's chromium) receiving the app's first screen over its websocket."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from typer.testing import CliRunner

from offpoc_tui.cli import app as cli
from offpoc_tui.dashboard import web
from offpoc_tui.dashboard.app import Dashboard
from offpoc_tui.dashboard.runs_table import RunsTable
from store import open_store
from store.runs import create_runs
from tests.support.pilot import drive, until
from tests.support.processes import read_until, wait_for
from tests.support.storefill import spec


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("192.168.1.4", False), ("lab.example.org", False)],
)  # fmt: skip
def test_only_a_loopback_address_serves_the_keys_that_stop_and_resume_unless_allowed(host: str, loopback: bool) -> None:
    assert web.is_loopback(host) is loopback
    assert web.read_only_for(host, allow_control=False, read_only=False) is not loopback
    assert web.read_only_for(host, allow_control=True, read_only=False) is False
    assert web.read_only_for(host, allow_control=False, read_only=True) is True
    served = web.app_command(Path("s.db"), 1.0, web.read_only_for(host, False, False), None, [])
    assert served.endswith("--read-only") is not loopback  # what each browser tab runs


def test_a_rebound_name_is_not_this_server() -> None:
    """DNS rebinding: a site points its own name at 127.0.0.1, so its page, Host and Origin all say its name.
    A server on a loopback or named address answers only its own names; one on every address, any."""
    assert web.allowed_hosts("127.0.0.1", 8000) == {"127.0.0.1:8000", "localhost:8000", "[::1]:8000"}
    assert "evil.example:8000" not in (web.allowed_hosts("localhost", 8000) or set())
    assert web.allowed_hosts("192.168.1.4", 8080) == {"192.168.1.4:8080"}
    assert web.allowed_hosts("0.0.0.0", 8000) is None and web.allowed_hosts("::", 8000) is None


def test_only_this_servers_own_page_may_open_its_websocket() -> None:
    assert web.same_origin("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert web.same_origin(None, "127.0.0.1:8000")  # not a browser page: no other site can make one send this
    assert not web.same_origin("http://evil.example", "127.0.0.1:8000")  # a site that would type x x
    assert not web.same_origin("http://127.0.0.1:9000", "127.0.0.1:8000")
    assert not web.same_origin("null", "127.0.0.1:8000")


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--port", "8001"], "--host, --port and --allow-control go with --web"),
     (["--host", "0.0.0.0"], "--host, --port and --allow-control go with --web"),
     (["--allow-control"], "--host, --port and --allow-control go with --web"),
     (["--web", "--once"], "--web serves the live dashboard; --once prints its tables"),
     (["--web", "--allow-control", "--read-only"], "--allow-control keeps the stop and resume keys"),
     (["--once", "--read-only"], "--read-only goes with the live dashboard"),
     (["--web", "--port", "0"], "Invalid value for '--port'")],
)  # fmt: skip
def test_web_options_out_of_place_are_a_usage_error(filled_store: Path, args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, ["dashboard", *args, "--db", str(filled_store)])
    assert result.exit_code == 2 and said in result.output, result.output


def test_a_read_only_view_says_stop_and_resume_are_off_and_changes_nothing(dashboard_store: Path) -> None:
    """The view ``--web --host`` serves without ``--allow-control``: x x and r on a queued run say why they are
    off, and the run stays queued (with ``_refused`` removed, x x stops it: seen failing with 'stopped')."""
    db = open_store(dashboard_store)
    (queued,) = create_runs(db, [spec(seed=9)])
    db.close()

    async def scenario(app: Dashboard, pilot: Pilot) -> None:
        table = app.query_one(RunsTable)
        await until(pilot, lambda: table.row_count == 7)
        table.move_cursor(row=table.shown.index(queued))
        await pilot.press("x", "x", "r")
        await until(pilot, lambda: sum("read-only view" in str(n.message) for n in app._notifications) == 3)
        await pilot.pause(0.5)
        assert str(table.get_row(str(queued))[8]) == "queued"
        assert "(read-only)" in app.sub_title

    drive(dashboard_store, scenario, read_only=True)


ANSI = re.compile(r"\x1b\[[0-9;?<>$]*[A-Za-z~]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>]")
CHROMIUM = shutil.which("chromium")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _dashboards_of(db: Path) -> list[int]:
    """The pids of processes running ``offpoc dashboard`` on ``db``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"dashboard" in command and str(db.resolve()).encode() in command:
            found.append(int(entry.name))
    return found


def _websocket_statuses(port: int, origin: str, host: str | None = None, count: int = 1) -> list[int]:
    """The HTTP statuses of ``count`` websocket handshakes, held open together, sent as from a page of
    ``origin`` (with ``host`` as the Host header)."""
    import asyncio

    import aiohttp

    async def knock() -> list[int]:
        statuses, opened = [], []
        headers = {"Origin": origin, **({"Host": host} if host else {})}
        async with aiohttp.ClientSession() as session:
            for _ in range(count):
                try:
                    opened.append(await session.ws_connect(f"http://127.0.0.1:{port}/ws", headers=headers))
                    statuses.append(101)
                except aiohttp.WSServerHandshakeError as error:
                    statuses.append(error.status)
            for socket_ in opened:
                await socket_.close()
        return statuses

    return asyncio.run(knock())


@pytest.mark.process
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("OFFPOC_REQUIRE_BROWSER"),
    reason="no chromium (Debian's package; .ci/run installs it and sets OFFPOC_REQUIRE_BROWSER)",
)
def test_the_served_dashboard_reaches_a_real_browser_and_a_read_only_one_refuses_stop(
    filled_store: Path, tmp_path: Path
) -> None:
    """``offpoc dashboard --web`` as a real process on 127.0.0.1; headless chromium loads the page, whose
    websocket brings the app's first screen (its title, tabs and the store's runs); a second server on its port
    is one line, exit 1. Served ``--read-only``,
    x x typed in the page is refused in the app, and the run is not stopped. A websocket opened from another
    site's page is refused."""
    from playwright.sync_api import sync_playwright

    db = open_store(filled_store)
    db.execute("UPDATE runs SET status = 'queued' WHERE id = 1")  # a run x x would stop
    db.conn.commit()
    db.close()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "offpoc_tui.cli", "dashboard", "--web", "--port", str(port), "--read-only",
         "--db", str(filled_store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, start_new_session=True,
        env={**os.environ, "OFFPOC_WEB_TABS": "2"},
    )  # fmt: skip
    try:
        said = read_until(server, "Ctrl+C stops", stream="stderr")
        assert f"at http://127.0.0.1:{port} (read-only: no stop or resume keys)" in said
        taken = subprocess.run(
            [sys.executable, "-m", "offpoc_tui.cli", "dashboard", "--web", "--port", str(port),
             "--db", str(filled_store)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert taken.returncode == 1 and taken.stderr.startswith(f"error: cannot serve on http://127.0.0.1:{port}: ")
        assert len(taken.stderr.splitlines()) == 1 and "serving" not in taken.stderr, taken.stderr  # port in use
        assert _websocket_statuses(port, "http://evil.example") == [403]  # another site's page: refused
        assert _websocket_statuses(port, f"http://evil.example:{port}", f"evil.example:{port}") == [421]  # rebound
        own = _websocket_statuses(port, f"http://127.0.0.1:{port}", count=3)  # the server's own page, 3 tabs at once
        assert own[0] == 101 and own.count(101) <= 2 and own[-1] == 503, own  # OFFPOC_WEB_TABS=2
        wait_for(lambda: _dashboards_of(filled_store) == [server.pid], 60, "the closed tabs' dashboards to end")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM or "/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                      "--disable-sync", "--no-first-run"],
            )  # fmt: skip
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            frames: list[str] = []
            page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(
                payload.decode(errors="replace") if isinstance(payload, bytes) else payload)))  # fmt: skip

            def screen_holds(*texts: str, timeout: float = 60.0) -> str:
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    shown = ANSI.sub("", "".join(frames))
                    if all(text in shown for text in texts):
                        return shown
                    page.wait_for_timeout(200)
                raise AssertionError(f"the page never showed {texts}; it got: {ANSI.sub('', ''.join(frames))[-2000:]}")

            page.goto(f"http://127.0.0.1:{port}/")
            screen_holds("offpoc", "1 Runs", "2 Curves", "correction", "acoffpoc", "Hopper-v4")
            page.screenshot(path=str(tmp_path / "web.png"))
            page.locator("body").click()
            page.keyboard.press("x")
            page.keyboard.press("x")
            shown = screen_holds("read-only view: stop is off")
            page.wait_for_timeout(1500)  # time for a stop to land, were one made
            assert "press x again" not in shown and "stopping" not in ANSI.sub("", "".join(frames))
            db = open_store(filled_store)
            assert db.execute("SELECT status FROM runs WHERE id = 1").fetchone()[0] == "queued"
            db.close()
            server.terminate()  # with the tab still open: its websocket closed, its dashboard ended with it
            _, stderr = server.communicate(timeout=60)
            browser.close()
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=30)
    assert server.returncode == 0 and stderr.decode().strip() == "", stderr  # nothing after 'serving'
    assert not _dashboards_of(filled_store)  # no tab's dashboard left behind
