"""``?``: every key, what it does, and how to filter."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """\
# offpoc dashboard

| key | does |
|---|---|
| `1`–`5` | Runs, Curves, Quantities, Compare, Detail |
| `↑` `↓` / mouse | move the cursor (the run Quantities and Detail show), in every view |
| `space` | select or unselect the run under the cursor |
| `a` | select every run the filter shows, or clear the selection |
| `/` | filter (below), e.g. `correction=acoffpoc start_steps=500 return>1000`; empty clears |
| `s` / `S` / click a header | sort by the next column shown / reverse the order / that column; the header says which |
| `enter` | the run's detail: a failure first, then status, config, losses, Q, α, SPS |
| `PgUp` `PgDn` `Home` `End` | Detail: scroll its text; Runs and Compare: page through the table |
| `x` `x` / `r` | stop (a second `x` confirms; checkpoint, resumable) / resume the selected runs, or the cursor's |
| `g` | Curves: by method, by each setting runs differ in, off; Compare: rows by method or by a setting |
| `b` | the band (Curves grouped, Compare): 95% t-interval, ±1 standard error, min–max, none |
| `w` | x axis: environment steps or wall time |
| `p` | Curves: also the imported curves (published, zoo), hidden while runs trained here exist |
| `e` | Compare: the next algo · env |
| `t` / `esc` | Compare: type a threshold (enter applies) / back to the view |
| `m` | smoothing: none, 5 or 10 evaluations |
| `h` | λ over training: quantile lines or heatmap |
| `[` `]` | the λ histogram's interval: earlier, later |
| `v` | Quantities: the next logged quantity, where a correction logs more than λ |
| `?` | this help (`↑` `↓` `PgUp` `PgDn` `Home` `End` scroll it) · `q` quit |

The runs table's columns: id, name, algo, env, correction (and sampler), divergence, seed, status,
done (share of the steps), steps/s, ETA, the last and best evaluation return, λ̄ (the mean weight over
the last 1,000 updates); a narrow terminal keeps the first of id, status, done, return, λ̄, env,
correction, algo, seed, name, the rest.

The filter keeps the runs meeting every term: a bare word (in name, algo, env or correction);
`key=a,b` (either; != negates) on a column (algo, env, correction, divergence, seed, id, status,
source, sampler, tag, note, name), a setting of the config (`batch_size>=128`, `layer_norm=true`)
or a result: return (latest evaluation), best, steps, budget, updates, lambda, sps (`steps<1e5`,
`return>1000`); `<` `<=` `>` `>=` take a number (100k, 1M). `offpoc ps`, `export` and `plot` take the
same filter as `--where`.

Curves show the selected runs, or every run the filter shows when none is selected.
Compare shows one algo on one env family at one budget: the largest step every run trained
here has reached (`offpoc dashboard --until STEP` asks for another); a method with no seed
there is training. The threshold defaults to the baseline's final return. A final return is the
mean over seeds of each seed's last 10 evaluations (within the last 10% of steps, after learning
starts) ± a 95% t interval; vs baseline, Welch p and P(>base) are against the baseline of the env
and source ("–" under 2 seeds a side); p is one look at the seeds there are, not a decision if
looked at again (`--decide`). Columns past the table's edge scroll into view (→).

A study's lines (`run --decide`): each verdict's *difference* is the method's mean minus the
baseline's over the seeds so far, in return units; its *interval* holds wherever the study stopped,
at the confidence printed (Holm's level: 95% with one comparison, more with several open). Each
interim's *|d| ≤ b* (or *> b*) is that difference against the *boundary* it had to pass to decide,
on the same scale (∞: it could not decide yet).
"""


def help_text() -> Group:
    """:data:`HELP` compact for a terminal: a key a line, its meaning wrapped beside it (a Markdown table takes
    three rows a key), then the notes."""
    keys = Table.grid(padding=(0, 2))
    keys.add_column(style="bold", no_wrap=True)
    keys.add_column()
    title, notes = Text(), Text()
    for line in HELP.splitlines():
        if line.startswith("# "):
            title.append(line[2:], style="bold")
        elif line.startswith("| key") or line.startswith("|---"):
            continue
        elif line.startswith("| "):
            key, does = (cell.strip().replace("`", "") for cell in line.strip("| ").split(" | ", 1))
            keys.add_row(key, does)
        else:
            notes.append(line.replace("`", "").replace("*", "") + "\n")
    return Group(title, keys, Text(), notes)


class HelpScreen(ModalScreen[None]):
    """Every key on one screen, scrolled by the keys that scroll: ↑ ↓, PageUp, PageDown, Home, End (they reach the
    help alone: the runs behind it do not move)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
        *(Binding(key, f"scroll('{key}')", show=False, priority=True)
          for key in ("up", "down", "pageup", "pagedown", "home", "end")),
    ]  # fmt: skip

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_text())

    def on_mount(self) -> None:
        self.query_one("#help").focus()

    def action_scroll(self, key: str) -> None:
        scroller = self.query_one("#help", VerticalScroll)
        {"up": scroller.scroll_up, "down": scroller.scroll_down, "pageup": scroller.scroll_page_up,
         "pagedown": scroller.scroll_page_down, "home": scroller.scroll_home, "end": scroller.scroll_end,
         }[key](animate=False)  # fmt: skip
