"""rgsd-envs: the SMPL humanoid, motion library and Gymnasium environments for RGSD.

``import rgsd_envs`` registers ``RGSD-SMPL-v0``::

    import gymnasium as gym
    import rgsd_envs

    env = gym.make("RGSD-SMPL-v0")                      # one world, encoder reward
    envs = gym.make_vec("RGSD-SMPL-v0", num_envs=64)    # native batched worlds
    task = gym.make("RGSD-SMPL-GoalReaching-v0", low_level="runs/demo", style="sidestep")

    env = rgsd_envs.RGSDTorchEnv(4096, backend="warp", device="cuda")  # tensors in and out on the GPU
    obs, extras = env.reset(seed=0)
    obs, reward, terminated, truncated, extras = env.step(actions)

Where things are: ``humanoid/`` (joint table, MJCF, body shape), ``motion/`` (clip format,
AMASS import, motion library), ``sim/`` (simulator interface and one module per backend),
``envs/`` (config, batched core, observation layout, skills, the versioned envs),
``rewards/`` (encoders and the encoder reward), ``runs/`` (run folder and exported
policy), ``render.py``, ``compat/`` (other RL libraries), ``utils/``.
"""

import os as _os

from rgsd_envs.utils.gl import default_mujoco_gl as _default_mujoco_gl

# Offscreen rendering: MuJoCo picks its GL backend when it is first imported, and a machine without a
# display needs EGL; without libEGL, rendering is disabled so that `import mujoco` still works (utils/gl.py;
# "" is MuJoCo's own default). Users can still override it with MUJOCO_GL.
_os.environ.setdefault("MUJOCO_GL", _default_mujoco_gl() or "")
# Idle OpenMP workers sleep instead of spinning on the cores MuJoCo steps on
# (only effective if torch is not imported yet; see rgsd_envs.utils.threads).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rgsd_envs.envs.config import EnvConfig
from rgsd_envs.envs.registration import ENV_ID, GOAL_ENV_ID, register_envs
from rgsd_envs.envs.torch_env import RGSDTorchEnv, StepExtras
from rgsd_envs.runs.policy import PolicyMLP, load_policy
from rgsd_envs.runs.run_dir import RunDir

register_envs()

__version__ = "0.1.0"
__all__ = [
    "ENV_ID",
    "GOAL_ENV_ID",
    "EnvConfig",
    "PolicyMLP",
    "RGSDTorchEnv",
    "RunDir",
    "StepExtras",
    "__version__",
    "load_policy",
]
