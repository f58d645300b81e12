"""The docs site's generated tables (docs/hooks/reference.py): every field the config dataclasses have, every
subcommand and argument the command-line programs have, and the tables of measured figures as their committed files
give them (docs/hooks/results_tables.py)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import tomllib

from rgsd_agents.config import TrainConfig
from rgsd_agents.downstream.runner import DownstreamConfig
from rgsd_agents.pretraining.config import PretrainConfig
from rgsd_agents.reproduce.scale import ReproduceScale
from rgsd_eval.config import EvalConfig

ROOT = Path(__file__).resolve().parents[1]
CONFIGURATION = ROOT / "docs" / "configuration.md"
COMMAND_CONFIGS = {
    "rgsd train": TrainConfig,
    "rgsd pretrain": PretrainConfig,
    "rgsd downstream": DownstreamConfig,
    "rgsd eval": EvalConfig,
    "rgsd reproduce": ReproduceScale,
}
"""The config each command's ``--set`` sets: the configuration reference has every one of them."""
COMMANDS = ROOT / "docs" / "commands.md"


def _programs() -> dict[str, str]:
    """Each program the packages install (``[project.scripts]``) and each module they run with ``python -m`` (a
    ``__main__.py``) -> the module whose ``build_parser`` parses it."""
    out = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        scripts = tomllib.loads(pyproject.read_text())["project"].get("scripts", {})
        out.update({name: target.partition(":")[0] for name, target in scripts.items()})
    for src in sorted(ROOT.glob("packages/*/src")):
        for main in sorted(src.rglob("__main__.py")):
            package = ".".join(main.parent.relative_to(src).parts)
            out[f"python -m {package}"] = f"{package}.__main__"
    return out


PROGRAMS = _programs()


@pytest.fixture(scope="module")
def hook(load_script):
    return load_script(ROOT / "docs" / "hooks" / "reference.py", "docs_reference_hook")


def _keys(instance: object, prefix: str = "") -> dict[str, object]:
    """Dotted key -> default of every leaf field of a default instance, nested dataclasses followed."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_keys(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def _table_rows(markdown: str) -> dict[str, str]:
    """Key -> default cell of the reference's rows (| `key` | `type` | `default` | meaning |)."""
    rows = re.findall(r"^\| `([^`]+)` \| `[^`]*` \| (?:`([^`]*)`)? \|", markdown, flags=re.M)
    return dict(rows)


def _rows_with_meaning(markdown: str) -> dict[str, str]:
    """Key -> meaning cell of the reference's rows."""
    return dict(re.findall(r"^\| `([^`]+)` \| `[^`]*` \| (?:`[^`]*`)? \| (.*) \|$", markdown, flags=re.M))


def test_the_configuration_page_has_every_commands_config():
    markers = re.findall(r"^<!-- config: (\S+) -->$", CONFIGURATION.read_text(), flags=re.M)
    for command, cls in COMMAND_CONFIGS.items():
        assert f"{cls.__module__}:{cls.__name__}" in markers, (
            f"{command}: {cls.__name__} is not on {CONFIGURATION.name}"
        )


@pytest.mark.parametrize("cls", list(COMMAND_CONFIGS.values()), ids=lambda c: c.__name__)
def test_the_reference_lists_every_field_with_its_default(hook, cls):
    """Every leaf field, with the default a default instance has: never the source text of an expression the hook
    could not evaluate (``QUICK.rollouts``, ``field(...)``)."""
    walker = hook.Walker(hook.Index())
    rows = _table_rows("\n".join(hook.config_tables(walker, *walker.dataclass_at(cls.__module__, cls.__name__))))
    expected = _keys(cls())
    assert set(rows) == set(expected), set(rows) ^ set(expected)
    for key, value in expected.items():
        value = list(value) if isinstance(value, tuple) else value
        if isinstance(value, (bool, int, float, str, list, dict)) or value is None:
            assert rows[key] == hook._show(value), key


def test_every_field_has_a_meaning(hook):
    walker = hook.Walker(hook.Index())
    text = [
        hook.config_tables(walker, *walker.dataclass_at(c.__module__, c.__name__)) for c in COMMAND_CONFIGS.values()
    ]
    text.append(hook.method_tables(walker, "rgsd_agents.methods"))
    rows = _rows_with_meaning("\n".join(line for lines in text for line in lines))
    assert len(rows) > 100
    blank = sorted(key for key, meaning in rows.items() if not meaning.strip())
    assert not blank, f"fields without a docstring under them: {blank}"


def test_every_method_config_gets_a_section(hook):
    from rgsd_agents.methods import METHODS

    text = "\n".join(hook.method_tables(hook.Walker(hook.Index()), "rgsd_agents.methods"))
    for name, method in METHODS.items():
        assert f"`method.options` of `{name}`: {method.CONFIG.__name__}" in text
        for f in dataclasses.fields(method.CONFIG):
            assert f"`method.options.{f.name}`" in text


