"""RGSD-SMPL-v0: the SMPL humanoid imitating and varying reference motions.

## Description
A 69-DoF SMPL humanoid (MuJoCo) starts each episode from a reference state
(RSI: a clip and a frame drawn uniformly) and receives a skill ``z``, a unit
vector in R^16. With probability ``p_imitation`` (0.7) the episode is an
*imitation* episode and ``z = z_m``, the clip's embedding under the frozen
encoder; otherwise it is a *discovery* episode with ``z`` uniform on the sphere.
Evaluation can ask for ``z ~ vMF(z_m, kappa)`` (``eval_kappa`` or
``reset(options={"kappa": ...})``).

## Action space
``Box(-1, 1, (69,), float32)``: one PD target per hinge, in
``skeleton.DOF_NAMES`` order; target = offset + scale * action with offset the
middle of the hinge's range and scale half its width. Actions are held for one
30 Hz control step (several physics steps).

## Observation space
Default (constructor argument ``obs_mode="flat"``): ``Box(-inf, inf, (375,), float32)`` =
``[o_t (359), z (16)]``, slices in ``observations.POLICY_LAYOUT``: phase 0:1,
root height 1:2, body positions 2:71, body rotations 71:215, body linear
velocities 215:287, body angular velocities 287:359, skill 359:375 (see
``rgsd_envs.envs.observations`` for the frames). ``obs_mode="dict"``:
``{"proprio": Box(359), "skill": Box(16)}``. The skill's size is the config's ``skill_dim`` (16 by default, the
paper's; 32 gives ``Box(391)``), which the encoder's output and a trained policy's input must match.

## Rewards
The bare environment returns 0; the registered ``RGSD-SMPL-v0`` adds the
encoder reward ``r = C + kappa * mu(s')^T z`` (``rgsd_envs.rewards.encoder_reward``),
frozen encoder for imitation episodes, trainable encoder for discovery.

## Episode end
* truncated: the reference clip's last frame is reached (the phase runs in
  discovery episodes too; ``discovery_end_frame`` lets discovery episodes run on
  to that frame index, the phase held at 1 past the clip's end);
* terminated: a fall (the pelvis below ``fall_height`` or a body other than the
  feet/toes touching the floor), in imitation episodes a mean body-position
  error above ``deviation.threshold`` (0.5 m), or simulator instability (the
  world is reset by MuJoCo; the process carries on).

## Info
``task`` (1 imitation, 0 discovery), ``clip_id``, ``frame``, ``ref_body_pos``
(24, 3) of the current reference frame, ``cartesian_error`` (m, mean over
bodies), ``fall``, ``deviation``, ``unstable``; the registered ``RGSD-SMPL-v0``
adds ``encoder_reward`` (a step's, not a reset's).

## Reset options
``clip`` (index or name), ``start_frame``, ``task`` ("imitation"/"discovery" or 1/0),
``skill`` (16 numbers) and ``kappa`` (vMF around z_m) fix parts of the next
episode. In the vector env each may also be given per world: a list with one
entry per reset world (an (n, 16) array for ``skill``); ``reset_mask`` (one bool
per world, at least one True, as ``SyncVectorEnv`` takes it) resets only some
worlds. Any other key is an error (``core.RESET_OPTIONS``).

## Torch interface
``rgsd_envs.RGSDTorchEnv`` is the same environment with tensors in and out on its
device (one host read per step); rgsd's trainers use it, and both Gymnasium
classes below are numpy adapters over it.

## Vector environment
``gymnasium.make_vec("RGSD-SMPL-v0", num_envs=N)`` returns the native
``RGSDVectorEnv``: all worlds are stepped by C threads and every computation is
batched. Autoreset mode ``SameStep`` by default (``final_obs``/``final_info``
in the info, as ``SyncVectorEnv`` lays them out), ``NextStep`` on request
(constructor argument ``autoreset_mode``); declared in ``metadata["autoreset_mode"]``.
``obs_mode`` and ``autoreset_mode`` are arguments of the Gymnasium classes, not
``EnvConfig`` fields: they change how episodes reach a Gymnasium caller, not
the episodes (rgsd's trainers use the torch interface, which has neither).

## Seeding
``reset(seed=s)`` gives a world the key of seed ``s`` (the vector env: world i
gets ``s + i``); every episode's clip, start frame, task and skill are then a
fixed function of (key, episode number), drawn for all reset worlds at once
(``world_random``). So the same seed gives the same episodes on any device, and
world i of a vector env equals a single env seeded ``s + i``.

## Version history
* v0: initial release; ``skill_dim`` (default 16) added without changing the default spaces.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.core import RGSDCore
from rgsd_envs.envs.spaces import single_spaces
from rgsd_envs.envs.torch_env import RGSDTorchEnv, make_config
from rgsd_envs.humanoid.mjcf import CONTROL_HZ
from rgsd_envs.motion.library import MotionLib, MotionSource
from rgsd_envs.rewards.encoders import EncoderLike
from rgsd_envs.utils.threads import env_side

Tensor = torch.Tensor


OBS_MODES = ("flat", "dict")


def check_obs_mode(obs_mode: str) -> str:
    """``obs_mode`` if it is one of ``OBS_MODES``, else a clear error."""
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be 'flat' or 'dict', got {obs_mode!r}")
    return obs_mode


def owned_array(t: Tensor) -> np.ndarray:
    """``t`` as a numpy array the caller owns: on a CPU device ``.cpu().numpy()`` would share the env's live tensor
    (the skill is rewritten in place at a reset), so an observation kept in a buffer would change under it."""
    return t.detach().to("cpu", copy=True).numpy()


class _Observer:
    """Turns the torch env's tensors into Gymnasium observations (numpy at the boundary)."""

    torch_env: RGSDTorchEnv
    cfg: EnvConfig
    obs_mode: str

    @property
    def core(self) -> RGSDCore:
        """The batched episode logic (shared with the torch env)."""
        return self.torch_env.core

    @property
    def motion_lib(self) -> MotionLib:
        """The reference clips."""
        return self.torch_env.core.lib

    def _obs(self, index: Any = slice(None)) -> Any:
        f, z = self.core.features[index], self.core.skill[index]
        if self.obs_mode == "dict":
            return {"proprio": owned_array(f), "skill": owned_array(z)}
        return torch.cat((f, z), dim=-1).cpu().numpy()  # cat made a new tensor: nothing of the env's to share

    def _with_reward(self, info: dict[str, Any], reward: Tensor, index: Any = slice(None)) -> dict[str, Any]:
        """``info`` with ``encoder_reward`` when the torch env scores transitions (the registered env)."""
        if self.torch_env.reward_core is not None:
            info["encoder_reward"] = reward[index].cpu().numpy()
        return info


