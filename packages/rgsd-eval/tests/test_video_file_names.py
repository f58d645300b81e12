"""Videos and replays are named after their clips, yet stay in their folder whatever the clip's name holds."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from rgsd_envs.motion.clip import clip_file_stem
from rgsd_envs.motion.demo import demo_clips
from rgsd_envs.motion.library import MotionLib
from rgsd_eval.config import EvalConfig
from rgsd_eval.videos import write_run_replays, write_run_videos

NAME = "wälk 2.ok"
"""A valid clip name with characters a file name should not carry (a space, a non-ASCII letter)."""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The files the video and replay writers make for one clip named ``NAME``."""
    walk = dataclasses.replace(next(c for c in demo_clips() if c.category == "walk"), name=NAME)
    lib = MotionLib([walk])
    q = walk.qpos[:7]
    ev = SimpleNamespace(imitation_qpos={0: q}, variant_qpos={0: [q]}, metrics={"latent": "encoder"}, label="run")
    cfg = EvalConfig(video_size=(32, 24), video_frame_step=6, video_kappa=20.0, progress=False)
    out = tmp_path_factory.mktemp("videos") / "videos"
    out.mkdir()
    paths = [p for _, p in write_run_videos(ev, lib, out, cfg) + write_run_replays(ev, lib, out, cfg)]
    return out, paths


def test_every_file_lies_directly_in_the_videos_folder(written):
    out, paths = written
    assert len(paths) == 3
    assert all(p.parent == out and p.is_file() for p in paths)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)


def test_files_are_named_by_the_clip_s_file_stem(written):
    _, paths = written
    stem = clip_file_stem(NAME)
    assert stem != NAME and " " not in stem and stem.isascii()
    assert sorted(p.name for p in paths) == sorted(
        [f"{stem}_imitation.mp4", f"{stem}_variants_k20.mp4", f"{stem}_replay.html"]
    )
