"""Configs are dataclasses that load from YAML and save next to every run's outputs."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import numbers
import os
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from rgsd_envs.utils.files import InputFileError, atomic_path

T = TypeVar("T")
UNNAMED = "<config>"
"""The source of a check that does not know the config's file (a field's own validation): ``from_dict`` puts the
file's name in its place."""
_SCIENTIFIC = re.compile(r"^[+-]?\d+(\.\d*)?[eE][+-]?\d+$")
"""Numbers like 3e-4 that YAML 1.1 (PyYAML) reads as strings."""


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
            continue
        try:
            kwargs[key] = convert_value(hints[key], value)
        except ValueError:
            raise InputFileError(
                source, f"expected {_type_name(hints[key])}, got {_show(value)!r}", prefix + key
            ) from None
    try:
        return cls(**kwargs)
    except InputFileError as err:
        if err.path != UNNAMED:  # about another file (a motion clip): said as it is
            raise
        field = prefix + err.field if err.field else prefix.rstrip(".") or None  # the key as the file spells it
        raise InputFileError(source, err.reason, field) from None
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


def yaml_error(err: yaml.YAMLError) -> str:
    """PyYAML's error in one line: where in the file (1-based line and column) and what is wrong."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None:
        context += f" from line {context_mark.line + 1}, column {context_mark.column + 1}"
    return f"not valid YAML{where}: {problem}" + (f" ({context})" if context else "")


def read_yaml(path: str | os.PathLike) -> Any:
    """The YAML document a file holds, or an InputFileError naming the file: not UTF-8 text, or not valid YAML."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputFileError(path, "not a UTF-8 text file") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise InputFileError(path, yaml_error(err)) from None


def read_settings(path: str | os.PathLike, hint: str) -> dict[str, Any]:
    """The mapping of settings a YAML config file holds, or an error naming the file: not YAML, not a mapping, or
    no settings at all (empty, comments only, ``{}``), which would otherwise run every default unasked; ``hint``
    says what to write instead."""
    path = Path(path)
    data = read_yaml(path)
    if data is None or data == {}:
        raise InputFileError(path, f"holds no settings; {hint}")
    if not isinstance(data, dict):
        raise InputFileError(path, f"expected a mapping of config keys, got {type(data).__name__}")
    return data


