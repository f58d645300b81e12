"""Tables generated from the code and from the committed results, committed into the docs pages and refreshed by the
MkDocs build.

A page asks for a table with an HTML comment on a line of its own; the table follows it, up to
``<!-- end generated -->``, so that the page reads complete where it is read as a file (GitHub, an editor).
``python docs/hooks/reference.py`` rewrites every page's tables from the code (``--check``: only report the pages
whose tables are stale; a test runs it), and the MkDocs hook regenerates them at every build, so neither the site
nor the committed pages can drift from the code. The markers:

``<!-- config: rgsd_agents.config:TrainConfig -->``
    every field of the dataclass, its nested dataclasses as sections of their own (``env.``, ``ppo.`` ...),
    read with ``ast`` from the source: type, default and the attribute docstring under each field.
``<!-- fields: rgsd_envs.envs.torch_env:StepExtras -->``
    one table of a dataclass's fields (name, type, docstring), for result records rather than configs.
``<!-- method-configs: rgsd_agents.methods -->``
    the same for the ``CONFIG`` dataclass of every method in that package's ``METHODS`` (``method.options``).
``<!-- presets: rgsd_agents/presets -->``
    the keys every preset YAML file of that folder sets, one column per preset.
``<!-- observation-layout -->``
    the slices of ``rgsd_envs.envs.observations.POLICY_LAYOUT`` (imported: they are computed there).
``<!-- commands: rgsd_agents.cli:build_parser -->``
    every subcommand and argument of the argparse parser that function builds (imported and called): the help
    text and the default that ``--help`` shows.
``<!-- results: reproduce-cpu -->``
    a table of measured figures, each cell read from the committed file that holds it (``docs/hooks/results_tables.py``
    names each table's files and writes its cells).

Nothing here knows a field name or a flag: adding, removing or documenting one changes the site at the next build.
The pages are those of ``docs/`` and the repository's README.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import operator
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HOOKS = Path(__file__).resolve().parent
if str(HOOKS) not in sys.path:  # results_tables sits beside this file, which MkDocs and the tests load by its path
    sys.path.insert(0, str(HOOKS))
import results_tables  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "packages").glob("*/src"))
MARKER = re.compile(r"^<!-- ([a-z-]+)(?::\s*(\S+))? -->$", re.M)
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class MarkerError(RuntimeError):
    """A marker the hook cannot fill: the build stops naming the page and the marker."""


# -- source index ---------------------------------------------------------------------


def _module_files() -> dict[str, Path]:
    """Every module of the three packages -> its file."""
    files = {}
    for src in SOURCES:
        for path in src.rglob("*.py"):
            parts = list(path.relative_to(src).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


@dataclass
class Module:
    """One parsed source module: its top-level classes, constants and imported names."""

    name: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    constants: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """local name -> (module, name in it; None when the module itself is imported)."""


class Index:
    """Parsed modules on demand, and name resolution across ``from x import y``."""

    def __init__(self) -> None:
        self.files = _module_files()
        self.modules: dict[str, Module] = {}

    def module(self, name: str) -> Module:
        """The parsed module ``name`` (a KeyError names a module outside the packages)."""
        if name not in self.modules:
            tree = ast.parse(self.files[name].read_text())
            mod = Module(name, tree)
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    mod.classes[node.name] = node
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    mod.constants[node.targets[0].id] = node.value
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                    mod.constants[node.target.id] = node.value
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        mod.imports[alias.asname or alias.name] = (node.module, alias.name)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        mod.imports[alias.asname or alias.name] = (alias.name, None)
            self.modules[name] = mod
        return self.modules[name]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[Module, str] | None:
        """Where ``name`` as seen from ``module`` is defined (class or constant), following imports."""
        if depth > 8 or module not in self.files:
            return None
        mod = self.module(module)
        if name in mod.classes or name in mod.constants:
            return mod, name
        if name in mod.imports:
            source, original = mod.imports[name]
            if original is None:
                return None
            if f"{source}.{original}" in self.files:  # "from pkg import module"
                return None
            return self.resolve(source, original, depth + 1)
        return None

    def value(self, module: str, node: ast.expr, depth: int = 0) -> Any:
        """The value of a default expression: literals, arithmetic and constants of the packages; else raises."""
        if depth > 8:
            raise ValueError("too deep")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return [self.value(module, e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Dict) and None not in node.keys:
            return {
                self.value(module, k, depth + 1): self.value(module, v, depth + 1)
                for k, v in zip(node.keys, node.values)
            }
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = self.value(module, node.operand, depth + 1)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](
                self.value(module, node.left, depth + 1), self.value(module, node.right, depth + 1)
            )
        if isinstance(node, ast.Name):
            found = self.resolve(module, node.id)
            if found and found[1] not in found[0].classes:
                mod, name = found
                return self.value(mod.name, mod.constants[name], depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # QUICK.rollouts
            found = self.resolve(module, node.value.id)
            if found and found[1] not in found[0].classes and isinstance(found[0].constants[found[1]], ast.Call):
                mod, name = found
                return self.call_field(mod.name, mod.constants[name], node.attr, depth + 1)
        raise ValueError(ast.unparse(node))

    def call_field(self, module: str, call: ast.Call, attr: str, depth: int = 0) -> Any:
        """The value of field ``attr`` of a dataclass built by ``call`` in ``module``: its keyword, its positional
        argument, else the field's default."""
        for kw in call.keywords:
            if kw.arg == attr:
                return self.value(module, kw.value, depth + 1)
        found = self.resolve(module, call.func.id) if isinstance(call.func, ast.Name) else None
        if found and found[1] in found[0].classes:
            mod, name = found
            defaults = self.field_defaults(mod, mod.classes[name])
            if attr in defaults:
                i = list(defaults).index(attr)
                if i < len(call.args):
                    return self.value(module, call.args[i], depth + 1)
                if defaults[attr] is not None:
                    return self.value(mod.name, defaults[attr], depth + 1)
        raise ValueError(f"{ast.unparse(call)}.{attr}")

    def field_defaults(self, mod: Module, cls: ast.ClassDef, depth: int = 0) -> dict[str, ast.expr | None]:
        """A dataclass's fields in order (bases first) -> their default expressions (None: no default)."""
        out: dict[str, ast.expr | None] = {}
        for base in cls.bases if depth < 8 else []:
            found = self.resolve(mod.name, ast.unparse(base))
            if found and found[1] in found[0].classes:
                out.update(self.field_defaults(found[0], found[0].classes[found[1]], depth + 1))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[node.target.id] = node.value
        return out


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for dec in cls.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target) in ("dataclass", "dataclasses.dataclass"):
            return True
    return False