class RGSDEnv(_Observer, gym.Env):
    """One world of RGSD-SMPL-v0 (see the module docstring): a numpy adapter over ``RGSDTorchEnv``."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": CONTROL_HZ}

    def __init__(
        self,
        config: EnvConfig | dict | None = None,
        motions: MotionSource | MotionLib | None = None,
        encoder: EncoderLike | str | None = None,
        render_mode: str | None = None,
        obs_mode: str = "flat",
        **overrides: Any,
    ):
        self.cfg = make_config(config, overrides)
        self.obs_mode = check_obs_mode(obs_mode)
        self.torch_env = RGSDTorchEnv(1, self.cfg, motions=motions, encoder=encoder, encoder_reward=False)
        self.observation_space, self.action_space = single_spaces(self.obs_mode, self.cfg.skill_dim)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self._renderer = None
        self._info: dict[str, Any] = {}

    @env_side
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Start an episode (RSI); ``options`` may fix clip, start_frame, task, skill or kappa."""
        super().reset(seed=seed)
        if seed is not None:
            self.core.seed([0], [seed])
        info = self.torch_env.restart(np.zeros(1, dtype=np.int64), options)
        self._info = _scalars(info.numpy(0))
        return self._obs(0), dict(self._info)

    @env_side
    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One 30 Hz control step."""
        tr = self.torch_env.transition(self.core.check_actions(action))
        self._info = _scalars(tr.info.numpy(0))
        info = self._with_reward(dict(self._info), tr.reward, 0)
        if "encoder_reward" in info:
            info["encoder_reward"] = float(info["encoder_reward"])
        return self._obs(0), 0.0, bool(tr.terminated_host[0]), bool(tr.truncated_host[0]), info

    def render(self) -> np.ndarray | None:
        """An RGB frame of the current state (render_mode="rgb_array")."""
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            from rgsd_envs.render import HumanoidRenderer

            self._renderer = HumanoidRenderer(model=self.core.backend.model)
        qpos = self.core.backend.state().qpos[:1].cpu().numpy()
        return self._renderer.frames(qpos)[0]

    def close(self) -> None:
        """Release the simulator and renderer."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self.torch_env.close()


