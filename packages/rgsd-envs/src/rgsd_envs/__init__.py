"""rgsd-envs: the SMPL humanoid, motion library and Gymnasium environments for RGSD.

``import rgsd_envs`` registers ``RGSD-SMPL-v0``::

    import gymnasium as gym
    import rgsd_envs

    env = gym.make("RGSD-SMPL-v0")                      # one world, encoder reward
    envs = gym.make_vec("RGSD-SMPL-v0", num_envs=64)    # native batched worlds
    task = gym.make("RGSD-SMPL-GoalReaching-v0", low_level="runs/demo", style="sidestep")
"""

import os as _os

# Offscreen rendering: MuJoCo picks its GL backend when it is first imported, and
# a machine without a display needs EGL (or OSMesa). Users can still override it.
_os.environ.setdefault("MUJOCO_GL", "egl")
# Idle OpenMP workers sleep instead of spinning on the cores MuJoCo steps on
# (only effective if torch is not imported yet; see rgsd_envs.threads).
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rgsd_envs.envs.registration import ENV_ID, register_envs

register_envs()

__version__ = "0.1.0"
__all__ = ["ENV_ID", "GOAL_ENV_ID", "__version__"]
