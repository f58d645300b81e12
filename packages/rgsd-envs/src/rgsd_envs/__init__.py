"""rgsd-envs: the SMPL humanoid, motion library and Gymnasium environments for RGSD."""

import os as _os

# Offscreen rendering: MuJoCo picks its GL backend when it is first imported, and
# a machine without a display needs EGL (or OSMesa). Users can still override it.
_os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
