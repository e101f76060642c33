"""A pane's line of state, redrawn only when its text changes."""

from __future__ import annotations

from textual.visual import VisualType
from textual.widgets import Static


class StateLine(Static):
    """A :class:`~textual.widgets.Static` that the app sets after every poll and key: the same text again costs
    nothing, where a plain ``Static.update`` lays out and renders the whole screen each time (on a store of
    1,440 curves, a fifth of the dashboard's time under a held key)."""

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        if isinstance(content, str) and isinstance(self.content, str) and content == self.content:
            return
        super().update(content, layout=layout)