def _sections(markdown: str) -> dict[str, str]:
    """Heading's command (`` ## `rgsd train` ``) -> the text under it, up to the next heading."""
    parts = re.split(r"^#+ `([^`]+)`$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _commands(hook, parser, name: str):
    """(command line, parser) of a program and of every subcommand under it."""
    yield name, parser
    for sub, _, subparser in hook.subcommands(parser):
        yield from _commands(hook, subparser, f"{name} {sub}")


def test_the_command_reference_has_every_program():
    assert {"rgsd", "rgsd-motions", "rgsd-eval", "python -m rgsd_agents.pretrained"} <= set(PROGRAMS)
    markers = re.findall(r"^<!-- commands: (\S+) -->$", COMMANDS.read_text(), flags=re.M)
    for program, module in PROGRAMS.items():
        assert f"{module}:build_parser" in markers, f"{program} is not on {COMMANDS.name}"


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_every_argument_has_help_and_a_row_under_its_command(hook, program):
    target = f"{PROGRAMS[program]}:build_parser"
    parser = hook.parser_of(target)
    assert parser.prog == program
    sections = _sections("\n".join(hook.command_tables(target)))
    no_help, missing = [], []
    for name, sub in _commands(hook, parser, program):
        assert name in sections, f"no section for {name}"
        rows = re.findall(r"^\| `([^`]+)` \|", sections[name], flags=re.M)
        for action in hook.documented_actions(sub):
            label = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if not (action.help or "").strip():
                no_help.append(label)
            written = action.option_strings or [action.metavar or action.dest]
            if not any(row.split(" ")[0].rstrip(",") in written for row in rows):
                missing.append(label)
    assert not no_help, f"arguments without help text: {no_help}"
    assert not missing, f"arguments missing from the command reference: {missing}"
    assert len(sections) > (5 if program == "rgsd" else 0)


def test_the_committed_tables_are_those_the_code_generates(hook):
    """Each page holds its generated tables (read complete on GitHub or in an editor), and they match the code."""
    stale = [str(p.relative_to(ROOT)) for p in hook.stale_pages()]
    assert not stale, f"stale generated tables in {stale}: run python docs/hooks/reference.py"


def test_regenerating_replaces_a_committed_table_and_leaves_the_rest(hook):
    marker = "<!-- observation-layout -->"
    fresh = hook.regenerate(f"# Page\n\n{marker}\n\nintro <!-- source: x.json -->\n", "page.md")
    assert fresh.count(hook.END) == 1 and "| `" in fresh and fresh.endswith("intro <!-- source: x.json -->\n")
    stale = fresh.replace("| `", "| `old", 1)
    assert hook.regenerate(stale, "page.md") == fresh == hook.regenerate(fresh, "page.md")


RESULTS_PAGE = ROOT / "docs" / "results.md"


def _block(text: str, name: str) -> tuple[int, int]:
    """(start, end) offsets of the table under ``<!-- results: name -->`` in ``text``."""
    start = text.index(f"<!-- results: {name} -->")
    return start, text.index("<!-- end generated -->", start)


def test_an_edited_results_cell_makes_the_page_stale(hook):
    """A figure typed over, or two figures swapped, in a generated results table: the page is stale, and
    regenerating it gives back the files' figures."""
    page = RESULTS_PAGE.read_text()
    start, end = _block(page, "reproduce-cpu")
    table = page[start:end]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| method")]
    first, second = (row.split(" | ")[1].strip("*") for row in rows[:2])  # the two lowest errors
    assert first != second
    typed_over = page[:start] + table.replace(f"| {rows[0].split(' | ')[1]} |", "| 4.5 |", 1) + page[end:]
    swapped = page[:start] + table.replace(first, "@").replace(second, first).replace("@", second) + page[end:]
    for edited in (typed_over, swapped):
        assert edited != page
        assert hook.regenerate(edited, "results.md") == page


def test_every_results_table_is_on_a_page_and_reads_only_its_files(hook, monkeypatch):
    """Each registered table fills a marker of some page, and reads exactly the files it is registered with (the
    list a reader of ``results_tables.py`` trusts)."""
    tables = hook.results_tables
    used = {m for p in hook.pages() for m in re.findall(r"^<!-- results: (\S+) -->$", p.read_text(), flags=re.M)}
    assert used == set(tables.TABLES), set(tables.TABLES) ^ used
    read: list[str] = []
    real_load = tables.load
    monkeypatch.setattr(tables, "load", lambda rel: read.append(rel) or real_load(rel))
    for name, (render, files) in tables.TABLES.items():
        read.clear()
        assert render() and set(read) == set(files), f"{name}: reads {sorted(set(read))}, registered {files}"


def test_a_missing_results_figure_names_its_file_and_key(hook):
    tables = hook.results_tables
    with pytest.raises(tables.SourceError, match=r"docs/results/demo_seeds.json: no range/clips/demo_fly"):
        tables.at(tables.DEMO_SEEDS, "range", "clips", "demo_fly", "err_cm_min")
    with pytest.raises(tables.SourceError, match=r"docs/results/gpu_h200/profile.txt: nothing matches"):
        tables.number(tables.H200_PROFILE, r"^teleport\s+([\d.]+)$")
    with pytest.raises(hook.MarkerError, match=r"page.md: <!-- results: no-such-table -->: .*no results table"):
        hook.regenerate("<!-- results: no-such-table -->\n", "page.md")
