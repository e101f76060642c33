"""The dashboard's keys: each key, the action it runs and its footer label (``?`` explains them all).

The footer shows the keys every view shares, and fits in 80 columns: the views' numbers are on their tabs,
and each view's own keys are named in its header line (Curves: g, w, m, b, p, e, t; Quantities: v, h, [ ]).
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

from offpoc_tui.dashboard.panes import PANES

KEYS: list[BindingType] = [
    Binding("1", "view('runs')", "Runs", show=False),
    *(Binding(str(number), f"view('{pane.view}')", pane.title, show=False) for number, pane in enumerate(PANES, 2)),
    Binding("slash", "filter", "Filter"),
    Binding("space", "toggle_select", "Select"),
    Binding("a", "select_all", "All/none", show=False),
    Binding("s", "sort", "Sort"),
    Binding("S", "sort_reverse", "Reverse sort", show=False),
    Binding("g", "group", "Group"),
    Binding("w", "wall_time", "Steps/time", show=False),
    Binding("m", "smoothing", "Smooth", show=False),
    Binding("b", "band", "Band", show=False),
    Binding("p", "imported", "Imported", show=False),
    Binding("e", "next_task", "Next algo·env", show=False),
    Binding("t", "threshold", "Threshold", show=False),
    Binding("up", "cursor(-1)", "Up", show=False),
    *(Binding(key, f"page('{key}')", key, show=False, priority=True) for key in ("pageup", "pagedown", "home", "end")),
    Binding("down", "cursor(1)", "Down", show=False),
    Binding("h", "heatmap", "Heatmap", show=False),
    Binding("v", "quantity", "Quantity", show=False),
    Binding("left_square_bracket", "interval(-1)", "Earlier", show=False),
    Binding("right_square_bracket", "interval(1)", "Later", show=False),
    Binding("x", "stop", "Stop"),
    Binding("r", "resume", "Resume"),
    Binding("question_mark", "help", "Help"),
    Binding("q", "quit", "Quit"),
]
