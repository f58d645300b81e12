"""The MuJoCo GL backend ``import rgsd_envs`` selects when the user has not set ``MUJOCO_GL``.

MuJoCo picks its GL backend when it is first imported. On a Linux machine without a display, offscreen
rendering needs EGL, so EGL is the default there. On a machine without libEGL (a bare GPU container, say),
``MUJOCO_GL=egl`` makes ``import mujoco`` itself fail (PyOpenGL raises AttributeError, which mujoco does not
catch). There the default is ``disable``: everything but rendering works, and rendering says what to install.
Elsewhere (macOS, Windows, a Linux desktop whose libEGL is missing) MuJoCo's own default is kept.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping

EGL_LIBRARY = "libEGL.so.1"
"""The EGL library PyOpenGL loads on Linux."""


def default_mujoco_gl(
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
    load: Callable[[str], object] = ctypes.CDLL,
) -> str | None:
    """The ``MUJOCO_GL`` to select when none is set: ``egl``, ``disable`` or None (MuJoCo's default)."""
    if not platform.startswith("linux"):
        return None
    try:
        load(EGL_LIBRARY)
        return "egl"
    except OSError:
        has_display = environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")
        return None if has_display else "disable"
