"""The README's examples are the ones a user can run: every sweep listing equals its file, every
command and flag it prints exists, and the docs it points to ship."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from offpoc_tui.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def offpoc_lines() -> list[list[str]]:
    """Every ``offpoc …`` command line of the README's bash blocks, as words, comments dropped."""
    found = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["offpoc"]:
                found.append(words[1:])
    return found


def test_every_sweep_listing_is_its_file() -> None:
    listings = blocks("toml")
    assert listings, "the README lists no sweep"
    for listing in listings:
        name = re.search(r'^name = "(.+)"$', listing, flags=re.M)
        assert name is not None, listing
        assert listing == (ROOT / "sweeps" / f"{name[1]}.toml").read_text()


@pytest.mark.parametrize("words", offpoc_lines(), ids=lambda words: " ".join(words)[:50])
def test_every_printed_command_and_flag_exists(words: list[str]) -> None:
    command = [words[0]] + ([words[1]] if words[0] in ("import", "analyze") else [])
    help_text = CliRunner().invoke(app, [*command, "--help"], terminal_width=200)
    assert help_text.exit_code == 0, (command, help_text.output)
    for flag in (word.split("=")[0] for word in words if word.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text.output), (command, flag)


def test_every_sweep_and_doc_the_readme_names_ships() -> None:
    for path in set(re.findall(r"(?:sweeps|docs|benchmarks)/[\w./-]+\.(?:toml|md|py)", README)):
        assert (ROOT / path).is_file(), path


def test_the_readme_stays_a_manual() -> None:
    assert len(README.splitlines()) <= 260
