"""The paper's Table 1 figures that the docs' prose retypes (ranges, counts) agree with ``rgsd_eval.paper``, the one
copy of the paper's Table 1 in the code.

Each entry of ``PROSE`` is a page, the sentence's text with ``{}`` where the figures stand, and how to compute them
from ``PAPER_IMITATION``; the page must hold the text with the computed figures (whitespace and line breaks aside),
so a figure typed wrong, or a page edited away from the paper, fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from rgsd_eval.paper import PAPER_CATEGORIES, PAPER_IMITATION, PAPER_LABELS

REPO = Path(__file__).resolve().parents[1]
IMITATION_METHODS = ("rgsd", "ase", "calm", "meta-motivo")
"""The paper's reference-grounded methods (its imitation baselines and RGSD); DIAYN and METRA are not."""
WORDS = {0: "none", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def errs(*methods: str) -> list[float]:
    """The paper's ERR (cm) of ``methods`` in every category."""
    return [PAPER_IMITATION[m][c][0] for m in methods for c in PAPER_CATEGORIES]


def span(values: list[float]) -> str:
    """A range "lo-hi" in whole cm, as the prose writes one."""
    return f"{round(min(values))}-{round(max(values))}"


def rgsd_mean() -> str:
    """RGSD's mean ERR over the five categories in whole cm."""
    values = errs("rgsd")
    return str(round(sum(values) / len(values)))


def rgsd_lowest() -> tuple[str, str, str, str]:
    """(categories where RGSD's ERR is the lowest, in words; the method and category of the exception when there is
    one; categories where its FID is the lowest, in words)."""
    lowest = {
        key: [c for c in PAPER_CATEGORIES if min(PAPER_IMITATION, key=lambda m: PAPER_IMITATION[m][c][i]) == "rgsd"]
        for key, i in (("err", 0), ("fid", 1))
    }
    (other,) = [c for c in PAPER_CATEGORIES if c not in lowest["err"]]
    better = min(PAPER_IMITATION, key=lambda m: PAPER_IMITATION[m][other][0])
    return WORDS[len(lowest["err"])], PAPER_LABELS[better], other, WORDS[len(lowest["fid"])]


PROSE: list[tuple[str, str, Callable[[], str | tuple[str, ...]]]] = [
    ("docs/results.md", "the paper's Table 1 has it at {} cm", lambda: span(errs("metra"))),
    ("docs/results.md", "The paper's levels ({} cm for the grounded methods)", lambda: span(errs(*IMITATION_METHODS))),
    (
        "docs/results.md",
        "In the paper's Table 1 RGSD has the lowest error in {} of five categories ({}'s {} is lower) and the lowest "
        "FID in {};",
        rgsd_lowest,
    ),
    ("docs/reproduce.md", "the paper's {} cm is not reached", lambda: span(errs("rgsd"))),
    ("docs/reproduce.md", "Not the paper's levels (ERR near {} cm:", rgsd_mean),
    ("docs/getting-started.md", "it is far from the paper's {} cm", rgsd_mean),
    (
        "packages/rgsd-agents/src/rgsd_agents/presets/reproduce/cpu.yaml",
        "the paper's levels (ERR near {} cm:",
        rgsd_mean,
    ),
]
"""(page, its text with {} for each figure, the figures from the paper's Table 1)."""


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("page, text, figures", PROSE, ids=[f"{p}: {t[:40]}" for p, t, _ in PROSE])
def test_a_paper_figure_retyped_in_prose_is_the_paper_s(page, text, figures):
    values = figures()
    expected = text.format(*(values if isinstance(values, tuple) else (values,)))
    assert expected in _flat((REPO / page).read_text()), f"{page}: expected the paper's figures: {expected!r}"


def test_the_figures_are_computed_from_the_paper_s_table():
    """Known values of paper.tex's Table 1, so a change to the computation shows here."""
    assert span(errs("metra")) == "42-52"
    assert span(errs(*IMITATION_METHODS)) == "7-16"
    assert span(errs("rgsd")) == "7-8" and rgsd_mean() == "7"
    assert rgsd_lowest() == ("four", "CALM", "walk", "none")