# -- dataclass fields -----------------------------------------------------------------


@dataclass
class Field:
    """One row of a reference table, or a nested section when ``nested`` is set."""

    name: str
    type: str
    default: str
    doc: str
    nested: tuple[Module, ast.ClassDef, dict[str, ast.expr]] | None = None


def _docstring_after(body: list[ast.stmt], i: int) -> str:
    if i + 1 < len(body):
        nxt = body[i + 1]
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
            return " ".join(nxt.value.value.split())
    return ""


def _show(value: Any) -> str:
    """A default as YAML would write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.1f}" if value.is_integer() and abs(value) < 1e6 else format(value, ".6g")
    if value == "":
        return '""'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


class Walker:
    """Fields of a dataclass (bases first), with nested dataclasses resolved through the index."""

    def __init__(self, index: Index) -> None:
        self.index = index

    def dataclass_at(self, module: str, name: str) -> tuple[Module, ast.ClassDef] | None:
        """The dataclass ``name`` as seen from ``module``, or None."""
        found = self.index.resolve(module, name)
        if not found or found[1] not in found[0].classes:
            return None
        mod, cname = found
        cls = mod.classes[cname]
        return (mod, cls) if _is_dataclass(cls) else None

    def fields(self, mod: Module, cls: ast.ClassDef, overrides: dict[str, ast.expr] | None = None) -> list[Field]:
        """Every field of ``cls``: inherited ones first, in definition order, as a dataclass orders them."""
        rows: dict[str, Field] = {}
        for base in cls.bases:
            found = self.dataclass_at(mod.name, ast.unparse(base))
            if found:
                for f in self.fields(*found):
                    rows[f.name] = f
        for i, node in enumerate(cls.body):
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            type_text = ast.unparse(node.annotation)
            if type_text.startswith(("ClassVar", "typing.ClassVar")):
                continue
            name = node.target.id
            doc = _docstring_after(cls.body, i) or (rows[name].doc if name in rows else "")
            rows[name] = self._field(mod, name, type_text, node.value, doc)
        for name, expr in (overrides or {}).items():
            if name in rows and rows[name].nested is None:
                rows[name].default = self._default(mod, expr)
        return list(rows.values())

    def _default(self, mod: Module, expr: ast.expr) -> str:
        try:
            return _show(self.index.value(mod.name, expr))
        except (ValueError, TypeError, ZeroDivisionError, KeyError):
            return ast.unparse(expr)

    def _field(self, mod: Module, name: str, type_text: str, value: ast.expr | None, doc: str) -> Field:
        if value is None:
            return Field(name, type_text, "(required)", doc)
        if isinstance(value, ast.Call) and ast.unparse(value.func) in ("field", "dataclasses.field"):
            kw = {k.arg: k.value for k in value.keywords}
            if "default" in kw:
                return Field(name, type_text, self._default(mod, kw["default"]), doc)
            factory = kw.get("default_factory")
            overrides: dict[str, ast.expr] = {}
            if isinstance(factory, ast.Lambda) and not isinstance(factory.body, ast.Call):  # lambda: ["a", "b"]
                return Field(name, type_text, self._default(mod, factory.body), doc)
            if isinstance(factory, ast.Lambda) and isinstance(factory.body, ast.Call):
                overrides = {k.arg: k.value for k in factory.body.keywords if k.arg}
                factory = factory.body.func
            if isinstance(factory, ast.Name):
                found = self.dataclass_at(mod.name, factory.id)
                if found:
                    return Field(name, type_text, "", doc, nested=(*found, overrides))
                empty = {"list": "[]", "dict": "{}", "tuple": "[]", "set": "[]"}.get(factory.id)
                if empty:
                    return Field(name, type_text, empty, doc)
            return Field(name, type_text, ast.unparse(value), doc)
        return Field(name, type_text, self._default(mod, value), doc)


def _cell(text: str) -> str:
    """Table-safe markdown: RST double backticks become code spans, pipes are escaped, and angle brackets outside
    code spans (``<run>/pretrain``) are written as entities so that they are not read as HTML."""
    parts = text.replace("``", "`").split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans (a pipe inside one splits no cell)
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return "`".join(parts)


def _code(text: str) -> str:
    """A table cell's code span (a pipe inside a code span splits no cell)."""
    return "`" + text.replace("`", "'") + "`"


