"""The runs table: one row per run, updated in place, sortable, with a selection."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from offpoc_tui.views import STATUS_STYLE, number

COLUMNS = (
    ("sel", "", "left"), ("id", "id", "right"), ("name", "name", "left"), ("algo", "algo", "left"),
    ("env", "env", "left"), ("correction", "correction", "left"), ("divergence", "div", "left"),
    ("seed", "seed", "right"), ("status", "status", "left"), ("progress", "progress", "right"),
    ("sps", "SPS (steps/s)", "right"), ("eta", "ETA", "right"), ("last_return", "last return", "right"),
    ("best_return", "best return", "right"), ("mean_lambda", "λ̄ (last 1k updates)", "right"),
)  # fmt: skip
WIDTHS = {"status": 8, "eta": 12, "progress": 8}
"""Columns whose values grow after the first rows (queued → running, – → 1 h 05 min)."""


def eta_seconds(run: dict[str, Any]) -> float | None:
    if run["status"] != "running" or not run["sps"]:
        return None
    return max(run["total_steps"] - run["steps"], 0) / run["sps"]


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes = int(seconds // 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min {int(seconds) % 60:02d} s"


def sort_value(run: dict[str, Any], column: str) -> Any:
    """A key that sorts missing values last and mixed types safely."""
    if column == "progress":
        value: Any = run["steps"] / run["total_steps"] if run["total_steps"] else 0.0
    elif column == "eta":
        value = eta_seconds(run)
    else:
        value = run.get(column)
    return (value is None, value if value is not None else 0)


def cells(run: dict[str, Any], selected: bool) -> list[Any]:
    progress = run["steps"] / run["total_steps"] if run["total_steps"] else 0.0

    def right(text: str) -> Text:
        return Text(text, justify="right")

    return [
        Text("●", style="bold yellow") if selected else "",
        right(str(run["id"])),
        run["name"],
        run["algo"],
        run["env"],
        run["correction"],
        run["divergence"] or "–",
        right(str(run["seed"])),
        Text(run["status"], style=STATUS_STYLE.get(run["status"], "")),
        right(f"{100 * progress:.0f}%"),
        right(number(run["sps"], ",.1f")),
        right(duration(eta_seconds(run))),
        right(number(run["last_return"], ",.1f")),
        right(number(run["best_return"], ",.1f")),
        right(number(run["mean_lambda"], ".3f")),
    ]


class RunsTable(DataTable[Any]):
    """Rows keyed by run id; :meth:`sync` changes only the cells that changed."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.shown: list[int] = []
        self._cells: dict[int, list[Any]] = {}
        self.last_sync_s = 0.0

    def on_mount(self) -> None:
        for key, label, justify in COLUMNS:
            self.add_column(Text(label, justify=justify), key=key, width=WIDTHS.get(key))  # type: ignore[arg-type]

    @property
    def cursor_run(self) -> int | None:
        if not self.shown or self.cursor_row >= len(self.shown):
            return None
        return self.shown[self.cursor_row]

    def sync(self, runs: list[dict[str, Any]], selected: set[int]) -> None:
        """Show ``runs`` in this order, keeping the cursor on the same run."""
        start = time.perf_counter()
        order = [r["id"] for r in runs]
        if order != self.shown:
            keep = self.cursor_run
            self.clear()
            self._cells = {}
            for run in runs:
                row = cells(run, run["id"] in selected)
                self._cells[run["id"]] = row
                self.add_row(*row, key=str(run["id"]))
            self.shown = order
            if keep in order:
                self.move_cursor(row=order.index(keep), animate=False)
        else:
            for run in runs:
                row = cells(run, run["id"] in selected)
                old = self._cells[run["id"]]
                for (key, _, _), new, before in zip(COLUMNS, row, old, strict=True):
                    if new != before:
                        self.update_cell(str(run["id"]), key, new)
                self._cells[run["id"]] = row
        self.last_sync_s = time.perf_counter() - start
