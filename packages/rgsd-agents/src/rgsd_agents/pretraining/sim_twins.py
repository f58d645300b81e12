"""Simulated twins of reference states: what a PD-driven body shows one to a few control steps from the
reference.

A reference clip is smooth; a policy's states near it are not. The twin of reference frame ``t`` is the
state the simulator reaches when a world starts at frame ``t - k`` (RSI, ``k = min(steps, t)``) and
steps ``k`` times with PD targets at the reference's next joint angles (open loop): its encoder input
(5 stacked frames) holds ``k`` simulated frames and the reference before them. The reward-sharpness
report scores them (its ``sim_twin`` column, ``rgsd_agents.pretraining.reward_sharpness``): a reward that pays the
twins far less than the references does not pay a policy's states near the reference either.
"""

from __future__ import annotations

import torch

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib

Tensor = torch.Tensor


def reference_actions(lib: MotionLib) -> Tensor:
    """(F, 69) actions whose PD targets are each reference frame's joint angles (clipped to [-1, 1])."""
    offset = torch.as_tensor(sk.ACTION_OFFSET, dtype=torch.float32)
    scale = torch.as_tensor(sk.ACTION_SCALE, dtype=torch.float32)
    return ((lib.frames("dof_pos").cpu().to(torch.float32) - offset) / scale).clamp(-1.0, 1.0)


def twin_frames(lib: MotionLib, steps: int, max_twins: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Global frame index (T,) of every frame with a twin (a clip's frames 1 .. n-2; at most ``max_twins``,
    evenly spaced), its start frame (T,) inside the clip and its step count (T,) ``min(steps, t)``."""
    if steps < 1:
        raise ValueError(f"sim twins need at least 1 simulated step, got steps = {steps}")
    rows = []
    for m in range(lib.num_clips):
        t = torch.arange(1, int(lib.num_frames[m]) - 1)
        k = t.clamp_max(steps)
        rows.append(torch.stack((int(lib.starts[m]) + t, t - k, k)))
    g, start, k = torch.cat(rows, dim=1)
    if max_twins is not None and g.numel() > max_twins:
        keep = torch.linspace(0, g.numel() - 1, max_twins).round().long()
        g, start, k = g[keep], start[keep], k[keep]
    return g, start, k


WORLDS_PER_BATCH = 512
"""Worlds simulated at once (about 0.45 MB each): memory stays bounded for any number of twins."""


@torch.no_grad()
def simulated_twins(
    lib: MotionLib, env_cfg: EnvConfig | None = None, steps: int = 4, max_twins: int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(T, 1795) encoder inputs of the twins, (T,) their reference frames' global indices and (T,) their mean
    body error (m) from the reference frame (module docstring).

    One world per twin, ``WORLDS_PER_BATCH`` at a time, on ``env_cfg``'s simulator settings (default
    ``EnvConfig()``), no early termination, on the reference backend (MuJoCo on the CPU: about half a second
    for the demo's 439 frames).
    """
    from rgsd_envs.envs.torch_env import RGSDTorchEnv

    cpu_lib = lib.to("cpu")
    g, start, k = twin_frames(cpu_lib, steps, max_twins)
    cfg = (env_cfg or EnvConfig()).without_early_termination(
        p_imitation=1.0, eval_kappa=None, device="cpu", backend="mujoco"
    )
    n = min(int(g.numel()), WORLDS_PER_BATCH)
    env = RGSDTorchEnv(num_envs=n, config=cfg, motions=cpu_lib)
    actions = reference_actions(cpu_lib)
    out = torch.empty(g.numel(), ENCODER_INPUT_DIM)
    error = torch.empty(g.numel())
    for first in range(0, g.numel(), n):
        rows = torch.arange(first, first + n).clamp_max(g.numel() - 1)  # the last batch repeats its last twin
        clip, s0, kk = cpu_lib.clip_of_frame[g[rows]], start[rows], k[rows]
        env.reset(options={"clip": clip.tolist(), "start_frame": s0.tolist(), "task": "imitation"})
        last = cpu_lib.starts[clip] + cpu_lib.num_frames[clip] - 1
        for j in range(1, int(kk.max()) + 1):
            *_, extras = env.step(actions[torch.minimum(cpu_lib.starts[clip] + s0 + j, last)])
            done = kk == j
            out[rows[done]] = extras.next_encoder_inputs[done]
            error[rows[done]] = extras.cartesian_error[done].float()
    env.close()
    return out.to(lib.device), g.to(lib.device), error.to(lib.device)
