"""Every command the README and the docs show parses with the command's own argument parser.

The commands are parsed, never run: a flag renamed or made required in the code fails here, not in a reader's
shell. Code blocks hold whole commands, so every required argument must be there. Inline code in prose often names a
command and one flag of it (`rgsd eval --rollouts`), so there the required options are waived and only the flags
written are checked: each must exist and take the values written, unless the span writes a placeholder
(`--variants N`, `<preset>`).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("packages/*/README.md"))]

FENCE = re.compile(r"```([a-z]*)\n(.*?)```", re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
SHELL_FENCES = ("", "bash", "sh", "shell", "console")
PROGRAMS = ("rgsd", "rgsd-motions", "rgsd-eval", "python", "python3", "torchrun")
PRETRAINED = "python -m rgsd_agents.pretrained"
MODULES = {
    "rgsd_agents.cli": "rgsd",
    "rgsd_envs.motion.cli": "rgsd-motions",
    "rgsd_eval.cli": "rgsd-eval",
    "rgsd_agents.pretrained": PRETRAINED,
}
LAUNCHER = re.compile(r"^(?:\w+=\S*\s+|nohup\s+)*")
"""What may stand before the program: environment settings (``CI=true``) and ``nohup``."""
PLACEHOLDER = re.compile(r"<|\.\.\.|\[| [A-Z]+\b| k\b")
"""What marks a span as a pattern rather than a command: ``<preset>``, ``...``, ``[--seed S]``, ``N``, ``DIR``."""
PROSE_ERRORS = ("are required", "expected one argument", "expected at least one argument")
"""Parser errors a span that names a command and a flag of it, without its values or its subcommand, may give."""


def doc_commands(text: str) -> list[tuple[str, str]]:
    """(kind, command) of each shell command in a Markdown text: "block" from shell code blocks (backslash
    continuations joined), "span" from inline code; commands joined by ``&&``, ``;`` or pipes are split."""
    sources = [("block", body.replace("\\\n", " ")) for lang, body in FENCE.findall(text) if lang in SHELL_FENCES]
    sources += [("span", span) for span in SPAN.findall(FENCE.sub("", text))]
    commands = []
    for kind, source in sources:
        for line in source.splitlines():
            for part in re.split(r"&&|\|\||;|\s\|\s", line.strip().removeprefix("$ ")):
                command = LAUNCHER.sub("", part.split(" #")[0].strip())
                if command.split(" ")[0] in PROGRAMS:
                    commands.append((kind, command))
    return commands


def program_and_args(command: str) -> tuple[str, list[str]] | None:
    """("rgsd" | "rgsd-motions" | "rgsd-eval" | a benchmark script's path, its arguments); None for anything
    else (pytest, pip, a module that is not rgsd's)."""
    words = shlex.split(command)
    if words[0] == "torchrun":
        if "-m" not in words:
            return None  # the launcher named in prose
        words = ["python", *words[words.index("-m") :]]
    if words[0] in ("python", "python3"):
        if len(words) < 2:
            return None
        if words[1] == "-m":
            program = MODULES.get(words[2])
            return (program, words[3:]) if program else None
        return (words[1], words[2:]) if words[1].startswith("benchmarks/") else None
    return words[0], words[1:]


ALL = [(str(doc.relative_to(ROOT)), kind, command) for doc in DOCS for kind, command in doc_commands(doc.read_text())]


class Parsed(Exception):
    """Raised once a parser has accepted the arguments, so that nothing runs."""


def waive_required(parser: argparse.ArgumentParser) -> None:
    """Make every option of ``parser`` and of its subcommands optional (positionals stay as they are)."""
    for action in parser._actions:
        if action.option_strings:
            action.required = False
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                waive_required(sub)


@pytest.fixture
def parse(monkeypatch, capsys, load_script):
    """``parse(program, args, prose=False)``: the parser's error line for ``program args`` (None: parsed), nothing
    run; ``prose``: with the required options waived."""
    argparse_parse = argparse.ArgumentParser.parse_args
    waive = {"on": False}

    def parse_and_stop(self, args=None, namespace=None):
        if waive["on"]:
            waive_required(self)
        argparse_parse(self, args, namespace)  # exits with the error line on stderr, as argparse does
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_and_stop)

    def error(program: str, args: list[str], prose: bool = False) -> str | None:
        waive["on"] = prose
        try:
            if program == "rgsd":
                from rgsd_agents.cli import build_parser
            elif program == "rgsd-motions":
                from rgsd_envs.motion.cli import build_parser
            elif program == "rgsd-eval":
                from rgsd_eval.cli import build_parser
            elif program == PRETRAINED:
                from rgsd_agents.pretrained.__main__ import build_parser
            else:
                path = ROOT / program
                assert path.is_file(), f"no such script: {program}"
                monkeypatch.setattr(sys, "argv", [str(path), *args])
                load_script(path, f"doc_command_{path.stem}").main()
                return "main() returned without parsing its arguments"
            build_parser().parse_args(args)
        except Parsed:
            return None
        except SystemExit as exit_:
            if exit_.code in (0, None):
                return None  # --help
            return (capsys.readouterr().err.strip().splitlines() or [f"exit {exit_.code}"])[-1]
        return "parsed without stopping"

    return error


def test_the_docs_show_commands_of_every_kind():
    kinds = {program_and_args(c)[0].split("/")[0] for _, _, c in ALL if program_and_args(c)}
    assert {"rgsd", "rgsd-motions", "rgsd-eval", "benchmarks"} <= kinds, kinds
    assert sum(kind == "block" for _, kind, _ in ALL) > 100


def test_every_command_in_the_docs_parses(parse):
    failures = []
    for doc, kind, command in ALL:
        target = program_and_args(command)
        if target is None:
            continue
        prose = kind == "span"
        error = parse(*target, prose=prose)
        if prose and error is not None and (any(e in error for e in PROSE_ERRORS) or PLACEHOLDER.search(command)):
            continue
        if error is not None:
            failures.append(f"{doc}: {command}\n    {error}")
    assert not failures, "\n".join(failures)


def test_a_wrong_flag_or_a_missing_required_argument_fails(parse):
    """The check can fail: what the docs must not show is caught."""
    assert parse("rgsd", ["train", "--config", "cpu"]) is None
    assert "unrecognized arguments: --bogus" in parse("rgsd", ["train", "--bogus"])
    missing = parse("benchmarks/gpu_check.py", ["--quick"])
    assert "required: --out" in missing
    assert parse("benchmarks/gpu_check.py", ["--quick", "--out", "x"]) is None
    assert "required: --motions" in parse(PRETRAINED, ["runs/x"])
    assert parse(PRETRAINED, ["runs/x", "--motions", "m", "--about", "{}"]) is None
    # in prose the required options are waived, and a wrong flag still fails
    assert parse("rgsd", ["eval", "--latent", "stored"], prose=True) is None
    wrong = parse("rgsd", ["eval", "--latentx", "stored"], prose=True)
    assert "unrecognized arguments: --latentx" in wrong
    assert doc_commands("`nohup CUDA_VISIBLE_DEVICES=0 rgsd view --pretrained`") == [("span", "rgsd view --pretrained")]
    assert doc_commands("```bash\nrgsd eval --run a \\\n  --out b && rgsd view --pretrained  # live\n```") == [
        ("block", "rgsd eval --run a    --out b"),
        ("block", "rgsd view --pretrained"),
    ]


def test_rgsd_help_gives_the_demo_the_duration_the_readme_measured():
    from rgsd_agents.cli import build_parser

    minutes = re.search(r"about (\d+) minutes on 2 cores", (ROOT / "README.md").read_text()).group(1)
    assert f"about {minutes} minutes on 2 cores" in " ".join(build_parser().format_help().split())  # unwrapped
    measured = json.loads((ROOT / "docs" / "results" / "demo_seeds.json").read_text())["range"]
    # "about N" is the measured range rounded: N within half a minute of it
    assert measured["wall_minutes_min"] - 0.5 <= int(minutes) <= measured["wall_minutes_max"] + 0.5, measured


METHOD_LIST = re.compile(r"method(?:>|&gt;)_paper for ((?:\w+, )*\w+)")
"""A list of the methods' presets in the docs ("<method> or <method>_paper for rgsd, diayn, ...")."""


def test_the_docs_lists_of_the_methods_presets_name_the_registry_s_methods():
    """The comments beside the training commands list the methods by hand: a method added to or renamed in
    ``rgsd_agents.methods`` fails here until the README and the docs name it."""
    from rgsd_agents.config import preset_names
    from rgsd_agents.methods import method_names

    found = [(str(doc.relative_to(ROOT)), m.group(1)) for doc in DOCS for m in METHOD_LIST.finditer(doc.read_text())]
    lists = {"README.md", "docs/getting-started.md", "packages/rgsd-agents/README.md"}
    assert lists <= {doc for doc, _ in found}, found
    wrong = [f"{doc}: {names}" for doc, names in found if names.split(", ") != method_names()]
    assert not wrong, f"lists other than the registry's {', '.join(method_names())}: {wrong}"
    missing = [p for m in method_names() for p in (m, f"{m}_paper") if p not in preset_names()]
    assert not missing, f"presets the lists promise but rgsd_agents/presets lacks: {missing}"
