"""The docs site's configuration reference (docs/hooks/reference.py) lists every field the dataclasses have."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

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