def _scalars(info: dict[str, np.ndarray]) -> dict[str, Any]:
    """Single-world info: numpy scalars and arrays without the batch axis."""
    return {k: (v.item() if v.ndim == 0 else v) for k, v in info.items()}


class RGSDVectorEnv(_Observer, VectorEnv):
    """N worlds of RGSD-SMPL-v0 stepped together (the native vector environment): a numpy adapter over
    ``RGSDTorchEnv`` with Gymnasium's autoreset modes."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int = 64,
        config: EnvConfig | dict | None = None,
        motions: MotionSource | MotionLib | None = None,
        encoder: EncoderLike | str | None = None,
        obs_mode: str = "flat",
        autoreset_mode: str | AutoresetMode = AutoresetMode.SAME_STEP,
        **overrides: Any,
    ):
        self.cfg = make_config(config, overrides)
        self.num_envs = num_envs
        self.obs_mode = check_obs_mode(obs_mode)
        if AutoresetMode(autoreset_mode) not in (AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP):
            raise ValueError(f"autoreset_mode must be 'SameStep' or 'NextStep', got {autoreset_mode!r}")
        self.torch_env = RGSDTorchEnv(num_envs, self.cfg, motions=motions, encoder=encoder, encoder_reward=False)
        self.single_observation_space, self.single_action_space = single_spaces(self.obs_mode, self.cfg.skill_dim)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._all_ids = np.arange(num_envs)

    @env_side
    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset all worlds (or those in ``options["reset_mask"]``); int seeds give world i seed + i."""
        ids, options = self.torch_env.seed_reset(seed, options)
        info = self.torch_env.restart(ids, options)
        self._autoreset[ids] = False
        return self._obs(), vector_info(info.numpy(), ids, self.num_envs, rows=ids)

    @env_side
    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step all worlds; finished episodes restart as ``autoreset_mode`` says."""
        a = self.core.check_actions(actions)
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            pending = np.flatnonzero(self._autoreset)
            # the pending worlds restart below: they make no transition (and no physics step)
            tr = self.torch_env.transition(a, stepped=~self._autoreset)
            term_np, trunc_np = tr.terminated_host, tr.truncated_host
            self._autoreset = term_np | trunc_np
            values = self._with_reward(tr.info.numpy(), tr.reward)
            rows = self.torch_env.restart(pending).numpy() if pending.size else None
            return self._obs(), rewards, term_np, trunc_np, step_info(values, n, pending, rows)
        tr = self.torch_env.transition(a)
        done = np.flatnonzero(tr.done_host)
        values = self._with_reward(tr.info.numpy(), tr.reward)
        final = rows = None
        if done.size:
            final = {"final_obs": self._obs(done), "final_info": {k: v[done] for k, v in values.items()}}
            rows = self.torch_env.restart(done).numpy()
        infos = step_info(values, n, done, rows, final)
        return self._obs(), rewards, tr.terminated_host.copy(), tr.truncated_host.copy(), infos

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (simulator, episodes, generators)."""
        return {"core": self.core.state_dict(), "autoreset": torch.from_numpy(self._autoreset.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue exactly from ``state_dict``."""
        self.core.load_state_dict(state["core"])
        self._autoreset = torch.as_tensor(state["autoreset"]).numpy().astype(bool)

    def close_extras(self, **kwargs: Any) -> None:
        """Release the simulator (none yet where the constructor refused its arguments: Gymnasium closes on deletion)."""
        torch_env = getattr(self, "torch_env", None)
        if torch_env is not None:
            torch_env.close()


def final_obs_info(obs_rows: Any, done: Any, n: int) -> dict[str, np.ndarray]:
    """``final_obs`` (object array, an entry per finished world) and its ``_final_obs`` mask, as
    SyncVectorEnv lays them out; ``obs_rows`` holds the finished worlds' observations in ``done`` order."""
    done = np.asarray(done, dtype=np.int64)
    final_obs = np.full(n, None, dtype=object)
    if isinstance(obs_rows, dict):
        final_obs[done] = [{key: v[k] for key, v in obs_rows.items()} for k in range(done.size)]
    else:  # one row view per finished world, made in C
        final_obs[done] = np.fromiter(obs_rows, dtype=object, count=done.size)
    return {"final_obs": final_obs, "_final_obs": _mask(done, n)}


def _mask(ids: Any, n: int) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[np.asarray(ids, dtype=np.int64)] = True
    return m


def step_info(
    values: dict[str, np.ndarray],
    n: int,
    restarted: Any = (),
    reset_rows: dict[str, np.ndarray] | None = None,
    final: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A vector step's info as ``SyncVectorEnv`` builds it from single envs: ``values`` (N, ...) of the step, except
    that the worlds ``restarted`` report their reset's info (``reset_rows``, in ``restarted`` order), so a key only
    one of the two has is absent (mask False, value 0) for the others. ``final``: SameStep's ``final_obs`` (rows in
    ``restarted`` order) and ``final_info`` (the step's values of the restarted worlds, in that order)."""
    restarted = np.asarray(restarted, dtype=np.int64)
    if not restarted.size:
        return vector_info(values, np.arange(n), n)
    kept = np.flatnonzero(~_mask(restarted, n))
    infos = vector_info({k: v[kept] for k, v in values.items()}, kept, n, rows=kept)
    for k, v in (reset_rows or {}).items():
        if k in infos:
            infos[k][restarted] = v
            infos[f"_{k}"][restarted] = True
        else:
            infos.update(vector_info({k: v}, restarted, n, rows=restarted))
    if final is not None:
        infos.update(final_obs_info(final["final_obs"], restarted, n))
        infos["final_info"] = vector_info(final["final_info"], restarted, n, rows=restarted)
        infos["_final_info"] = _mask(restarted, n)
    return infos


def vector_info(values: dict[str, np.ndarray], ids: Any, n: int, rows: Any = None) -> dict[str, Any]:
    """Gymnasium vector info: each key batched over worlds with a ``_key`` presence mask; one number per world is
    float64 when it is a float (a single env's info holds Python floats, which SyncVectorEnv batches as float64)."""
    ids = np.asarray(ids, dtype=np.int64)
    mask = _mask(ids, n)
    out: dict[str, Any] = {}
    for k, v in values.items():
        dtype = np.float64 if v.ndim == 1 and v.dtype.kind == "f" else v.dtype
        if rows is None and ids.size == n:
            arr = v.astype(dtype, copy=False)
        else:
            arr = np.zeros((n, *v.shape[1:]), dtype=dtype)
            arr[ids] = v if rows is not None else v[ids]
        out[k] = arr
        out[f"_{k}"] = mask.copy()
    return out
