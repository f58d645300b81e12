"""The docs site's configuration reference (docs/hooks/reference.py) lists every field the dataclasses have."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from rgsd_agents.config import TrainConfig
from rgsd_agents.downstream.runner import DownstreamConfig

ROOT = Path(__file__).resolve().parents[1]


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


def test_the_reference_lists_every_field_with_its_default(hook):
    walker = hook.Walker(hook.Index())
    for module, cls in (("rgsd_agents.config", TrainConfig), ("rgsd_agents.downstream.runner", DownstreamConfig)):
        rows = _table_rows("\n".join(hook.config_tables(walker, *walker.dataclass_at(module, cls.__name__))))
        expected = _keys(cls())
        assert set(rows) == set(expected), set(rows) ^ set(expected)
        for key, value in expected.items():
            if isinstance(value, (bool, int, float, str, tuple)) or value is None:
                assert rows[key] == hook._show(list(value) if isinstance(value, tuple) else value), key


def test_every_method_config_gets_a_section(hook):
    from rgsd_agents.methods import METHODS

    text = "\n".join(hook.method_tables(hook.Walker(hook.Index()), "rgsd_agents.methods"))
    for name, method in METHODS.items():
        assert f"`method.options` of `{name}`: {method.CONFIG.__name__}" in text
        for f in dataclasses.fields(method.CONFIG):
            assert f"`method.options.{f.name}`" in text
