"""The runs table: one row per run, updated in place, sortable, with a selection."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from offpoc_tui.console import visible
from offpoc_tui.views import STATUS_STYLE, duration, number
from store.runs import RunRow

COLUMNS = (
    ("sel", "", "left"), ("id", "id", "right"), ("name", "name", "left"), ("algo", "algo", "left"),
    ("env", "env", "left"), ("correction", "correction", "left"), ("divergence", "div", "left"),
    ("seed", "seed", "right"), ("status", "status", "left"), ("progress", "done", "right"),
    ("sps", "steps/s", "right"), ("eta", "ETA", "right"), ("last_return", "return", "right"),
    ("best_return", "best", "right"), ("mean_lambda", "λ̄", "right"),
)  # fmt: skip
WIDTHS = {
    "sel": 1, "id": 4, "name": 20, "algo": 4, "env": 14, "correction": 12, "divergence": 5, "seed": 4, "status": 8,
    "progress": 4, "sps": 7, "eta": 12, "last_return": 9, "best_return": 9, "mean_lambda": 5,
}  # fmt: skip
"""Every column's width, fixed, so a value that grows later (queued → running, – → 1 h 05 min, – → 0.873)
never meets a column sized for the first rows; a longer name or env is cut with an ellipsis."""
PRIORITY = (
    "sel", "id", "status", "progress", "last_return", "mean_lambda", "env", "correction", "algo", "seed", "name",
    "divergence", "sps", "eta", "best_return",
)  # fmt: skip
"""Which columns a narrow terminal keeps, first to last; the table shows them in :data:`COLUMNS`' order."""
PADDING = 2
"""The cells' padding, one character each side."""
WIDEST = {"name": 48, "env": 28}
"""How far the room a wide terminal leaves widens the columns whose values are cut most (names, envs)."""


def columns_for(width: int) -> list[str]:
    """The columns that fit ``width`` characters, by :data:`PRIORITY`, in the table's order."""
    kept: set[str] = set()
    used = 0
    for key in PRIORITY:
        if used + WIDTHS[key] + PADDING > width and kept:
            continue
        kept.add(key)
        used += WIDTHS[key] + PADDING
    return [key for key, _, _ in COLUMNS if key in kept]


def widths_for(width: int, keys: list[str]) -> dict[str, int]:
    """The columns' widths at ``width`` characters: :data:`WIDTHS`, and the room the ``keys`` leave (less a
    scrollbar) to names and envs, up to :data:`WIDEST`."""
    widths = dict(WIDTHS)
    spare = width - 2 - sum(WIDTHS[key] + PADDING for key in keys)
    for key, most in WIDEST.items():
        if key in keys and spare > 0:
            extra = min(spare, most - widths[key])
            widths[key] += extra
            spare -= extra
    return widths


def eta_seconds(run: RunRow) -> float | None:
    if run["status"] != "running" or not run["sps"]:
        return None
    return max(run["total_steps"] - run["steps"], 0) / run["sps"]


def sort_value(run: RunRow, column: str) -> Any:
    """A key that sorts missing values last and mixed types safely."""
    if column == "progress":
        value: Any = run["steps"] / run["total_steps"] if run["total_steps"] else 0.0
    elif column == "eta":
        value = eta_seconds(run)
    else:
        value = run.get(column)
    return (value is None, value if value is not None else 0)


def cells(run: RunRow, selected: bool, widths: dict[str, int] = WIDTHS) -> list[Any]:
    progress = run["steps"] / run["total_steps"] if run["total_steps"] else 0.0

    def right(text: str) -> Text:
        return Text(text, justify="right")

    # Text throughout: DataTable parses a plain str cell as markup on every repaint.
    return [
        Text("●", style="bold yellow") if selected else Text(""),
        right(str(run["id"])),
        fitted(run["name"], widths["name"]),
        Text(run["algo"]),
        fitted(run["env"], widths["env"]),
        fitted(
            run["correction"] + ("" if run.get("sampler", "uniform") == "uniform" else f"+{run['sampler']}"),
            WIDTHS["correction"],
        ),
        Text(run["divergence"] or "–"),
        right(str(run["seed"])),
        Text(run["status"], style=STATUS_STYLE.get(run["status"], "")),
        right(f"{100 * progress:.0f}%"),
        right(number(run["sps"], ",.1f")),
        right(duration(eta_seconds(run))),
        right(number(run["last_return"], ",.1f")),
        right(number(run["best_return"], ",.1f")),
        right(number(run["mean_lambda"], ".3f")),
    ]


def fitted(text: str, width: int) -> Text:
    """``text`` literally (no markup, control characters spelled out), cut to ``width`` with an ellipsis."""
    text = visible(text)
    return Text(text if len(text) <= width else text[: width - 1] + "…")


def row_state(run: RunRow, selected: bool) -> tuple[Any, ...]:
    """Everything a row's cells are made of: equal states draw equal rows."""
    return (selected, *(run.get(key) for key in STATE_KEYS))


STATE_KEYS = (
    "id", "name", "algo", "env", "correction", "divergence", "seed", "status", "steps", "total_steps", "sps",
    "last_return", "best_return", "mean_lambda",
)  # fmt: skip


