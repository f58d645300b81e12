"""The repository's promises: two set-up commands, CI runs the test one, one-way dependencies, no licensed data."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [b.strip() for b in blocks]


def test_readme_has_exactly_two_one_line_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2 and all("\n" not in c for c in cmds), cmds
    install_and_demo, tests = cmds
    assert "rgsd demo" in install_and_demo and "pytest" in tests
    for c in cmds:
        assert c.startswith("pip install torch==2.13.0 "), "CPU torch must be pinned first (never a CUDA build)"


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _setup_commands()[1] in ci.splitlines()


def _deps(pkg: str) -> list[str]:
    data = tomllib.loads((ROOT / "packages" / pkg / "pyproject.toml").read_text())
    return [re.split(r"[<>=\[ ]", d)[0] for d in data["project"]["dependencies"]]


def test_dependencies_point_one_way():
    assert not {"rgsd-agents", "rgsd-eval"} & set(_deps("rgsd-envs"))
    assert {"rgsd-envs", "rgsd-eval"} <= set(_deps("rgsd-agents"))  # envs <- eval <- agents
    assert "rgsd-envs" in _deps("rgsd-eval") and "rgsd-agents" not in _deps("rgsd-eval")
    forbidden = {
        "rgsd-envs": ("rgsd_agents", "rgsd_eval"),
        "rgsd-eval": ("rgsd_agents",),
    }
    for pkg, names in forbidden.items():
        for src in (ROOT / "packages" / pkg / "src").rglob("*.py"):
            text = src.read_text()
            for name in names:
                assert not re.search(rf"^\s*(from|import) {name}\b", text, flags=re.M), f"{src} imports {name}"


def _tracked_files() -> list[str]:
    """The repository's tracked files (what a clean clone has)."""
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


SHIPPED_MOTIONS = "motions/deepmimic-smpl"
"""The one folder of mocap the repository ships (MIT-licensed DeepMimic clips, see motions/README.md)."""
SHIPPED_CLIPS = ("jog", "kick", "punch", "run", "spinkick", "stealthy_walk", "walk", "zombie_walk")
LICENSED = re.compile(
    r"_poses\.npz$"  # AMASS SMPL+H
    r"|_stageii\.npz$"  # AMASS SMPL-X
    r"|\.pkl$"  # SMPL model files (and any other pickle)
    r"|(^|/)(smpl|smplh|smplx|mano|body_models)/.*\.npz$"  # SMPL model folders (e.g. smplh/neutral/model.npz)
    r"|smpl[hx]?_(neutral|male|female)",  # SMPL_NEUTRAL.npz, SMPLX_MALE.npz, ...
    flags=re.I,
)
"""Licensed data that must never be tracked: AMASS motion files and SMPL body models."""


def licensed_files(files: list[str]) -> list[str]:
    """The files of ``files`` that are AMASS motions or SMPL models, apart from the shipped DeepMimic clips."""
    allowed = {f"{SHIPPED_MOTIONS}/{name}_poses.npz" for name in SHIPPED_CLIPS}
    return [f for f in files if LICENSED.search(f) and f not in allowed]


GYMNASIUM_NAMES_SINCE = {"AutoresetMode": (1, 1)}
"""Names of ``gymnasium.vector`` that rgsd imports and older Gymnasium lacks: the release that added each
(``gymnasium.vector.AutoresetMode``: 1.1.0; 1.0.0 has none)."""
SB3_ADMITTING_GYMNASIUM = {(1, 1): (2, 6)}
"""A Gymnasium floor: the first stable-baselines3 whose metadata admits it (2.4 and 2.5 require gymnasium<1.1)."""


def _floor(requirements: list[str], name: str) -> tuple[int, ...]:
    """The ``>=`` version of ``name`` among pip ``requirements``, as a tuple of ints."""
    (spec,) = [r[len(name) :] for r in requirements if re.split(r"[<>=~!\[ ]", r)[0] == name]
    return tuple(int(x) for x in re.fullmatch(r">=([0-9.]+)", spec.strip()).group(1).split("."))


def test_dependency_floors_admit_no_release_the_code_cannot_import():
    """A floor too low installs a Gymnasium whose ``gymnasium.vector`` lacks what the envs import at import time,
    or an SB3 that pins Gymnasium below that."""
    project = tomllib.loads((ROOT / "packages" / "rgsd-envs" / "pyproject.toml").read_text())["project"]
    src = "\n".join(f.read_text() for f in (ROOT / "packages").glob("*/src/**/*.py"))
    imported = re.findall(r"from gymnasium\.vector import ([\w, ]+)", src)
    used = {n.strip() for names in imported for n in names.split(",")} & set(GYMNASIUM_NAMES_SINCE)
    assert used == {"AutoresetMode"}, used  # a name added to the table or dropped from the code: revisit the floor
    needed = max(GYMNASIUM_NAMES_SINCE[n] for n in used)
    assert _floor(project["dependencies"], "gymnasium") >= needed
    assert _floor(project["optional-dependencies"]["sb3"], "stable-baselines3") >= SB3_ADMITTING_GYMNASIUM[needed]
    # the test requirements repeat the extras (CI installs them without the extras): the same specifiers
    tests = [ln.split("#")[0].strip() for ln in (ROOT / "requirements-test.txt").read_text().splitlines()]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    for req in extras:
        name = re.split(r"[<>=~!\[ ]", req)[0]
        assert [t for t in tests if re.split(r"[<>=~!\[ ]", t)[0] == name] == [req], name