def _first_line(cls: ast.ClassDef) -> str:
    doc = ast.get_docstring(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def config_tables(walker: Walker, mod: Module, cls: ast.ClassDef, prefix: str = "", level: int = 3,
                  overrides: dict[str, ast.expr] | None = None, title: str | None = None,
                  note: str = "") -> list[str]:  # fmt: skip
    """Markdown: a table of ``cls``'s own fields, then one section per nested dataclass (recursively)."""
    fields = walker.fields(mod, cls, overrides)
    heading = title or (f"`{prefix.rstrip('.')}`: {cls.name}" if prefix else cls.name)
    out = [f"{'#' * level} {heading}", "", _cell(" ".join(t for t in (_first_line(cls), note) if t)), ""]
    flat = [f for f in fields if f.nested is None]
    if flat:
        out += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for f in flat:
            default = _code(f.default) if f.default else ""
            out.append(f"| `{prefix}{f.name}` | {_code(f.type)} | {default} | {_cell(f.doc)} |")
        out.append("")
    for f in fields:
        if f.nested:
            nmod, ncls, nover = f.nested
            out += config_tables(walker, nmod, ncls, f"{prefix}{f.name}.", min(level + 1, 6), nover, note=f.doc)
    return out


def field_table(walker: Walker, mod: Module, cls: ast.ClassDef) -> list[str]:
    """Markdown: one row per field of ``cls`` (name, type, docstring)."""
    out = ["| field | type | meaning |", "|---|---|---|"]
    for f in walker.fields(mod, cls):
        out.append(f"| `{f.name}` | {_code(f.type)} | {_cell(f.doc)} |")
    return out


def method_tables(walker: Walker, package: str) -> list[str]:
    """One section per method of the registry ``<package>.METHODS`` (its ``CONFIG`` dataclass, ``method.options``)."""
    import importlib

    out: list[str] = []
    for name, method in importlib.import_module(package).METHODS.items():
        config = method.CONFIG
        found = walker.dataclass_at(config.__module__, config.__name__)
        if not found:
            raise MarkerError(f"{package}: the CONFIG of method {name!r} ({config.__qualname__}) is not a dataclass")
        title = f"`method.options` of `{name}`: {config.__name__}"
        out += config_tables(walker, *found, prefix="method.options.", title=title)
    if not out:
        raise MarkerError(f"no method in {package}.METHODS")
    return out


def preset_table(folder: str) -> list[str]:
    """One row per key any preset sets (dotted), one column per preset file of ``folder``."""
    path = next((src / folder for src in SOURCES if (src / folder).is_dir()), None)
    if path is None:
        raise MarkerError(f"no folder {folder} under packages/*/src")
    presets = {p.stem: yaml.safe_load(p.read_text()) or {} for p in sorted(path.glob("*.yaml"))}

    def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, dict) and k != "set":
                out.update(flatten(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    flat = {name: flatten(d) for name, d in presets.items()}
    keys = list(dict.fromkeys(k for d in flat.values() for k in d))
    names = list(flat)
    out = ["| key | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|"]
    for key in keys:
        cells = []
        for n in names:
            if key not in flat[n]:
                cells.append("")
            elif key == "curriculum":
                steps = flat[n][key] or []
                cells.append("; ".join(f"at {s['at_samples']:,} samples: {_show(s['set'])}" for s in steps))
            else:
                cells.append(_code(_show(flat[n][key])))
        out.append(f"| `{key}` | " + " | ".join(cells) + " |")
    return out + ["", "An empty cell is the dataclass default (the configuration reference lists them)."]


def _import(module: str) -> Any:
    """A module of the three packages, imported from their sources."""
    for src in SOURCES:
        if str(src) not in sys.path:
            sys.path.insert(0, str(src))
    return importlib.import_module(module)


def observation_table() -> list[str]:
    """The policy observation's slices, from ``rgsd_envs.envs.observations`` itself."""
    obs = _import("rgsd_envs.envs.observations")
    out = ["| part | slice | size |", "|---|---|---|"]
    for name, s in obs.POLICY_LAYOUT.items():
        out.append(f"| `{name}` | `{s.start}:{s.stop}` | {s.stop - s.start} |")
    out += [
        "",
        f"Frame features: {obs.FRAME_DIM}; policy observation: {obs.POLICY_OBS_DIM} "
        f"(frame features then the {obs.SKILL_DIM}-D skill); encoder input: the last {obs.HISTORY_LEN} frames "
        f"stacked oldest first, {obs.ENCODER_INPUT_DIM}.",
    ]
    return out


# -- command lines --------------------------------------------------------------------


def parser_of(target: str) -> argparse.ArgumentParser:
    """The parser ``module:function`` builds (``rgsd_agents.cli:build_parser``)."""
    module, _, function = target.partition(":")
    return getattr(_import(module), function or "build_parser")()


def documented_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments of ``parser`` a reference lists: all but ``--help``, hidden ones and the subcommand choice."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and a.help != argparse.SUPPRESS
    ]


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of ``parser``, in help order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


def _argument_default(action: argparse.Action) -> str:
    if action.required and action.nargs not in ("*", "?"):  # argparse marks a "*" positional required
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):  # switches; nothing given
        return ""
    value = action.default
    return _code(" ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value))


def _argument_help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's %(default)s and the like
        text = text % {**vars(action), "prog": "", "default": action.default}
    return _cell(" ".join(text.split()))


def command_tables(target: str) -> list[str]:
    """Markdown: the program ``target`` builds the parser of, then each of its subcommands (recursively), each with
    a table of its arguments."""
    parser = parser_of(target)
    lead = (parser.description or "").split("\n\n")[0]
    return _command_sections(parser, parser.prog, 2, lead)


def _command_sections(parser: argparse.ArgumentParser, name: str, level: int, lead: str) -> list[str]:
    formatter = parser._get_formatter()
    out = [f"{'#' * level} `{name}`", ""]
    if lead:
        out += [_cell(" ".join(lead.split())), ""]
    actions = documented_actions(parser)
    if actions:
        out += ["| argument | default | meaning |", "|---|---|---|"]
        for a in actions:
            invocation = formatter._format_action_invocation(a)
            out.append(f"| {_code(invocation)} | {_argument_default(a)} | {_argument_help(a)} |")
        out.append("")
    subs = subcommands(parser)
    if subs:
        out += ["| command | what it does |", "|---|---|"]
        out += [f"| `{name} {sub}` | {_cell(summary)} |" for sub, summary, _ in subs]
        out.append("")
    for sub, summary, subparser in subs:
        lead = summary[:1].upper() + summary[1:] + ("" if summary.endswith(".") else ".") if summary else ""
        out += _command_sections(subparser, f"{name} {sub}", min(level + 1, 6), lead)
    return out


# -- pages ----------------------------------------------------------------------------

END = "<!-- end generated -->"
KINDS = ("config", "fields", "method-configs", "presets", "observation-layout", "commands", "results")


def _generate(walker: Walker, kind: str, arg: str) -> list[str]:
    """The lines of one marker's table."""
    if kind in ("config", "fields"):
        module, _, name = arg.partition(":")
        found = walker.dataclass_at(module, name)
        if not found:
            raise MarkerError(f"no dataclass {name} in {module}")
        return config_tables(walker, *found) if kind == "config" else field_table(walker, *found)
    if kind == "method-configs":
        return method_tables(walker, arg)
    if kind == "presets":
        return preset_table(arg)
    if kind == "observation-layout":
        return observation_table()
    if kind == "results":
        return results_tables.render(arg)
    return command_tables(arg)


def regenerate(markdown: str, where: str) -> str:
    """``markdown`` with the table under each marker generated afresh (an old table, up to its end line, replaced)."""
    if "<!-- " not in markdown:
        return markdown
    walker: Walker | None = None
    lines, out, i = markdown.split("\n"), [], 0
    while i < len(lines):
        line = lines[i]
        match = MARKER.fullmatch(line)
        i += 1
        if not match or match.group(1) not in KINDS:
            out.append(line)
            continue
        if END in lines[i:]:  # a committed table: skip it up to its end line, unless another marker comes first
            end = lines.index(END, i)
            if not any(MARKER.fullmatch(x) and MARKER.fullmatch(x).group(1) in KINDS for x in lines[i:end]):
                i = end + 1
        walker = walker or Walker(Index())
        try:
            table = _generate(walker, match.group(1), match.group(2) or "")
        except (MarkerError, results_tables.SourceError, KeyError, SyntaxError, ImportError) as err:
            raise MarkerError(f"{where}: {line}: {err}") from err
        while table and not table[-1]:
            table.pop()
        out += [line, "", *table, "", END]
    return "\n".join(out)


def pages(docs: Path = ROOT / "docs") -> list[Path]:
    """The pages that may hold generated tables: those of ``docs`` and the repository's README."""
    return [*sorted(docs.glob("*.md")), ROOT / "README.md"]


def stale_pages(docs: Path = ROOT / "docs", write: bool = False) -> list[Path]:
    """The pages whose generated tables differ from the code's and the committed results' (rewritten when
    ``write``)."""
    stale = []
    for page in pages(docs):
        text = page.read_text()
        fresh = regenerate(text, str(page.relative_to(ROOT)))
        if fresh != text:
            stale.append(page)
            if write:
                page.write_text(fresh)
    return stale


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs: the page with its tables generated from the code and the committed results at this build."""
    return regenerate(markdown, page.file.src_path)


if __name__ == "__main__":
    check = "--check" in sys.argv[1:]
    pages = stale_pages(write=not check)
    for page in pages:
        print(f"{page.relative_to(ROOT)}: {'stale; run python docs/hooks/reference.py' if check else 'rewritten'}")
    sys.exit(1 if check and pages else 0)
