"""``?``: every key, what it does, and how to filter."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# offpoc dashboard

| key | does |
|---|---|
| `1`–`5` | Runs, Curves, Quantities, Compare, Detail |
| `↑` `↓` / mouse | move the cursor (the run Quantities and Detail show), in every view |
| `space` | select or unselect the run under the cursor |
| `a` | select every run the filter shows, or clear the selection |
| `/` | filter, e.g. `env=Hopper correction=acoffpoc seed=0,1 source=offpoc`; empty clears |
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
| `?` | this help (`↑` `↓` scroll) · `q` quit |

The runs table's columns: id, name, algo, env, correction (and sampler), divergence, seed, status,
done (share of the steps), steps/s, ETA, the last and best evaluation return, λ̄ (the mean weight over
the last 1,000 updates); a narrow terminal keeps the first of id, status, done, return, λ̄, env,
correction, algo, seed, name, the rest.

Curves show the selected runs, or every run the filter shows when none is selected.
Compare shows one algo on one env family at one budget: the largest step every run trained
here has reached (`offpoc dashboard --until STEP` asks for another); a method with no seed
there is training. The threshold defaults to the baseline's final return (mean of each
seed's last 10 evaluations).

A study's lines (`run --decide`): each verdict's *difference* is the method's mean minus the
baseline's over the seeds so far, in return units; its *interval* holds wherever the study stopped,
at the confidence printed (Holm's level: 95% with one comparison, more with several open). Each
interim's *|d| ≤ b* (or *> b*) is that difference against the *boundary* it had to pass to decide,
on the same scale (∞: it could not decide yet).
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)

    def on_mount(self) -> None:
        self.query_one("#help").focus()  # ↑ ↓ page-up page-down scroll it
