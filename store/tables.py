"""The summary laid out like the paper's tables: methods as rows grouped by algorithm,
environments as columns, ``mean ± ci95``, the best per algorithm and environment in bold
(and :func:`latex_rows`, any plain rows as a LaTeX tabular).

Columns are environment families (a user's Hopper-v4 sits beside the published Hopper-v2):
a header names the version when its column has one, and a cell names its own when the
column mixes several. Like the paper, at most :data:`COLUMNS_PER_TABLE` environments go in
one table; more make further tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from store.summary import POOLED, SummaryRow, method_label
from store.tasks import env_version

COLUMNS_PER_TABLE = 4


@dataclass(frozen=True)
class Layout:
    """One table's grid: row labels in order (None: the gap between algorithms), columns, cells."""

    columns: list[str]
    """Environment families."""
    headers: list[str]
    rows: list[str | None]
    cells: dict[tuple[str, str], tuple[str, bool]]
    """(row label, family) → (text, bold)."""


def _row_label(row: SummaryRow, mixed_sources: bool) -> str:
    label = method_label(row.algo, row.correction, row.divergence, row.sampler, row.variant)
    return f"{label} [{row.source}]" if mixed_sources else label


def layouts(rows: list[SummaryRow], pm: str) -> list[Layout]:
    """The summary as paper-style grids of at most :data:`COLUMNS_PER_TABLE` environments each."""
    families = sorted({r.env_family for r in rows})
    mixed_sources = len({r.source for r in rows}) > 1
    versions = {f: sorted({r.env for r in rows if r.env_family == f}) for f in families}
    labels: list[str | None] = []
    previous_algo = None
    for row in rows:  # in the summary's order: by algorithm, then method
        label = _row_label(row, mixed_sources)
        if label in labels:
            continue
        if previous_algo is not None and row.algo != previous_algo:
            labels.append(None)
        labels.append(label)
        previous_algo = row.algo
    best: dict[tuple[str, str], float] = {}
    for row in rows:  # a task's rows share its budget: the best is chosen among them alone
        key = (row.algo, row.env_family)
        if not math.isnan(row.mean):
            best[key] = max(best.get(key, -math.inf), row.mean)
    cells: dict[tuple[str, str], tuple[str, bool]] = {}
    for row in rows:
        unevaluated = f", {row.n_unevaluated} not evaluated" if row.n_unevaluated else ""
        if row.training and row.n_too_short:
            text = f"too short for the window ({row.n_too_short} seed{'s' if row.n_too_short > 1 else ''}{unevaluated})"
        elif row.training and row.n_short and row.budget is not None:
            text = f"none at {row.budget:,} ({row.n_short} short{unevaluated})"
        elif row.training:
            text = "no evaluations"
        else:
            unit = "runs" if row.correction == POOLED else "seeds"
            text = f"{row.mean:.2f}" if math.isnan(row.ci95) else f"{row.mean:.2f} {pm} {row.ci95:.2f}"
            if row.n_missing:  # the row's own count, where the note's total would not say which row lacks seeds
                text += f" ({row.n_seeds} of {row.n_seeds + row.n_missing} {unit})"
            elif math.isnan(row.ci95):
                text += f" (1 {unit[:-1]})"
        if len(versions[row.env_family]) > 1:
            text += f" ({env_version(row.env)})"
        is_best = not row.training and row.mean == best.get((row.algo, row.env_family))
        cells[(_row_label(row, mixed_sources), row.env_family)] = (text, is_best)
    out = []
    for start in range(0, len(families), COLUMNS_PER_TABLE):
        columns = families[start : start + COLUMNS_PER_TABLE]
        headers = [versions[f][0] if len(versions[f]) == 1 else f for f in columns]
        out.append(Layout(columns, headers, labels, cells))
    return out


def _grid(layout: Layout, bold: Callable[[str], str]) -> list[list[str] | None]:
    lines: list[list[str] | None] = []
    for label in layout.rows:
        if label is None:
            lines.append(None)
            continue
        cells = []
        for family in layout.columns:
            text, is_best = layout.cells.get((label, family), ("", False))
            cells.append(bold(text) if is_best and text else text)
        lines.append([label, *cells])
    return lines


def markdown(rows: list[SummaryRow], window: str) -> str:
    """GitHub-flavoured Markdown tables (algorithms follow each other without a gap); ``window``
    says which evaluations make a final return (``last 10 evaluations``)."""
    parts = []
    for layout in layouts(rows, "±"):
        text = "| Method | " + " | ".join(layout.headers) + " |\n"
        text += "|---|" + "|".join(":---:" for _ in layout.headers) + "|\n"
        for line in _grid(layout, lambda s: f"**{s}**"):
            if line is not None:
                text += "| " + " | ".join(cell.replace("|", "\\|") for cell in line) + " |\n"
        parts.append(text)
    note = f"Mean over seeds of the {window} ± its 95% Student-t interval over the seeds (the paper's ±, the"
    if _pooled(rows):  # --group-by: a row pools every method's runs of one value
        note = "Mean over runs (every method's runs of a value pooled, a seed once per method: n_seeds counts runs)"
        note += f" of the {window} ± its 95% Student-t interval over the runs (the paper's ±, the"
    note += " mean per-point half-width, is the paper_pm column of --format csv or json)."
    note += " Bold: the best per algorithm and environment.\n"
    return "\n".join(parts) + ("\n" if parts else "") + note + budget_note(rows)


