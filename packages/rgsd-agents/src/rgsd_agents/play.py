"""Watch a trained policy: roll out one clip's skill and render it to an mp4 or replay it in ``mujoco.viewer``.

The rollout is an evaluation rollout (``rgsd_eval.rollouts``): the humanoid
starts in the clip's first reference frame and runs the policy's mean action
with the skill ``z = z_m`` (the clip's embedding under the run's frozen
encoder, the clip's latent the run stored: CALM's ``clip_latents.json``, or, for a run that picks its latents by
best-of-N, the ones ``rgsd eval`` chose, given as ``latents``) or, with ``kappa``, one sample
``z ~ vMF(z_m, kappa)``, without early termination, to the clip's last frame. A run with per-step latents (Meta
Motivo's tracking inference, ``tracking_latents.npz``) changes the skill every step along the clip's track, as
``rgsd eval`` does; ``z_m`` is then the track's mean and ``kappa`` turns the whole track. The camera follows the pelvis
(``rgsd_envs.render.FollowCamera``).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rgsd_envs  # noqa: F401  (registers RGSD-SMPL-v0)
from rgsd_agents.run_skills import choose_latents, default_clip
from rgsd_envs.envs import skills
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.clip import CLIP_FPS
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.render import model_for_clip, render_side_by_side
from rgsd_envs.utils.progress import CountBar
from rgsd_eval.rollouts import RolloutJobs, SkillTracks, run_rollouts
from rgsd_eval.runs import load_run, on_cpu_mujoco


@dataclass
class PlayedRollout:
    """One rollout of a run's policy on a clip's skill."""

    clip: str
    clip_index: int
    skill: np.ndarray
    """(16,) the z the policy ran with (per-step latents: the z the clip's track was turned to)."""
    kappa: float | None
    qpos: np.ndarray
    """(T, 76) the simulated states, the start frame included."""
    reference_qpos: np.ndarray
    """(T, 76) the clip's frames over the same span."""
    error_cm: float
    """Mean Cartesian error to the reference over the whole clip (cm), also when ``frames`` cut the video short."""
    fell: bool
    model: object
    """The clip's humanoid model (mujoco.MjModel)."""


def play_rollout(
    run: str | os.PathLike,
    clip: str | None = None,
    kappa: float | None = None,
    frames: int | None = None,
    motions: str | None = None,
    seed: int = 0,
    progress: bool = True,
    latents: str | os.PathLike | None = None,
) -> PlayedRollout:
    """Roll out ``run``'s policy on ``clip``'s skill (default: ``run_skills.default_clip``); ``frames`` cuts it
    short; a progress bar with ``progress``; ``latents``: a clip_latents.json (``rgsd eval``'s) instead of the run's
    own latents (``run_skills.choose_latents``)."""
    loaded = on_cpu_mujoco(load_run(run))  # its method says how a clip's latent is picked (run_skills.choose_latents)
    source = motions or loaded.run.training_motions()
    lib = MotionLib(source)
    c = default_clip(list(lib.names)) if clip is None else _clip_index(lib.names, clip, source)
    if kappa is not None and not kappa > 0:
        raise ValueError(f"--kappa must be positive (larger: closer to z_m), got {kappa}")
    if frames is not None and frames < 1:
        raise ValueError(f"--frames must be at least 1, got {frames}")
    env = RGSDTorchEnv(
        1,
        encoder_reward=False,
        config=loaded.env_config,
        motions=lib,
        encoder=None if loaded.encoder_path is None else str(loaded.encoder_path),
    )
    try:
        chosen = choose_latents(loaded, lib, env.unwrapped.core.clip_embeddings.cpu().double().numpy(), latents)
        tracks = None if chosen.tracks is None else SkillTracks(chosen.tracks, chosen.centres)
        z_m = chosen.centres[c]
        z = z_m if kappa is None else skills.sample_vmf(np.random.default_rng(seed), z_m, float(kappa))
        jobs = RolloutJobs(clip=[c], skill=z[None], group=0, keep_qpos=True)
        res = run_rollouts(
            env, loaded.policy, jobs, seed=seed, fall_height=loaded.fall_height, features=False, skill_tracks=tracks,
            progress=progress, desc="rollout",
        )  # fmt: skip
    finally:
        env.close()
    qpos = res.qpos[0] if frames is None else res.qpos[0][:frames]
    ref = lib.clips[c].qpos[: len(qpos)]
    return PlayedRollout(
        clip=lib.names[c],
        clip_index=c,
        skill=z,
        kappa=kappa,
        qpos=qpos,
        reference_qpos=np.asarray(ref, dtype=np.float64),
        error_cm=100.0 * float(res.error[0]),
        fell=bool(res.fell[0]),
        model=model_for_clip(lib.clips[c]),
    )


def _clip_index(names: list[str], clip: str, source: object) -> int:
    """Index of ``clip`` in ``names``, or an error listing the clip names."""
    if clip in names:
        return names.index(clip)
    raise ValueError(f"no clip named {clip!r} in the motions {source!s}; choose --clip from: {', '.join(names)}")


def label(played: PlayedRollout) -> str:
    """The caption of a played rollout: clip and skill."""
    z = "z = z_m" if played.kappa is None else f"z ~ vMF(z_m, {played.kappa:g})"
    return f"{played.clip}: {z}"


def write_play_video(
    played: PlayedRollout,
    out_path: str | os.PathLike,
    size: tuple[int, int] = (640, 480),
    reference: bool = False,
    progress: bool = True,
) -> Path:
    """Render a played rollout (beside its reference with ``reference``) to an mp4 at 30 fps, with a progress bar
    over its tiles (a minute for a clip beside its reference on 2 cores); returns the path."""
    qs = [played.qpos] + ([played.reference_qpos] if reference else [])
    labels = [label(played)] + (["reference"] if reference else [])
    with CountBar("video", len(played.qpos) * len(qs), unit="tile", disable=not progress) as bar:
        return render_side_by_side(
            qs, out_path, labels=labels, fps=CLIP_FPS, width=size[0], height=size[1], model=played.model,
            on_frame=bar.advance,
        )  # fmt: skip


def has_display() -> bool:
    """Whether a window can be opened (a display on Linux; always assumed on macOS and Windows)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class NoDisplayError(RuntimeError):
    """``--viewer`` without a display."""


def view(played: PlayedRollout, loops: int | None = None) -> None:
    """Replay a played rollout in ``mujoco.viewer`` at 30 fps, looping until the window closes (or ``loops`` times)."""
    if not has_display():
        raise NoDisplayError(
            "--viewer needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set); "
            "render to a file instead: rgsd play RUN --out play.mp4"
        )
    import mujoco
    import mujoco.viewer

    model = played.model
    data = mujoco.MjData(model)
    done = 0
    with mujoco.viewer.launch_passive(model, data) as viewer:
        viewer.cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        viewer.cam.trackbodyid = 1  # the pelvis (body 0 is the world)
        viewer.cam.distance = 3.2
        while viewer.is_running() and (loops is None or done < loops):
            for q in played.qpos:
                start = time.perf_counter()
                data.qpos[:] = q
                mujoco.mj_forward(model, data)
                viewer.sync()
                if not viewer.is_running():
                    break
                time.sleep(max(0.0, 1.0 / CLIP_FPS - (time.perf_counter() - start)))
            done += 1
