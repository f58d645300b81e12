"""Configs are dataclasses that load from YAML and save next to every run's outputs."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rgsd_envs.utils.files import InputFileError, atomic_path

T = TypeVar("T")


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def from_dict(cls: type[T], data: dict[str, Any], source: str = "<dict>", prefix: str = "") -> T:
    """Build dataclass ``cls`` from a (nested) dict; unknown keys are errors naming the key."""
    if not isinstance(data, dict):
        raise InputFileError(source, f"expected a mapping, got {type(data).__name__}", prefix.rstrip(".") or None)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputFileError(
            source, f"unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(names))}", prefix + unknown[0]
        )
    hints = _field_types(cls)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        tp = _unwrap_optional(hints[key])
        if dataclasses.is_dataclass(tp) and isinstance(value, dict):
            kwargs[key] = from_dict(tp, value, source, prefix + key + ".")
        elif tp is float and isinstance(value, int) and not isinstance(value, bool):
            kwargs[key] = float(value)
        elif typing.get_origin(tp) is tuple and isinstance(value, list):
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise InputFileError(source, str(err), prefix.rstrip(".") or None) from None


def to_dict(obj: Any) -> dict[str, Any]:
    """A plain (YAML-safe) dict of a dataclass, nested dataclasses included."""

    def clean(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: clean(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, Path):
            return str(v)
        return v

    return clean(obj)


def load_yaml(cls: type[T], path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> T:
    """Load dataclass ``cls`` from a YAML file, then apply dotted-key overrides."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "config file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise InputFileError(path, f"not valid YAML: {err}") from None
    for key, value in (overrides or {}).items():
        apply_override(data, key, value)
    return from_dict(cls, data, str(path))


def apply_override(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data["a"]["b"] = value`` for ``dotted = "a.b"``."""
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def save_yaml(obj: Any, path: str | os.PathLike) -> Path:
    """Write a dataclass as YAML atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(yaml.safe_dump(to_dict(obj), sort_keys=False))
    return Path(path)
