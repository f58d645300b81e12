"""Body shape from a user's SMPL model and betas (optional ``smplx`` extra, docs/body_shape.md).

The neutral joint table (``skeleton.REST_OFFSETS``) is the default body. With
``pip install "rgsd-envs[smplx]"`` and a licensed SMPL model folder, the rest
joints of a subject follow from its shape coefficients:
``J = J_regressor @ (v_template + shapedirs · betas)``. The parent-relative
offsets of ``J`` (in our axes) give a humanoid of that body
(``HumanoidConfig(offsets=...)``), and ``J[0]`` (SMPL frame) is where AMASS puts
the pelvis relative to ``trans``. The model files are never shipped with rgsd.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.utils.files import InputFileError

GENDERS = ("neutral", "male", "female")
MODEL_KEYS = ("v_template", "shapedirs", "posedirs", "J_regressor", "weights", "kintree_table", "f")
"""Keys smplx's SMPL loader reads from a model file."""
INSTALL_HINT = 'pip install "rgsd-envs[smplx]"'


def model_file_names(gender: str) -> tuple[str, ...]:
    """File names looked for in a model folder, in order (smplx's naming)."""
    return (f"SMPL_{gender.upper()}.pkl", f"SMPL_{gender.upper()}.npz")


def find_model_file(model_dir: str | os.PathLike, gender: str = "neutral") -> Path:
    """The SMPL model file of a gender: ``model_dir`` itself if it is a file, else
    ``SMPL_<GENDER>.pkl`` (or ``.npz``) in the folder or in its ``smpl/`` subfolder."""
    if gender not in GENDERS:
        raise ValueError(f"gender must be one of {', '.join(GENDERS)}, got {gender!r}")
    path = Path(model_dir)
    if path.is_file():
        return path
    if not path.is_dir():
        raise InputFileError(path, "SMPL model folder not found; pass the folder that holds SMPL_NEUTRAL.pkl")
    for folder in (path, path / "smpl"):
        for name in model_file_names(gender):
            if (folder / name).is_file():
                return folder / name
    names = " or ".join(model_file_names(gender))
    raise InputFileError(
        path,
        f"no SMPL model for gender {gender!r}: looked for {names} in this folder and in its smpl/ subfolder; "
        "download SMPL from https://smpl.is.tue.mpg.de and rename the model file accordingly",
    )


def _read_model_file(path: Path) -> dict[str, Any]:
    """The raw arrays of a SMPL model file (.pkl as smplx reads it, or .npz)."""
    try:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                raw = {k: data[k] for k in data.files}
        else:
            with open(path, "rb") as f:
                raw = pickle.load(f, encoding="latin1")
    except ModuleNotFoundError as err:
        if err.name == "chumpy":
            raise InputFileError(
                path,
                "this model file stores chumpy arrays; `pip install chumpy`, or save a chumpy-free copy "
                "(smplx's tools/clean_ch.py does that)",
            ) from None
        raise
    except (pickle.UnpicklingError, zipfile.BadZipFile, EOFError, OSError, ValueError, TypeError) as err:
        raise InputFileError(path, f"not a readable SMPL model file: {err}") from None
    if not isinstance(raw, dict):
        raise InputFileError(path, f"expected a dict of model arrays, got {type(raw).__name__}")
    missing = [k for k in MODEL_KEYS if k not in raw]
    if missing:
        raise InputFileError(path, f"missing SMPL model key(s): {', '.join(missing)}", missing[0])
    nv = np.shape(raw["v_template"])[0]
    for key, shape in (("v_template", (nv, 3)), ("J_regressor", (sk.NUM_BODIES, nv)), ("weights", (nv, sk.NUM_BODIES))):
        if np.shape(raw[key]) != shape:
            raise InputFileError(path, f"expected shape {shape}, got {np.shape(raw[key])}", key)
    if len(np.shape(raw["shapedirs"])) != 3 or np.shape(raw["shapedirs"])[:2] != (nv, 3):
        raise InputFileError(
            path, f"expected shape ({nv}, 3, num_betas), got {np.shape(raw['shapedirs'])}", "shapedirs"
        )
    parents = np.asarray(raw["kintree_table"])
    if parents.ndim != 2 or parents.shape[1] != sk.NUM_BODIES:
        raise InputFileError(
            path, f"expected shape (2, {sk.NUM_BODIES}) (SMPL's 24 joints), got {parents.shape}", "kintree_table"
        )
    if [int(p) for p in parents[0, 1:]] != list(sk.PARENTS[1:]):
        raise InputFileError(
            path, "joint tree differs from SMPL's; is this a SMPL (not SMPL-H/X) model?", "kintree_table"
        )
    return raw


def _check_betas(betas: Any, num_shape: int, path: Path) -> np.ndarray:
    """Betas as a float64 vector of the model's length (zeros if None, padded if short)."""
    b = np.zeros(0) if betas is None else np.asarray(betas, dtype=np.float64)
    if b.ndim != 1:
        raise ValueError(f"betas must be a flat list of numbers, got shape {b.shape}")
    if b.shape[0] > num_shape:
        raise ValueError(
            f"got {b.shape[0]} betas but the SMPL model {path} has {num_shape} shape components; "
            f"pass at most {num_shape} (missing ones count as 0)"
        )
    if not np.isfinite(b).all():
        raise ValueError(f"betas must be finite numbers, got {b.tolist()}")
    return np.concatenate([b, np.zeros(num_shape - b.shape[0])])


def _smplx() -> Any:
    try:
        import smplx
    except ImportError:
        raise ImportError(f"body shapes from SMPL need the smplx package: {INSTALL_HINT}") from None
    return smplx


def rest_joints(model_dir: str | os.PathLike, betas: Any = None, gender: str = "neutral") -> np.ndarray:
    """Rest joint positions J (24, 3) of a SMPL body in SMPL's own frame (y up, z forward)."""
    smplx = _smplx()
    import torch
    from smplx.lbs import blend_shapes, vertices2joints
    from smplx.utils import Struct

    path = find_model_file(model_dir, gender)
    raw = _read_model_file(path)
    with contextlib.redirect_stdout(io.StringIO()):  # smplx prints a note about 10-beta models
        model = smplx.SMPL(
            str(path),
            data_struct=Struct(**raw),
            gender=gender,
            num_betas=np.shape(raw["shapedirs"])[-1],
            dtype=torch.float64,
        )
    if model.J_regressor.shape[0] != sk.NUM_BODIES:
        raise InputFileError(path, f"expected {sk.NUM_BODIES} rows, got {model.J_regressor.shape[0]}", "J_regressor")
    b = _check_betas(betas, model.num_betas, path)
    with torch.no_grad():
        beta_t = torch.as_tensor(b, dtype=torch.float64)[None]
        v_shaped = model.v_template[None] + blend_shapes(beta_t, model.shapedirs)
        joints = vertices2joints(model.J_regressor, v_shaped)[0].numpy()
    if not np.isfinite(joints).all():
        raise InputFileError(path, "the model gives non-finite joint positions", "v_template")
    return joints


def body_from_smpl(
    model_dir: str | os.PathLike, betas: Any = None, gender: str = "neutral"
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (24, 3, our axes) and pelvis rest joint J0 (3, SMPL frame) of a SMPL body shape."""
    joints = rest_joints(model_dir, betas, gender)
    rel = np.zeros_like(joints)
    for b in range(1, sk.NUM_BODIES):
        rel[b] = joints[b] - joints[sk.PARENTS[b]]
    offsets = rel @ sk.WORLD_FROM_SMPL.T
    return offsets, joints[0].copy()