def test_only_the_deepmimic_clips_pass_the_licensed_data_check():
    allowed = [f"{SHIPPED_MOTIONS}/{name}_poses.npz" for name in SHIPPED_CLIPS]
    refused = [
        "motions/ACCAD/Male2Walking_c3d/B10_-_Walk_turn_left_45_poses.npz",  # AMASS SMPL+H anywhere else
        f"{SHIPPED_MOTIONS}/B9_-_Walk_turn_left_90_poses.npz",  # an AMASS file added beside the clips
        "packages/rgsd-envs/tests/data/walk_poses.npz",  # a shipped clip's name outside its folder
        "data/ACCAD/Female1Walking_c3d/B22_side_step_left_stageii.npz",  # AMASS SMPL-X
        "models/basicModel_neutral_lbs_10_207_0_v1.0.0.pkl",  # SMPL model (pickle)
        "body_models/smplh/neutral/model.npz",  # SMPL+H model as AMASS ships it
        "models/SMPL_NEUTRAL.npz",
        "models/SMPLX_FEMALE.npz",
        "smplh/SMPLH_MALE.npz",
    ]
    assert licensed_files(allowed) == []
    assert licensed_files(refused) == refused
    assert licensed_files(["packages/rgsd-envs/src/rgsd_envs/motion/demo.py", "motions/README.md"]) == []


def test_no_licensed_data_or_shared_files_are_tracked():
    files = _tracked_files()
    assert not licensed_files(files), licensed_files(files)
    assert not [f for f in files if f.startswith("shared/")]
    shipped = sorted(f.removeprefix(SHIPPED_MOTIONS + "/") for f in files if f.startswith(SHIPPED_MOTIONS + "/"))
    clips = sorted(f"{name}_poses.npz" for name in SHIPPED_CLIPS)
    assert shipped == sorted(["LICENSE", "validation.json", *clips]), shipped
    assert "motions/README.md" in files
    built = [f for f in files if "/build/lib/" in f or f.endswith(".egg-info")]
    assert not built, built[:5]


INTERNAL_SPEC = re.compile(r"SPEC\s*§|SPEC\.md")
"""A reference to the project's internal working specification, which users do not have: facts live in docs/."""


def test_no_tracked_text_cites_the_internal_specification():
    """Code, presets, CLI help and docs point to the docs page that holds a fact, never to a file users lack."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    cited = []
    for name in filter(None, names):
        path = ROOT / name.decode()
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary: clips, figures, checkpoints
        text = data.decode("utf-8", errors="replace")
        cited += [f"{name.decode()}:{text.count(chr(10), 0, m.start()) + 1}" for m in INTERNAL_SPEC.finditer(text)]
    assert not cited, cited


def test_readme_links_point_to_tracked_files():
    """Every relative link of a README (figures, videos, metrics) resolves to a file a clean clone has."""
    files = set(_tracked_files())
    broken = []
    for readme in [ROOT / "README.md", *sorted((ROOT / "packages").glob("*/README.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path = (readme.parent / target).resolve()
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else None
            if rel is None or not (rel in files or any(f.startswith(rel.rstrip("/") + "/") for f in files)):
                broken.append(f"{readme.relative_to(ROOT)}: {target}")
    assert not broken, broken


def _module_graph() -> dict[str, set[str]]:
    """Every source module of the three packages -> the package modules it imports (anywhere in the file)."""
    files = {}
    for src in (ROOT / "packages").glob("*/src"):
        for f in src.rglob("*.py"):
            parts = list(f.relative_to(src).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for t in targets:
                if t in files and t != name:
                    deps.add(t)
                    break  # "from pkg import module" names the module; otherwise the package itself
        graph[name] = deps
    return graph


def test_no_import_cycle_between_files():
    graph = _module_graph()
    assert "rgsd_envs.sim.mujoco_backend" in graph and "rgsd_eval.fid" in graph
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(dep) :], dep]))
            if dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_folder_names_say_where_things_live():
    envs = ROOT / "packages" / "rgsd-envs" / "src" / "rgsd_envs"
    for path in ("humanoid/skeleton.py", "humanoid/mjcf.py", "envs/observations.py", "rewards/encoder_reward.py",
                 "sim/backend.py", "sim/mujoco_backend.py", "runs/run_dir.py", "runs/policy.py", "motion/clip.py"):  # fmt: skip
        assert (envs / path).is_file(), path
    top = sorted(p.name for p in envs.iterdir() if not p.name.startswith(("_", ".")))
    assert top == [
        "compat", "envs", "humanoid", "motion", "py.typed", "render.py", "rewards", "runs", "sim", "testing.py", "utils"
    ]  # fmt: skip
