"""A resumed run loads the clips its checkpoint trained on, or is refused in one line naming ``env.motions``; a
checkpoint write killed outright leaves a temporary that the resume removes."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from rgsd_agents.cli import main as rgsd
from rgsd_agents.rl.clip_set import clip_set_change
from rgsd_agents.testing import tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.motion.demo import write_demo_clips
from rgsd_envs.motion.variants import write_demo_variants


@pytest.fixture()
def clip_run(tmp_path):
    """A tiny run trained 2 iterations on the five demo clips of ``tmp_path/clips``; returns (run, clips)."""
    clips = tmp_path / "clips"
    write_demo_clips(clips)
    enc = tiny_encoder_file(tmp_path / "encoder.pt")
    cfg = tiny_train_config(str(enc), iterations=2, checkpoint_every=1, env=EnvConfig(motions=str(clips)))
    runner = Runner(cfg, tmp_path / "run", progress=False)
    runner.learn()
    runner.close()
    return tmp_path / "run", clips


def _resume(run, capsys, iterations: int = 3) -> tuple[int, str]:
    code = rgsd(["train", "--resume", str(run), "--set", f"iterations={iterations}", "--no-progress"])
    return code, capsys.readouterr().err


def test_checkpoints_record_the_names_and_frame_counts_of_their_clips(clip_run):
    run, clips = clip_run
    saved = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)["clips"]
    assert saved["names"] == sorted(p.stem for p in clips.glob("*.npz"))
    assert len(saved["frames"]) == 5 and all(isinstance(n, int) and n > 1 for n in saved["frames"])


def test_resume_on_a_clip_set_with_a_clip_removed_is_refused_in_one_line_naming_env_motions(clip_run, capsys):
    run, clips = clip_run
    (clips / "demo_punch.npz").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    code, err = _resume(run, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: {run / 'checkpoints' / 'latest.pt'}: trained on other clips than env.motions (")
    assert str(clips) in err and ": removed demo_punch; put back the clips it trained on" in err
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before


def test_resume_on_another_clip_set_of_the_same_size_is_refused_naming_what_changed(clip_run, capsys):
    run, clips = clip_run
    (clips / "demo_punch.npz").unlink()  # as many clips as before, one of them another
    (added,) = write_demo_variants(clips, 1)
    code, err = _resume(run, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f": removed demo_punch; added {added.stem}; put back" in err


def test_a_checkpoint_without_clip_names_is_compared_by_its_count_and_says_so(clip_run, capsys, caplog):
    run, clips = clip_run
    for path in (run / "checkpoints").glob("*.pt"):  # as an earlier version wrote them
        state = torch.load(path, weights_only=True)
        del state["clips"]
        torch.save(state, path)
    with caplog.at_level(logging.WARNING):
        code, err = _resume(run, capsys)
    assert code == 0, err
    warned = [r.getMessage() for r in caplog.records if "names no clips" in r.getMessage()]
    assert warned and "only their number (5) was compared with env.motions" in warned[0]
    (clips / "demo_punch.npz").unlink()
    state = torch.load(run / "checkpoints" / "latest.pt", weights_only=True)
    del state["clips"]
    torch.save(state, run / "checkpoints" / "latest.pt")
    code, err = _resume(run, capsys, iterations=4)
    assert code == 2 and err.count("\n") == 1, err
    assert "trained on 5 clips, env.motions (" in err and ") loads 4 now (this checkpoint, from an earlier" in err


def _lib(names, frames):
    return SimpleNamespace(names=list(names), num_frames=torch.tensor(frames))


def test_the_change_names_at_most_three_clips_of_each_kind_then_counts():
    saved = {"names": ["a", "b", "c", "d", "e", "f"], "frames": [10, 20, 30, 40, 50, 60]}
    assert clip_set_change(saved, _lib(saved["names"], saved["frames"])) is None
    assert clip_set_change(saved, _lib(["f"], [61])) == "removed a, b, c and 2 more; changed f (60 -> 61 frames)"
    assert clip_set_change(saved, _lib(reversed(saved["names"]), saved["frames"][::-1])) == (
        "the same clips in another order"
    )


def test_resume_removes_the_temporary_of_a_checkpoint_write_killed_outright(clip_run, capsys):
    run, _ = clip_run
    ckpts = run / "checkpoints"
    dead = [ckpts / ".iter_000009.pt.k1ll3d_x.tmp", ckpts / ".latest.pt.abcdefgh.tmp"]  # iteration 9: never rewritten
    for path in dead:
        path.write_bytes(b"half a checkpoint")
    kept = ckpts / ".notes.txt.abcdefgh.tmp"  # not a checkpoint's
    kept.write_text("keep")
    code, err = _resume(run, capsys)
    assert code == 0, err
    assert not any(p.exists() for p in dead) and kept.exists()
