"""Every table of figures in the README, the docs and the packages' READMEs either is generated from the committed
files or names a committed source whose numbers its figures must be among.

Most tables of measured figures are generated (``<!-- results: NAME -->``, ``docs/hooks/results_tables.py``): each of
their cells is written from named key paths of named files, and ``tests/test_docs_reference.py`` fails while a page's
table differs from what its files give. This test skips them, as it skips the reference tables generated from the
code.

The tables written by hand name their evidence in an HTML comment on one of the lines just above them:

    <!-- source: docs/results/simulator/timestep_choice.txt packages/rgsd-envs/src/rgsd_envs/motion/demo.py -->

and every number in such a table's body (the first column, a row's label, aside) must be one of the numbers of its
sources as the table rounds it: a JSON value or key, a CSV cell, or a number in a text file, taken as it is or in
the units tables use (m as cm, a fraction as a percentage, thousands and millions written as k and M). That is a
weak check: it catches a number that no source holds anywhere (a figure typed in by hand, a table left behind by a
new run whose numbers all changed), but not a number moved to another cell, two cells swapped, or a figure replaced
by another number the sources happen to hold. A table of figures that has to be exact is generated instead. Tables
without a committed source are listed in ``UNTRACED``, with why; the list only shrinks.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = (
    "README.md",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")),
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "packages").glob("*/README.md")),
)
"""The pages whose tables may hold measured figures: the README, every docs page, the packages' READMEs."""
SOURCE = re.compile(r"<!--\s*source:\s*(.+?)\s*-->")
SCALES = (1.0, 100.0, 0.01, 1e-3, 1e-6, 10.0, 0.1)
"""Unit changes between a source and a table: m -> cm, fraction -> %, -> k, -> M, mm <-> cm."""
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s?[kM](?![a-zA-Z]))?")
LEADING_FIGURE = re.compile(r"^\**[-+]?\d")
"""A first cell that starts with a number is a figure, not a row's label."""