def load_yaml(
    cls: type[T],
    path: str | os.PathLike,
    overrides: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> T:
    """Load dataclass ``cls`` from a YAML file (``read_settings``), then apply dotted-key overrides (``flags``: as
    in ``from_dict_with_overrides``)."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, not_a_config_file(path))
    data = read_settings(path, f"give {cls.__name__} fields, or no config file for the defaults")
    return from_dict_with_overrides(cls, data, str(path), overrides, flags=flags)


def not_a_config_file(path: str | os.PathLike) -> str:
    """Why ``path``, which is no file, cannot be read as a config, worded for an error naming it."""
    if Path(path).is_dir():
        return "is a folder, not a config file (give the YAML file)"
    return "config file not found"


def from_dict_with_overrides(
    cls: type[T],
    data: Any,
    source: str,
    overrides: dict[str, Any] | None,
    typed: dict[str, Any] | None = None,
    flags: dict[str, str] | None = None,
) -> T:
    """``from_dict`` of a file's ``data`` with dotted-key overrides (``--set``) on top. A value the file alone
    accepts but an override breaks (``num_envs must be >= 1``) is named by that ``--set`` (as ``typed``, default
    ``overrides``), or by the option that set it (``flags``: key -> ``--hidden 0``), not blamed on the file."""
    if not overrides:
        return from_dict(cls, data, source)
    file_error: InputFileError | None = None
    try:
        from_dict(cls, copy.deepcopy(data), source)
    except InputFileError as err:
        file_error = err  # the file's own error, unless an override mends it
    try:
        for key, value in overrides.items():
            apply_override(data, key, value)
    except OverrideError:
        if file_error is not None:  # `env: 5` under --set env.motions=...: the file's error says what to fix
            raise file_error from None
        raise
    try:
        return from_dict(cls, data, source)
    except InputFileError as err:
        if file_error is not None and str(err) == str(file_error):
            raise
        named = [k for k in overrides if k == err.field or _names(err.reason, k.rsplit(".", 1)[-1])]
        shown, flags = typed or overrides, flags or {}
        sets = " ".join(flags.get(k) or f"--set {k}={_show(shown.get(k, overrides[k]))}" for k in named or overrides)
        raise InputFileError(sets, err.reason, err.field) from None


def _names(text: str, key: str) -> bool:
    """Whether ``text`` names the field ``key`` as a word (``clip`` is not named by ``clip_sampling``)."""
    return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


class OverrideError(InputFileError):
    """A ``--set KEY=VALUE`` that names no config field or whose value does not fit the field's type."""

    def __init__(self, key: str, value: Any, message: str):
        self.key, self.value, self.reason = key, value, message
        super().__init__(f"--set {key}={_show(value)}", message)


def _show(value: Any) -> str:
    """A value as the user typed it (YAML-ish): strings bare, the rest as YAML flow text."""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def shown_value(value: Any) -> str:
    """A setting's value in a range error, as a config file writes it (a tuple as a list, text quoted)."""
    return repr(list(value) if isinstance(value, tuple) else value)


def _type_name(tp: Any) -> str:
    """A field type in words a user reads: int, float, true/false, text, a list of int, ... or null."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin in (list, tuple):
        inner = [a for a in args if a is not Ellipsis]
        return "a list" + (f" of {_type_name(inner[0])}" if inner else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, args))
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {tp.__name__} keys"
    return {int: "int", float: "float", bool: "true/false", str: "text", type(None): "null"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def convert_value(tp: Any, value: Any) -> Any:
    """``value`` as field type ``tp`` (int, float, bool, str, None, lists/tuples, unions, Literal, dataclass
    mappings); ValueError if it does not fit. Integral floats become ints, numbers floats, numbers and
    booleans are not taken for text."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for a in sorted(args, key=lambda a: a is str):  # text last: 3 is an int before it is "3"
            try:
                return convert_value(a, value)
            except ValueError:
                continue
        raise ValueError(tp)
    if tp is type(None):
        if value is None:
            return None
        raise ValueError(tp)
    if origin is typing.Literal:
        if value in args:
            return value
        raise ValueError(tp)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ValueError(tp)
        inner = [a for a in args if a is not Ellipsis]
        items = [convert_value(inner[0], v) for v in value] if inner else list(value)
        return tuple(items) if origin is tuple else items
    if dataclasses.is_dataclass(tp):
        if isinstance(value, dict):
            return value
        raise ValueError(tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(tp)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(tp)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(tp)
    if tp is str:
        if isinstance(value, str):
            return value
        raise ValueError(tp)
    return value


def check_override(cls: type, dotted: str, value: Any) -> Any:
    """``value`` converted to the type of the field ``dotted`` names in dataclass ``cls``, or an
    OverrideError naming the ``--set`` key, the value and the expected type (or the valid keys)."""
    tp: Any = cls
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        node = _unwrap_optional(tp)
        if i and (node is dict or typing.get_origin(node) is dict):
            return value  # below a free-form mapping (e.g. method.options): its owner checks keys and types
        if not dataclasses.is_dataclass(node):
            raise OverrideError(dotted, value, f"'{'.'.join(parts[:i])}' is a {_type_name(tp)}, it has no keys")
        hints = _field_types(node)
        if part not in hints:
            where = f"'{'.'.join(parts[:i])}'" if i else "the config"
            section = ".".join(parts[:i] + [""]) if i else ""
            # a key of the same section first (ppo.lr: ppo.actor_lr), then the same name in another section
            near = [section + k for k in near_keys(part, hints)]
            elsewhere = near or [k for k in key_paths(cls) if k.rsplit(".", 1)[-1] == part]
            fixes = [f"--set {key}={_show(value)}" for key in elsewhere]  # written as the flag to type instead
            hint = f" (did you mean {' or '.join(fixes)}?)" if fixes else ""
            raise OverrideError(
                dotted, value, f"unknown key '{part}' in {where}{hint}; valid keys: {', '.join(sorted(hints))}"
            )
        tp = hints[part]
    try:
        return convert_value(tp, value)
    except ValueError:
        node = _unwrap_optional(tp)
        named = dataclasses.is_dataclass(node) and "name" in _field_types(node) and not isinstance(value, dict)
        hint = f"; to choose it by name: --set {dotted}.name={_show(value)}" if named else ""
        raise OverrideError(dotted, value, f"expected {_type_name(tp)}, got {_show(value)!r}{hint}") from None


def _fits(tp: Any, value: Any) -> bool:
    """Whether ``value`` is a number of scalar type ``tp`` (int, float) or a true/false for bool (numpy's too)."""
    if tp is bool:
        return isinstance(value, (bool, np.bool_))
    if isinstance(value, (bool, np.bool_)):  # True is an int to Python, never a number here
        return False
    return isinstance(value, numbers.Integral if tp is int else numbers.Real)


def check_scalar_fields(obj: Any) -> None:
    """An ``InputFileError`` naming the first int, float or bool field of dataclass ``obj`` whose value is not one
    (``fall_height="x"`` would otherwise fail at the first step); a dataclass's ``__post_init__`` calls it before
    its range checks, which then compare numbers."""
    for name, tp in _field_types(type(obj)).items():
        scalar = _unwrap_optional(tp)
        value = getattr(obj, name)
        if scalar not in (int, float, bool) or (value is None and scalar is not tp):
            continue
        if not _fits(scalar, value):
            raise InputFileError(UNNAMED, f"expected {_type_name(tp)}, got {value!r}", name)


def near_keys(key: str, keys: Any) -> list[str]:
    """The ``keys`` a mistyped ``key`` may mean: those with ``key`` as a word (lr: actor_lr, critic_lr), else those
    spelled almost alike (epoch: epochs)."""
    words = [k for k in keys if key in k.split("_")]
    return words or difflib.get_close_matches(key, list(keys), n=3, cutoff=0.8)


def key_paths(cls: type, prefix: str = "") -> list[str]:
    """Every dotted key of dataclass ``cls``, its nested dataclasses' keys included (a mapping's are free-form)."""
    paths = []
    for name, tp in _field_types(cls).items():
        paths.append(prefix + name)
        node = _unwrap_optional(tp)
        if dataclasses.is_dataclass(node) and isinstance(node, type):
            paths += key_paths(node, f"{prefix}{name}.")
    return paths


def check_overrides(cls: type, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """Every ``--set`` override checked and converted by ``check_override`` (the first bad one raises)."""
    return {k: check_override(cls, k, v) for k, v in (overrides or {}).items()}


def dotted_value(data: dict[str, Any], dotted: str, default: Any = None) -> Any:
    """``data["a"]["b"]`` for ``dotted = "a.b"``, or ``default`` where a key is missing."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def apply_override(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data["a"]["b"] = value`` for ``dotted = "a.b"``; an OverrideError where ``data["a"]`` holds a value
    that is not a mapping."""
    parts = dotted.split(".")
    node = data
    for i, p in enumerate(parts[:-1]):
        node = node.setdefault(p, {})
        if not isinstance(node, dict):
            where = ".".join(parts[: i + 1])
            raise OverrideError(dotted, value, f"'{where}' is {_show(node)!r}, not a mapping of keys")
    node[parts[-1]] = value


def save_yaml(obj: Any, path: str | os.PathLike) -> Path:
    """Write a dataclass as YAML atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(yaml.safe_dump(to_dict(obj), sort_keys=False))
    return Path(path)


def scientific_numbers(value: Any) -> Any:
    """``value`` with strings such as "3e-4" (YAML 1.1 reads them as text) turned into floats, recursively."""
    if isinstance(value, str) and _SCIENTIFIC.match(value.strip()):
        return float(value)
    if isinstance(value, dict):
        return {k: scientific_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scientific_numbers(v) for v in value]
    return value


def number_type(
    kind: type, minimum: float, strict: bool, what: str, maximum: float | None = None
) -> Callable[[str], Any]:
    """An argparse type: ``kind`` parsed from the text, > ``minimum`` (``strict``) or >= it, and <= ``maximum``
    when given, else a clear error."""

    def parse(text: str) -> Any:
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (v > minimum if strict else v >= minimum) or (maximum is not None and not v <= maximum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v

    return parse


seed_type = number_type(int, 0, False, "a seed (a whole number >= 0)")
"""The argparse type of every ``--seed``: numpy's generators take no negative seed."""


def add_set_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.overrides``: dotted config keys, YAML values."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """``["ppo.epochs=3", "env.motions=[a, b]"]`` -> {dotted key: YAML-parsed value}; an item without ``=`` or with
    a value that is not YAML is an InputFileError naming it."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputFileError(f"--set {item}", "expected key=value, e.g. --set ppo.epochs=3")
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise InputFileError(f"--set {item}", yaml_error(err)) from None
        out[key.strip()] = scientific_numbers(parsed)
    return out


def set_overrides(cls: type, items: list[str] | None) -> dict[str, Any]:
    """``--set`` items parsed (``parse_set``) and checked against dataclass ``cls`` (``check_overrides``): a key
    that names no field, or a value that does not fit its type, raises an OverrideError naming it."""
    return check_overrides(cls, parse_set(items))