class RunsTable(DataTable[Any]):
    """Rows keyed by run id; :meth:`sync` changes only the cells that changed.

    A changed row off screen is only noted; its cells are updated when it scrolls into
    view, so a refresh costs what is on screen, not the number of runs.
    """

    MARGIN = 2
    """Rows beyond each edge of the viewport that are kept up to date as well."""

    def __init__(self, **kwargs: Any) -> None:
        # No zebra stripes: they made each repaint of the visible rows slower (a quarter, measured
        # once), and this table repaints at every poll while runs are live.
        super().__init__(cursor_type="row", **kwargs)
        self.shown: list[int] = []
        self._cells: dict[int, list[Any]] = {}
        self._drawn: dict[int, tuple[Any, ...]] = {}
        """Per run, the state its row's cells show."""
        self._pending: dict[int, tuple[RunRow, bool]] = {}
        """Off-screen runs whose row is behind: the run and its selection, to draw on arrival."""
        self.last_sync_s = 0.0
        self.keys: list[str] = []
        self.widths: dict[str, int] = dict(WIDTHS)
        """The columns shown, in order (:func:`columns_for` the table's width)."""
        self._runs: list[RunRow] = []
        self._selected: set[int] = set()
        self._keep: int | None = None

    def on_mount(self) -> None:
        width = self.size.width or 160
        self._layout(columns_for(width), width)

    def _layout(self, keys: list[str], width: int) -> None:
        """Show the columns ``keys`` at ``width``: the rows are redrawn at the next :meth:`sync`."""
        widths = widths_for(width, keys)
        if keys == self.keys and widths == self.widths:
            return
        self.widths = widths
        keep = self.cursor_run
        self.clear(columns=True)
        self.keys = keys
        labels = {key: (label, justify) for key, label, justify in COLUMNS}
        for key in keys:
            label, justify = labels[key]
            self.add_column(Text(label, justify=justify), key=key, width=widths[key])  # type: ignore[arg-type]
        self.shown, self._cells, self._drawn, self._pending = [], {}, {}, {}
        self._keep = keep

    def point_at(self, run_id: int) -> None:
        """Put the cursor on ``run_id`` now, or, where the table has not drawn it yet, at its next :meth:`sync`."""
        if run_id in self.shown:
            self.move_cursor(row=self.shown.index(run_id), animate=False)
            self._keep = None
        else:
            self._keep = run_id

    @property
    def cursor_run(self) -> int | None:
        if not self.shown or self.cursor_row >= len(self.shown):
            return None
        return self.shown[self.cursor_row]

    def sync(self, runs: list[RunRow], selected: set[int]) -> None:
        """Show ``runs`` in this order, keeping the cursor on the same run."""
        start = time.perf_counter()
        self._runs, self._selected = runs, selected
        order = [r["id"] for r in runs]
        if order != self.shown:
            keep = self._keep if self._keep is not None else self.cursor_run
            self.clear()
            self._cells, self._drawn, self._pending = {}, {}, {}
            for run in runs:
                is_selected = run["id"] in selected
                row = self._shown_cells(run, is_selected)
                self._cells[run["id"]] = row
                self._drawn[run["id"]] = row_state(run, is_selected)
                self.add_row(*row, key=str(run["id"]))
            self.shown = order
            self._keep = None
            if keep in order:
                self.move_cursor(row=order.index(keep), animate=False)
        else:
            on_screen = self._on_screen()
            for index, run in enumerate(runs):
                run_id, is_selected = run["id"], run["id"] in selected
                if row_state(run, is_selected) == self._drawn[run_id]:
                    self._pending.pop(run_id, None)
                elif index in on_screen:
                    self._draw(run, is_selected)
                else:
                    self._pending[run_id] = (run, is_selected)
        self.last_sync_s = time.perf_counter() - start

    def _on_screen(self) -> range:
        first = int(self.scroll_y)
        return range(max(first - self.MARGIN, 0), first + self.size.height + self.MARGIN)

    def _shown_cells(self, run: RunRow, is_selected: bool) -> list[Any]:
        every = dict(zip((key for key, _, _ in COLUMNS), cells(run, is_selected, self.widths), strict=True))
        return [every[key] for key in self.keys]

    def _draw(self, run: RunRow, is_selected: bool) -> None:
        run_id = run["id"]
        row = self._shown_cells(run, is_selected)
        for key, new, before in zip(self.keys, row, self._cells[run_id], strict=True):
            if new != before:
                self.update_cell(str(run_id), key, new)
        self._cells[run_id] = row
        self._drawn[run_id] = row_state(run, is_selected)
        self._pending.pop(run_id, None)

    def _draw_pending_on_screen(self) -> None:
        if self._pending:
            for index in self._on_screen():
                if index < len(self.shown) and self.shown[index] in self._pending:
                    self._draw(*self._pending[self.shown[index]])

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._draw_pending_on_screen()

    def on_resize(self) -> None:
        if self.size.width <= 0:  # hidden behind another tab: keep the columns it will show again
            return
        keys = columns_for(self.size.width)
        if keys != self.keys or widths_for(self.size.width, keys) != self.widths:
            self._layout(keys, self.size.width)
            self.sync(self._runs, self._selected)
        self._draw_pending_on_screen()
