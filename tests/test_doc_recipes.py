"""The Python recipes the docs show for other RL libraries do what the docs say they do."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import rgsd_envs.compat

ROOT = Path(__file__).resolve().parents[1]
PYTHON_FENCE = re.compile(r"```python\n(.*?)^\s*```", re.S | re.M)
"""A Python code block's body (a block inside a list item is indented, its closing fence too)."""
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(ROOT.glob("packages/*/README.md"))]
"""The READMEs and the docs."""
SB3_TEXTS = [*DOC_PAGES, Path(rgsd_envs.compat.__file__).with_name("sb3.py")]
"""Where an SB3 snippet may appear: the READMEs, the docs and the adapter's own docstring."""
IMPORT_OUT = re.compile(r"rgsd-motions import [^\n`]*?--out ([^\s`]+)")
"""The folder an ``rgsd-motions import`` command (or a comment quoting one) writes its clips to."""


def make_vec_calls(block: str, module_name: str) -> list[tuple[tuple, dict]]:
    """The ``gym.make_vec`` calls a Python block makes when run as the module ``module_name``, against a stand-in
    ``gym`` whose vector env does nothing."""
    calls = []

    def make_vec(*args, **kwargs):
        calls.append((args, kwargs))
        return SimpleNamespace(reset=lambda **_: (None, {}), close=lambda: None)

    exec(
        block.replace("import gymnasium as gym", ""),
        {"gym": SimpleNamespace(make_vec=make_vec), "__name__": module_name},
    )
    return calls


def documented_make_vec_call(page: Path, marker: str) -> tuple[tuple, dict]:
    """The positional and keyword arguments of the ``gym.make_vec`` call in ``page``'s Python block containing
    ``marker``, read by running the block as a script against a stand-in ``gym``."""
    block = textwrap.dedent(next(b for b in PYTHON_FENCE.findall(page.read_text()) if marker in b))
    calls = make_vec_calls(block, "__main__")
    assert len(calls) == 1, block
    return calls[0]


def test_the_documented_async_vector_env_is_made_only_in_the_main_module():
    # a spawned worker imports the parent's script as "__mp_main__": a block that made the envs then would have
    # each worker start processes while bootstrapping, which multiprocessing refuses with a RuntimeError
    page = ROOT / "docs" / "environments.md"
    block = textwrap.dedent(next(b for b in PYTHON_FENCE.findall(page.read_text()) if '"spawn"' in b))
    assert make_vec_calls(block, "__mp_main__") == [], block
    assert len(make_vec_calls(block, "__main__")) == 1, block


def test_the_documented_gymnasium_vector_env_autoresets_same_step_with_final_obs(real_clip_dir):
    args, kwargs = documented_make_vec_call(ROOT / "docs" / "environments.md", "vectorization_mode")
    assert kwargs["vectorization_mode"] == "async" and kwargs["vector_kwargs"]["context"] == "spawn"
    # the documented call in a sync vector env of 2 worlds (spawning processes costs seconds; the env's own tests
    # run the async one): the context is the only async-only argument
    vector_kwargs = {k: v for k, v in kwargs["vector_kwargs"].items() if k != "context"}
    envs = gym.make_vec(
        *args,
        **{**kwargs, "num_envs": 2, "vectorization_mode": "sync", "vector_kwargs": vector_kwargs},
        motions=real_clip_dir,
    )
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(60):
        obs, _, term, trunc, info = envs.step(envs.action_space.sample())
        if (term | trunc).any():
            break
    done = np.flatnonzero(term | trunc)
    assert done.size, "no episode ended in 60 steps"
    assert (info["_final_obs"] == (term | trunc)).all()
    for i in done:  # the state reached, and the world already restarted (SameStep)
        assert info["final_obs"][i].shape == obs[i].shape and not np.allclose(info["final_obs"][i], obs[i])
    envs.close()


def test_every_sb3_snippet_wraps_the_env_in_vec_monitor():
    # without VecMonitor SB3 logs no episode returns and evaluate_policy warns (the env keeps no statistics)
    made = re.compile(r"(PPO\(|=\s*)[^\n]*make_sb3_vec_env\(")
    snippets = [(path.name, m.group(0)) for path in SB3_TEXTS for m in made.finditer(path.read_text())]
    assert len(snippets) >= 3  # getting-started, environments and the adapter's docstring
    for name, line in snippets:
        assert "VecMonitor(make_sb3_vec_env(" in line, (name, line)


def test_every_motions_folder_a_python_snippet_names_is_demo_or_imported_on_its_page():
    """A clone's motions/ holds only AMASS-format files (they need `rgsd-motions import`): a snippet's ``motions=``
    is "demo" or the folder an import on the same page writes, and one that exists in the repository loads."""
    from rgsd_envs.motion.library import MotionLib

    named = []
    for page in DOC_PAGES:
        text = page.read_text()
        imported = {out.rstrip("/") for out in IMPORT_OUT.findall(text)}
        for block in PYTHON_FENCE.findall(text):
            for motions in re.findall(r"motions=[\"']([^\"']+)[\"']", block):
                named.append((page.name, motions))
                if motions == "demo":
                    continue
                assert motions.rstrip("/") in imported, (
                    f"{page.relative_to(ROOT)}: motions={motions!r} is neither 'demo' nor a folder an "
                    f"`rgsd-motions import ... --out` on the page writes ({sorted(imported)})"
                )
                if (ROOT / motions).exists():
                    assert MotionLib(ROOT / motions).num_clips > 0
    assert len(named) >= 2, named  # the environments page and the rgsd-envs README