def budget_note(rows: list[SummaryRow]) -> str:
    """Where each task's methods meet, and what a column mixing budgets or seeds short of them means."""
    budgets = sorted({(r.algo, r.env_family, r.budget) for r in rows if r.budget is not None})
    if not budgets:
        return ""
    shown = "; ".join(f"{algo} {family} at {step:,} steps" for algo, family, step in budgets)
    unit = "run" if _pooled(rows) else "seed"
    text = f"Each task's methods are compared at one budget, every {unit} cut there: {shown}."
    mixed = sorted({f for _, f, _ in budgets if len({b for _, g, b in budgets if g == f}) > 1})
    if mixed:
        text += f" The {', '.join(mixed)} column{'s mix' if len(mixed) > 1 else ' mixes'} budgets: compare within"
        text += " an algorithm, not across."
    short = sum(r.n_short for r in rows)
    if short:
        text += f" {_count(short, unit)} short of the budget (still training, or ended before it)"
        text += f" {_are(short)} left out; a row with none there says so."
    too_short = sum(r.n_too_short for r in rows)
    if too_short:
        text += f" {_count(too_short, unit)} too short for the window (no evaluation in it: all at or before learning"
        text += f" starts, or none up to the budget) {_are(too_short)} left out."
    unevaluated = sum(r.n_unevaluated for r in rows)
    if unevaluated:
        text += f" {_count(unevaluated, unit)} with no evaluation (queued, or ended before the first)"
        text += f" {_are(unevaluated)} left out."
    if short or too_short or unevaluated:
        text += f' A row missing {unit}s says "(n of N {unit}s)".'
    return text + "\n"


def _pooled(rows: list[SummaryRow]) -> bool:
    """Whether the rows pool every method's runs of a setting's value (``--group-by``): over runs, not seeds."""
    return any(r.correction == POOLED for r in rows)


def _unit(rows: list[SummaryRow]) -> str:
    """What a row's statistics are over: seeds, or runs where rows pool every method's runs (``--group-by``)."""
    return "runs (every method's runs of a value pooled)" if _pooled(rows) else "seeds"


def _count(count: int, unit: str) -> str:
    return f"{count} {unit}{'s' if count != 1 else ''}"


def _are(count: int) -> str:
    return "are" if count != 1 else "is"


_LATEX_SPECIALS = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}"}


def _tex(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(c, c) for c in text)


def latex(rows: list[SummaryRow], window: str) -> str:
    """``table*`` environments with booktabs rules, as in the paper (needs ``\\usepackage{booktabs}``)."""
    parts = []
    for layout in layouts(rows, "$\\pm$"):
        names = " & ".join(rf"\textbf{{{_tex(h)}}}" for h in layout.headers)
        caption = (
            f"Average return of the {_tex(window)} over the {_unit(rows)} for "
            f"{', '.join(_tex(h) for h in layout.headers)}. $\\pm$: the 95\\% Student-t interval of that average"
            " over them (the paper's $\\pm$, the mean per-point half-width, is the paper\\_pm column of the CSV"
            " export). Bold values represent the maximum under each baseline algorithm and environment. "
            + _tex(budget_note(rows).strip())
        ).strip()
        lines = [
            r"\begin{table*}[t]",
            r"    \centering",
            f"    \\caption{{{caption}}}",
            f"    \\begin{{tabular}}{{l{'c' * len(layout.headers)}}}",
            r"    \toprule",
            f"    \\textbf{{Method}} & {names} \\\\",
            r"    \midrule",
        ]
        for line in _grid(layout, lambda s: rf"\textbf{{{s}}}"):
            if line is None:
                lines.append(r"    \addlinespace")
            else:
                lines.append("    " + " & ".join([_tex(line[0]), *line[1:]]) + r" \\")
        lines += [r"    \bottomrule", r"    \end{tabular}", r"\end{table*}"]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def latex_rows(columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    """A booktabs ``tabular`` of plain rows (numbers to 4 significant digits)."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else _tex(str(value))

    lines = [f"\\begin{{tabular}}{{{'l' * len(columns)}}}", r"\toprule", " & ".join(map(_tex, columns)) + r" \\"]
    lines.append(r"\midrule")
    lines += [" & ".join(cell(v) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)
