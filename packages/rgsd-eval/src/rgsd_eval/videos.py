"""Evaluation videos (H.264 mp4 via ``rgsd_envs.render``): imitation beside its reference, vMF variants side by
side; and per video clip one HTML replay of the same rollouts (``rgsd_eval.html_replay``) to orbit in a browser.

Tiles are 480 x 360 (``EvalConfig.video_size``) and shadow-free (software GL
renders them about three times faster); each tile's camera follows its
character's pelvis (``rgsd_envs.render.FollowCamera``). Every
``frame_step``-th frame is drawn and the video plays at 30 / frame_step fps, so
motion stays in real time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import mujoco
import numpy as np

from rgsd_envs.motion.clip import CLIP_FPS, clip_file_stem
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.render import DEFAULT_TILE_SIZE, model_for_clip, render_side_by_side
from rgsd_envs.utils.progress import CountBar
from rgsd_eval.config import EvalConfig
from rgsd_eval.evaluate import RunEvaluation
from rgsd_eval.html_replay import (
    POLICY_COLOR,
    REFERENCE_COLOR,
    VARIANT_COLORS,
    ReplayTrack,
    body_positions,
    write_replay,
)


def render_tiles(
    qpos_list: Sequence[np.ndarray],
    out_path: str | os.PathLike,
    labels: Sequence[str],
    size: tuple[int, int] = DEFAULT_TILE_SIZE,
    frame_step: int = 2,
    model: mujoco.MjModel | None = None,
    on_frame: Callable[[int], None] | None = None,
) -> Path:
    """Trajectories qpos (T_i, 76) as captioned, shadow-free tiles left to right in one mp4 (``on_frame(tiles)``
    after each frame)."""
    width, height = size
    return render_side_by_side(
        qpos_list,
        out_path,
        labels=labels,
        fps=CLIP_FPS,
        width=width,
        height=height,
        model=model,
        frame_step=frame_step,
        shadows=False,
        reflections=False,
        on_frame=on_frame,
    )


def write_run_videos(
    ev: RunEvaluation, lib: MotionLib, out_dir: str | os.PathLike, cfg: EvalConfig
) -> list[tuple[str, Path]]:
    """Imitation-vs-reference and variants videos of a run's video clips, with a progress bar over their tiles
    (``cfg.progress``); returns (caption, path) pairs."""
    out_dir = Path(out_dir)
    latent = ev.metrics["latent"]
    kappa = cfg.video_kappa_value
    videos = []  # (caption, file name, trajectories, labels)
    for c, q in sorted(ev.imitation_qpos.items()):
        name = lib.names[c]
        caption = f"{name}: imitation (left) and reference (right)"
        videos.append(
            (
                caption,
                f"{clip_file_stem(name)}_imitation.mp4",
                [q, lib.clips[c].qpos],
                [f"policy ({latent})", "reference"],
            )
        )
    for c, qs in sorted(ev.variant_qpos.items()):
        name = lib.names[c]
        labels = ["reference"] + [f"z~vMF k={kappa:g} #{i + 1}" for i in range(len(qs))]
        caption = f"{name}: reference and {len(qs)} discovered variants, z ~ vMF(z_m, {kappa:g})"
        videos.append((caption, f"{clip_file_stem(name)}_variants_k{kappa:g}.mp4", [lib.clips[c].qpos, *qs], labels))
    step = cfg.video_frame_step
    tiles = sum(-(-max(len(q) for q in qs) // step) * len(qs) for _, _, qs, _ in videos)
    model = model_for_clip(lib.clips[0])
    written: list[tuple[str, Path]] = []
    with CountBar(f"{ev.label}: videos", tiles, unit="tile", disable=not cfg.progress) as bar:
        for caption, file, qs, labels in videos:
            path = render_tiles(qs, out_dir / file, labels, cfg.video_size, step, model, on_frame=bar.advance)
            written.append((caption, path))
    return written


def write_run_replays(
    ev: RunEvaluation, lib: MotionLib, out_dir: str | os.PathLike, cfg: EvalConfig
) -> list[tuple[str, Path]]:
    """One HTML replay per video clip: the policy, its vMF variants and the reference ghost; (caption, path) pairs."""
    out_dir = Path(out_dir)
    written: list[tuple[str, Path]] = []
    kappa = cfg.video_kappa_value
    for c in sorted(set(ev.imitation_qpos) | set(ev.variant_qpos)):
        clip = lib.clips[c]
        tracks = []
        if c in ev.imitation_qpos:
            pos = body_positions(ev.imitation_qpos[c], clip.body_offsets)
            tracks.append(ReplayTrack(f"policy ({ev.metrics['latent']})", pos, POLICY_COLOR))
        for i, q in enumerate(ev.variant_qpos.get(c, [])):
            color = VARIANT_COLORS[i % len(VARIANT_COLORS)]
            tracks.append(ReplayTrack(f"z~vMF k={kappa:g} #{i + 1}", body_positions(q, clip.body_offsets), color))
        tracks.append(ReplayTrack("reference", clip.body_pos, REFERENCE_COLOR, ghost=True))
        title = f"{ev.label}: {clip.name}"
        path = write_replay(
            tracks, out_dir / f"{clip_file_stem(clip.name)}_replay.html", title, lib.fps, cfg.video_frame_step
        )
        variants = len(ev.variant_qpos.get(c, []))
        written.append((f"{clip.name}: 3D replay of the policy, {variants} variants and the reference", path))
    return written