def _load_hook() -> ModuleType:
    """``docs/hooks/reference.py`` (a script, loaded from its file): its markers say which tables are generated."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook", REPO / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


HOOK = _load_hook()
UNTRACED = {
    ("docs/results.md", "option | what it does | measured outcome"):
        "none kept: the runs of most rows were not committed; a deleted option's code is in git history, a setting of "
        "an option that remains (env.deviation.metric, env.deviation.min, pretrain.negatives, ppo.minibatch_size, "
        "ppo.actor_lr) reruns with `--set <option>=<value>` on the run the row names, and the PGS and armature rows cite "
        "sim_step.txt and timestep_choice.txt in their cells",
}  # fmt: skip
"""(page, header row) -> why its tables have no committed source, or the command that would make one (one entry
serves every table of the page with that header)."""
REFERENCE = {
    ("docs/development.md", "quick run | measures"): "what each benchmark measures",
    ("docs/environments.md", " | "): "the env's spaces and settings",
    ("docs/evaluation.md", "flag | meaning"): "rgsd eval's flags",
    ("docs/training.md", "column | states scored against z_m"): "the reward-sharpness probes and their settings",
    ("docs/evaluation.md", " | `quick` (default) | `paper`"): "the two protocols' settings",
    ("docs/evaluation.md", "metric | `metrics.json` field | per rollout | per clip, category, all"): "metric definitions",
    ("docs/methods.md", "method | train with | reward | latent while training | a clip's latent in `rgsd eval`"):
        "the methods' presets and rules",
    ("docs/methods.md", "method | property asserted"): "the known-answer tests' thresholds",
    ("docs/methods.md", "method | the paper | rgsd | why, and the paper's setting"): "settings beside the papers'",
    ("docs/training.md", "preset | for"): "the presets' settings",
    ("docs/training.md", "group | what"): "TensorBoard's groups",
    ("docs/training.md", " | name | shape (float32) | what"): "the exported ONNX file's inputs and outputs",
    ("docs/viewer.md", "Control | What it does"): "the viewer's controls",
}  # fmt: skip
"""(page, header row) -> what its numbers are: tables of settings, definitions and thresholds, not measurements.
Every other table with numbers is a table of figures and needs a source or an ``UNTRACED`` entry."""


@dataclass
class Table:
    """One markdown table of a page: where it is, its header, body rows and named sources."""

    page: str
    line: int
    header: str
    rows: list[list[str]]
    sources: list[str]


def generated_lines(lines: list[str]) -> set[int]:
    """The indices of the lines of generated tables (``docs/hooks/reference.py``): from a marker line to its
    ``<!-- end generated -->``. ``tests/test_docs_reference.py`` checks them against the code and the results."""
    out: set[int] = set()
    start = None
    for i, line in enumerate(lines):
        marker = HOOK.MARKER.fullmatch(line)
        if marker and marker.group(1) in HOOK.KINDS:
            start = i
        elif line == HOOK.END and start is not None:
            out.update(range(start, i + 1))
            start = None
    return out


def tables(page: str) -> Iterator[Table]:
    """The markdown tables of ``page`` (a header, a ``|---|`` rule, body rows), with the source comment above; the
    tables generated from the code are left out."""
    lines = (REPO / page).read_text().splitlines()
    generated = generated_lines(lines)
    i = 0
    while i < len(lines) - 1:
        if i in generated:
            i += 1
        elif lines[i].startswith("|") and re.match(r"^\|[-:| ]+\|$", lines[i + 1].strip()):
            header = " | ".join(c.strip() for c in lines[i].strip().strip("|").split("|"))
            sources = [s for ln in lines[max(0, i - 3) : i] for m in SOURCE.finditer(ln) for s in m.group(1).split()]
            rows, j = [], i + 2
            while j < len(lines) and lines[j].startswith("|"):
                rows.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            yield Table(page, i + 1, header, rows, sources)
            i = j
        else:
            i += 1


def _walk(obj: object) -> Iterator[float]:
    if isinstance(obj, bool) or obj is None:
        return
    if isinstance(obj, (int, float)):
        yield float(obj)
    elif isinstance(obj, str):
        yield from _text_numbers(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _text_numbers(str(k))
            yield from _walk(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _walk(v)


def _text_numbers(text: str) -> Iterator[float]:
    """Each number written in ``text``; one written with k or M ("82 M") also as its value (82e6)."""
    for m in re.finditer(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(\s?[kM](?![a-zA-Z]))?", text):
        number = m.group()[: m.start(1) - m.start()] if m.group(1) else m.group()
        try:
            value = float(number.replace(",", ""))
        except ValueError:
            continue
        yield value
        if m.group(1):
            yield value * {"k": 1e3, "M": 1e6}[m.group(1).strip()]


def source_numbers(paths: list[str]) -> list[float]:
    """Every number of the committed files: JSON values and keys, or the numbers written in a text file."""
    out: list[float] = []
    for rel in paths:
        path = REPO / rel
        assert path.is_file(), f"{rel}: named as a source but not committed"
        text = path.read_text()
        if path.suffix == ".json":
            out += list(_walk(json.loads(text)))
        else:
            out += list(_text_numbers(text))
    return out


def cell_numbers(cell: str) -> Iterator[tuple[float, int, str]]:
    """(value, decimals shown, text) of each number in a table cell; "32.4 M" is 32.4e6 shown to 0.1e6."""
    cell = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`", "", cell)  # links and code name things, they are not figures
    for m in NUMBER.finditer(cell.replace("**", "")):
        text = m.group().strip()
        suffix = text[-1] if text[-1] in "kM" else ""
        digits = text.rstrip("kM").strip().replace(",", "")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        scale = {"k": 1e3, "M": 1e6, "": 1.0}[suffix]
        yield float(digits) * scale, decimals - round(math.log10(scale)), text


def traced(value: float, decimals: int, candidates: list[float]) -> bool:
    """Whether ``value``, shown to ``decimals`` places (negative: to tens, thousands...), is a candidate as rounded,
    in one of ``SCALES``."""
    step = 10.0 ** (-decimals)
    return any(abs(c * s - value) <= step / 2 + 1e-9 * max(1.0, abs(value)) for c in candidates for s in SCALES)


def untraced_cells(table: Table) -> list[str]:
    """The body cells' numbers that no source holds (a first column of row labels is not checked; one of figures
    is)."""
    candidates = source_numbers(table.sources)
    bad = []
    for row in table.rows:
        for cell in row if LEADING_FIGURE.match(row[0]) else row[1:]:
            bad += [text for value, dec, text in cell_numbers(cell) if not traced(value, dec, candidates)]
    return bad


def _has_numbers(cell: str) -> bool:
    return next(cell_numbers(cell), None) is not None


def _all_tables() -> list[Table]:
    return [
        t
        for page in PAGES
        for t in tables(page)
        if (t.page, t.header) not in REFERENCE and any(_has_numbers(c) for r in t.rows for c in r[1:])
    ]


@pytest.mark.parametrize("table", _all_tables(), ids=lambda t: f"{t.page}:{t.line}")
def test_every_figure_of_a_results_table_is_in_its_committed_source(table):
    if not table.sources:
        assert (table.page, table.header) in UNTRACED, (
            f"{table.page}:{table.line}: a table of figures with no <!-- source: ... --> comment above it and not "
            f"listed as untraced: {table.header!r}"
        )
        return
    bad = untraced_cells(table)
    assert not bad, f"{table.page}:{table.line}: figures not in {table.sources}: {bad}"


def test_the_reference_list_names_only_tables_that_exist():
    present = {(page, t.header) for page in PAGES for t in tables(page)}
    assert set(REFERENCE) <= present, f"gone, drop from REFERENCE: {sorted(set(REFERENCE) - present)}"


def test_the_untraced_list_names_only_tables_still_untraced():
    untraced = {(t.page, t.header) for t in _all_tables() if not t.sources}
    assert set(UNTRACED) <= untraced, f"traced or gone, drop from UNTRACED: {sorted(set(UNTRACED) - untraced)}"


def test_an_edited_figure_is_caught(tmp_path):
    """The check fails when a number of a traced table is changed by hand to one that no source holds (the only
    edit it can see: the module docstring says what it misses)."""
    traced_tables = [t for t in _all_tables() if t.sources]
    assert traced_tables, "no traced table to check"
    table = traced_tables[0]
    assert not untraced_cells(table)
    row = next(r for r in table.rows if any(_has_numbers(c) for c in r[1:]))
    col = next(i for i, c in enumerate(row) if i and _has_numbers(c))
    value, dec, text = next(cell_numbers(row[col]))
    candidates = source_numbers(table.sources)
    # a figure typed in by hand (one that no number of the source happens to round to: the check can only see those)
    edited = next(
        v for k in range(1, 50) if not traced(v := round(value * (1 + 0.07 * k), max(dec, 0)), dec, candidates)
    )
    row[col] = row[col].replace(text, f"{edited:.{max(dec, 0)}f}", 1)
    assert untraced_cells(table) == [f"{edited:.{max(dec, 0)}f}"]


def test_numbers_are_read_as_tables_write_them():
    assert [(v, d) for v, d, _ in cell_numbers("**181,309** (23,104)")] == [(181309.0, 0), (23104.0, 0)]
    assert [(v, d) for v, d, _ in cell_numbers("32.4 M")] == [(32.4e6, -5)]
    assert list(cell_numbers("[link 3](x.md) `--set seed=4`")) == []
    assert traced(15.7, 1, [0.157]) and traced(32.4e6, -5, [32374784.0]) and not traced(15.8, 1, [0.157])


def test_the_evaluation_estimate_uses_the_committed_clip_scaling_rate():
    """The rate ``rgsd eval`` estimates its time with is the one ``benchmarks/clip_scaling.py`` measured and the
    results page shows (its first row: the quick protocol run on 20 clips)."""
    from rgsd_eval.evaluate import EVAL_WORLD_STEPS_PER_SECOND

    rows = json.loads((REPO / "docs/results/clip_scaling.json").read_text())["rows"]
    measured = [r["eval"]["world_steps_per_s"] for r in rows if r["eval"].get("measured_here")]
    assert measured and measured[0] == EVAL_WORLD_STEPS_PER_SECOND
