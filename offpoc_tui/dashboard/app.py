"""``offpoc dashboard``: the Textual app and its keys.

The poller thread (:mod:`.poller`) owns the SQLite connection and every data computation; it posts
:mod:`.messages` to the UI, which only lays out what it receives.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Header, Input, TabbedContent, TabPane
from textual.worker import get_current_worker

from offpoc_tui.dashboard import poller
from offpoc_tui.dashboard.compare_pane import ComparePane
from offpoc_tui.dashboard.data.compare import CompareData, compare_keys
from offpoc_tui.dashboard.data.curves import group_settings
from offpoc_tui.dashboard.detail_pane import DetailPane
from offpoc_tui.dashboard.help_screen import HelpScreen
from offpoc_tui.dashboard.keys import KEYS
from offpoc_tui.dashboard.messages import RunsUpdated, StoreProblem, ViewData
from offpoc_tui.dashboard.panes import PANES, Pane
from offpoc_tui.dashboard.poller import POLL_S, poll
from offpoc_tui.dashboard.request import SMOOTHING, Request
from offpoc_tui.dashboard.run_control import CONFIRM_S, StopConfirmation, asking, control
from offpoc_tui.dashboard.runs_table import COLUMNS, RunsTable, sort_value
from offpoc_tui.dashboard.state_line import StateLine
from store import where
from store.runs import RunRow
from store.stats import BAND_KINDS, FinalWindow
from store.tasks import source_of

FILTER_HINT = "filter: hopper correction=acoffpoc batch_size>=128 return>1000 (enter applies, esc closes; ? help)"


def state_text(shown: int, runs: int, selected: int, cursor: int | None, sort: str, filter_text: str, room: int) -> str:
    """The status line, in the longest form that fits ``room`` columns: the keys' hint goes first, then a
    selection of none, then the words around the counts, so the filter shows whole; only a filter longer than
    the line is cut (the / box holds it whole)."""
    at = [f"run {cursor}"] if cursor is not None else []
    where = [f"filter: {filter_text}"] if filter_text else []
    chosen = [f"{selected} selected"] if selected else []
    forms = [
        [
            f"{shown} of {runs} runs shown",
            f"{selected} selected",
            *[f"cursor: {a}" for a in at],
            f"sorted by {sort}",
            *where,
        ],
        [f"{shown} of {runs} runs shown", *chosen, *[f"cursor: {a}" for a in at], f"sorted by {sort}", *where],
        [f"{shown}/{runs} shown", *chosen, *at, f"by {sort}", *where],
    ]
    text = " · ".join(forms[0]) + " (s: next column, S: reverse)"
    for form in [None, *forms]:
        text = text if form is None else " · ".join(form)
        if room <= 0 or len(text) <= room:
            return text
    return text[: max(room - 1, 0)] + "…"


class Dashboard(App[None]):
    CSS_PATH = "dashboard.tcss"
    TITLE = "offpoc"
    BINDINGS: ClassVar[list[BindingType]] = KEYS

    def __init__(
        self,
        db_path: Path,
        poll_s: float = POLL_S,
        window: FinalWindow | None = None,
        until: int | None = None,
        read_only: bool = False,
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.read_only = read_only
        """No stop or resume (``--read-only``, or ``--web`` on another host without ``--allow-control``)."""
        self.poll_s = poll_s
        self.last_input = time.monotonic()
        """When a key was last pressed or the mouse used (the poller slows down after :data:`IDLE_AFTER_S`)."""
        self.window = window or FinalWindow()
        self.until = until
        """Compare's final statistic (``offpoc dashboard --last / --last-steps``)."""
        self.sub_title = f"{db_path} (read-only)" if read_only else str(db_path)
        self.runs: list[RunRow] = []
        self.shown_runs: list[RunRow] = []
        self.selected: set[int] = set()
        self.stop_confirmation = StopConfirmation()
        self.predicate: where.Filter = where.parse("")
        self.filter_text = ""
        self.sort_column: str | None = None
        self.sort_reverse = False
        self.request = Request()
        self.polls = 0
        """Runs updates received (tests wait on it)."""
        self.answered: Request | None = None
        """The request whose view data arrived last (tests wait on it)."""
        self.last_poll_s = 0.0
        self.wake = threading.Event()
        """Set when the request changes: the poller answers at once."""
        self._table_behind = False
        """Runs arrived while another tab was shown; the table catches up when it shows again."""
        self.panes: dict[str, Widget] = {}
        """Each view's pane (:data:`~.panes.PANES`), by view."""

    # ---- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="runs"):
            with TabPane("1 Runs", id="runs"):
                yield RunsTable(id="runs-table")
            for number, entry in enumerate(PANES, 2):
                with TabPane(f"{number} {entry.title}", id=entry.view):
                    # Held, not queried: App.query_one searches the active screen, which may be the help.
                    self.panes[entry.view] = pane = entry.make(self.window)
                    yield pane
        yield StateLine(id="status")
        yield Input(placeholder=FILTER_HINT, id="filter", select_on_focus=False)
        yield Footer(show_command_palette=False)  # Ctrl+P still opens it; the footer keeps to 80 columns

    def on_mount(self) -> None:
        # Held, not queried: App.query_one searches the active screen, which may be the help.
        self.table = self.query_one(RunsTable)
        self.compare_pane = self.query_one(ComparePane)
        self.detail_pane = self.query_one(DetailPane)
        self.status_bar = self.query_one("#status", StateLine)
        self.filter_box = self.query_one("#filter", Input)
        self.table.focus()
        self.poll_store()

    # ---- the poller thread -----------------------------------------------------------------
    @work(thread=True, exclusive=True, group="poller")
    def poll_store(self) -> None:
        poll(self, get_current_worker())

    def ask(self, **changes: Any) -> None:
        """Change what the view on screen needs, and have the poller answer now."""
        request = dataclasses.replace(self.request, **changes)
        if request != self.request:
            self.request = request
            self.wake.set()
        self._show_state()

    # ---- messages from the poller --------------------------------------------------------------
    def on_runs_updated(self, message: RunsUpdated) -> None:
        if not self.table.is_attached:  # arrived while the app shuts down
            return
        self.last_poll_s = message.poll_s
        if self.polls and message.runs == self.runs:  # nothing changed: the table and the request stand
            self.polls += 1
            return
        self.runs = message.runs
        self.selected &= {r["id"] for r in self.runs}
        self._refresh_table()
        if self.request.view == "compare":  # new (algo, env) pairs to pick from; hidden, it waits
            self.compare_pane.set_keys(compare_keys(self.compare_runs), self.request.compare_key)
        self.polls += 1

    def on_view_data(self, message: ViewData) -> None:
        if message.request != self.request or not self.table.is_attached:
            return  # answered a question no longer asked, or shutting down
        self.answered = message.request
        data = message.data
        if isinstance(data, CompareData):
            self.compare_pane.set_keys(compare_keys(self.compare_runs), data.key)
        pane: Pane = self.panes[message.request.view]  # type: ignore[assignment]
        pane.show(data)

    def on_store_problem(self, message: StoreProblem) -> None:
        self.notify(message.message, severity="error", timeout=10)

    # ---- the runs table ----------------------------------------------------------------------
    def _refresh_table(self) -> None:
        # Runs trained here first, imported curves (published, zoo) after, until a column is sorted.
        visible = sorted((r for r in self.runs if self.predicate(r)), key=lambda r: source_of(r) != "offpoc")
        if self.sort_column is not None:
            column = self.sort_column
            visible.sort(key=lambda r: sort_value(r, column), reverse=self.sort_reverse)
        self.shown_runs = visible
        self._table_behind = self.request.view != "runs"  # hidden, the table waits for its tab
        if not self._table_behind:
            self.table.sync(visible, self.selected)
        self._follow_cursor()

    def _follow_cursor(self) -> None:
        shown = [r["id"] for r in self.shown_runs]
        ids = tuple(i for i in shown if i in self.selected) or tuple(shown)
        self.ask(run_ids=ids, cursor=self.table.cursor_run)

    def on_resize(self) -> None:
        if hasattr(self, "table"):  # mounted: the status line fits its words to the new width
            self._show_state()

    def _show_state(self) -> None:
        cursor = self.table.cursor_run
        shown = {key: label for key, label, _ in COLUMNS}.get(self.sort_column or "id") or "id"
        room = (self.status_bar.size.width or self.size.width) - 2  # its padding
        self.status_bar.update(
            state_text(
                len(self.shown_runs),
                len(self.runs),
                len(self.selected),
                cursor,
                f"{shown} {'↓' if self.sort_reverse else '↑'}",
                self.filter_text,
                room,
            )
        )
        for pane in self.panes.values():
            pane.show_request(self.request, len(self.selected))  # type: ignore[attr-defined]

    @on(DataTable.RowHighlighted, "#runs-table")
    def _cursor_moved(self) -> None:
        self.ask(cursor=self.table.cursor_run)

    @on(DataTable.RowSelected, "#runs-table")
    def _row_chosen(self) -> None:
        self.action_view("detail")

    @on(DataTable.HeaderSelected, "#runs-table")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        self._sort_by(str(event.column_key.value))

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        view = event.pane.id or "runs"
        self.ask(view=view)
        if view == "runs":
            if self._table_behind:
                self._table_behind = False
                self.table.sync(self.shown_runs, self.selected)
            self.table.focus()

    # ---- actions ---------------------------------------------------------------------------------
    def action_view(self, view: str) -> None:
        self.query_one(TabbedContent).active = view
        self.ask(view=view)
        if view == "compare":  # never the threshold box: digits typed next must switch views
            self.compare_pane.table.focus()

    def action_filter(self) -> None:
        box = self.filter_box
        box.add_class("visible")
        box.value = self.filter_text
        box.select_all()  # typing replaces the filter; an arrow key keeps it to edit
        # Focus now, not later as Widget.focus() does: keys typed right after / are the filter's, never the table's.
        self.screen.set_focus(box)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            self.predicate = where.parse(event.value, where.setting_keys(self.runs))
        except where.FilterError as error:
            self.notify(str(error), severity="error")
            return
        self.filter_text = event.value.strip()
        self.ask(filter_text=self.filter_text)
        self._close_filter()
        self._refresh_table()

    def _close_filter(self) -> None:
        self.filter_box.remove_class("visible")
        self.action_view("runs")
        self.table.focus()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key | events.MouseDown | events.MouseScrollDown | events.MouseScrollUp):
            if time.monotonic() - self.last_input > poller.IDLE_AFTER_S:
                self.wake.set()  # back from idle: fresh data now, not at the end of the slow wait
            self.last_input = time.monotonic()
        await super().on_event(event)

    def on_key(self, event: Any) -> None:
        if event.key != "escape":
            return
        if self.filter_box.has_focus:
            self._close_filter()
            event.stop()
        elif self.compare_pane.threshold.has_focus:  # back to the view, the threshold as it was
            self.compare_pane.close_threshold()
            event.stop()

    def action_toggle_select(self) -> None:
        run_id = self.table.cursor_run
        if run_id is None:
            return
        self.selected ^= {run_id}
        self._refresh_table()

    def action_select_all(self) -> None:
        shown = {r["id"] for r in self.shown_runs}
        self.selected = set() if shown <= self.selected else self.selected | shown
        self._refresh_table()

    def action_sort(self) -> None:
        """s: sort by the next of the shown columns (id, then name, ...), ascending; the header says which."""
        keys = [k for k in self.table.keys if k != "sel"]
        current = self.sort_column or "id"
        self.sort_column = keys[(keys.index(current) + 1) % len(keys)] if current in keys else keys[0]
        self.sort_reverse = False
        self._refresh_table()

    def action_sort_reverse(self) -> None:
        """S: the same column, the other way."""
        self.sort_column = self.sort_column or "id"
        self.sort_reverse = not self.sort_reverse
        self._refresh_table()

    def _sort_by(self, column: str) -> None:
        if column == "sel":
            return
        self.sort_reverse = not self.sort_reverse if self.sort_column == column else False
        self.sort_column = column
        self._refresh_table()

    def action_group(self) -> None:
        """g: Curves, off → by method → by each setting the shown runs differ in → off; Compare, rows by method →
        by each setting its task's runs differ in → by method. Quantities and Detail group by method."""
        request = self.request
        if request.view == "compare":  # the settings its runs differ in, as its last data said
            cycle = ["", *self.compare_pane.settings]
            shown = self.compare_pane.group_by
            self.ask(compare_by=cycle[(cycle.index(shown) + 1) % len(cycle)] if shown in cycle else "")
            return
        settings = group_settings(self.shown_runs) if request.view == "curves" else []
        if not request.grouped:
            self.ask(grouped=True, group_by="")
        elif request.group_by == "" and settings:
            self.ask(group_by=settings[0])
        elif request.group_by in settings[:-1]:
            self.ask(group_by=settings[settings.index(request.group_by) + 1])
        else:
            self.ask(grouped=False, group_by="")

    def action_wall_time(self) -> None:
        self.ask(wall_time=not self.request.wall_time)

    def action_smoothing(self) -> None:
        index = SMOOTHING.index(self.request.smoothing) if self.request.smoothing in SMOOTHING else 0
        self.ask(smoothing=SMOOTHING[(index + 1) % len(SMOOTHING)])

    def action_band(self) -> None:
        """Cycle the band around the means: 95% t-interval, standard error, min–max, none."""
        index = BAND_KINDS.index(self.request.band)
        self.ask(band=BAND_KINDS[(index + 1) % len(BAND_KINDS)])

    def action_imported(self) -> None:
        """Curves: show the imported curves too (hidden by default while runs trained here exist)."""
        self.ask(imported=not self.request.imported)

    @property
    def compare_runs(self) -> list[RunRow]:
        """The runs Compare draws from: those the filter shows, in the store's order."""
        return [r for r in self.runs if self.predicate(r)]

    def action_next_task(self) -> None:
        """Compare: the next (algo, env family) present."""
        keys = compare_keys(self.compare_runs)
        if self.request.view != "compare" or not keys:
            return
        current = self.request.compare_key if self.request.compare_key in keys else keys[0]
        self.ask(compare_key=keys[(keys.index(current) + 1) % len(keys)])

    def action_threshold(self) -> None:
        """Compare: type a threshold into its box (enter applies, escape leaves it)."""
        if self.request.view == "compare":
            self.compare_pane.open_threshold()

    def action_cursor(self, delta: int) -> None:
        """Move the runs table's cursor from any view (the run Quantities and Detail show)."""
        ids = [r["id"] for r in self.shown_runs]
        if not ids:
            return
        current = self.request.cursor if self.request.cursor in ids else ids[0]
        target = ids[min(max(ids.index(current) + delta, 0), len(ids) - 1)]
        self.table.point_at(target)
        self.ask(cursor=target)

    def action_page(self, key: str) -> None:
        """PageUp, PageDown, Home and End: Detail's facts scroll (the keyboard reaches a traceback below the
        config); the runs and compare tables page as their own keys do; elsewhere nothing. Over them, the help
        scrolls (these keys are the app's first: the help screen's own would never see them)."""
        if isinstance(self.screen, HelpScreen):
            self.screen.action_scroll(key)
            return
        if self.request.view == "detail":
            facts = self.detail_pane.facts
            scroll = {"pageup": facts.scroll_page_up, "pagedown": facts.scroll_page_down, "home": facts.scroll_home,
                      "end": facts.scroll_end}[key]  # fmt: skip
            scroll(animate=False)
            return
        table = {"runs": self.table, "compare": self.compare_pane.table}.get(self.request.view)
        if table is not None:
            {"pageup": table.action_page_up, "pagedown": table.action_page_down, "home": table.action_scroll_top,
             "end": table.action_scroll_bottom}[key]()  # fmt: skip

    def action_heatmap(self) -> None:
        self.ask(heatmap=not self.request.heatmap)

    def action_quantity(self) -> None:
        """Quantities: the next logged quantity (λ, then what the correction adds)."""
        self.ask(quantity=self.request.quantity + 1)

    def action_interval(self, delta: int) -> None:
        self.ask(interval=min(self.request.interval + delta, -1))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def _targets(self) -> list[int]:
        cursor = self.table.cursor_run
        return sorted(self.selected) or ([cursor] if cursor is not None else [])

    def action_stop(self) -> None:
        """Stop the selected runs (or the cursor's) on a second ``x`` within :data:`CONFIRM_S`: one key alone
        never stops a run."""
        if self._refused("stop"):
            return
        targets = self._targets()
        if self.stop_confirmation.confirmed(targets, time.monotonic()):
            self._control("stop", targets)
        elif not targets:
            self.notify("no run under the cursor", severity="warning")
        else:
            lapsed = self.stop_confirmation.lapsed
            self.notify(asking(targets, lapsed), severity="warning" if lapsed else "information", timeout=CONFIRM_S)

    def action_resume(self) -> None:
        if not self._refused("resume"):
            self._control("resume", self._targets())

    def _refused(self, what: str) -> bool:
        """In a read-only view, say why ``what`` is off, and refuse it."""
        if self.read_only:
            self.notify(f"read-only view: {what} is off here; offpoc stop/resume, or serve with --allow-control",
                        severity="warning")  # fmt: skip
        return self.read_only

    @work(thread=True, group="control")
    def _control(self, what: str, run_ids: list[int]) -> None:
        control(self.db_path, what, run_ids, lambda *a, **k: self.call_from_thread(self.notify, *a, **k))
        self.wake.set()

    # ---- compare controls -----------------------------------------------------------------------
    @on(Input.Submitted, "#compare-threshold")
    def _threshold(self, event: Input.Submitted) -> None:
        text = event.value.strip().replace(",", "")
        try:
            self.ask(threshold=float(text) if text else None)
        except ValueError:
            self.notify(f"threshold must be a number, not {event.value!r}", severity="error")
            return
        self.compare_pane.close_threshold()
