"""MotionLib: many clips in batched torch tensors, sampled and interpolated per environment."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from rgsd_envs.motion.clip import CLIP_FPS, MotionClip, load_clip, validate_clip
from rgsd_envs.utils import rotations as rot
from rgsd_envs.utils.files import InputFileError
from rgsd_envs.utils.listing import first_few

Tensor = torch.Tensor
MotionSource = str | os.PathLike | MotionClip | Sequence["str | os.PathLike | MotionClip"]
"""What a MotionLib loads: "demo", a clip file, a folder of clips, clips, or a list of these."""


@dataclass
class ReferenceState:
    """Batched reference state of N (clip, time) pairs; world frame, SMPL body order."""

    root_pos: Tensor
    root_rot: Tensor
    dof_pos: Tensor
    root_lin_vel: Tensor
    root_ang_vel: Tensor
    """World frame."""
    dof_vel: Tensor
    body_pos: Tensor
    body_rot: Tensor
    body_lin_vel: Tensor
    body_ang_vel: Tensor

    @property
    def qpos(self) -> Tensor:
        """MuJoCo generalized positions (N, 76)."""
        return torch.cat((self.root_pos, self.root_rot, self.dof_pos), -1)

    @property
    def qvel(self) -> Tensor:
        """MuJoCo generalized velocities (N, 75); root angular velocity in the pelvis frame."""
        local_w = rot.quat_rotate_inv(self.root_rot, self.root_ang_vel)
        return torch.cat((self.root_lin_vel, local_w, self.dof_vel), -1)


_FRAME_FIELDS = tuple(f.name for f in fields(ReferenceState))
_QUAT_FIELDS = ("root_rot", "body_rot")


def clip_files(path: str | os.PathLike) -> list[Path]:
    """The clip files of a clip file or a folder of clips (without loading them); a clear error if there are none."""
    path = Path(path)
    if not path.exists():
        raise InputFileError(path, "motions not found: give 'demo', an rgsd clip file (.npz) or a folder of clips")
    if not path.is_dir():
        return [path]
    files = sorted(path.glob("*.npz"))
    if not files:
        raise InputFileError(path, "folder holds no .npz motion clips" + _nested_motions_hint(path))
    return files


MAX_SEARCHED_FILES = 10_000
"""Files an empty folder's hint looks through below it (a whole AMASS tree can hold many more)."""


def _nested_motions_hint(folder: Path) -> str:
    """What an empty clip folder's subfolders hold: clip folders to give instead, AMASS files to convert with
    ``rgsd-motions import`` ("" when they hold no .npz files)."""
    from itertools import islice

    from rgsd_envs.motion.amass import AMASS_FILE_SUFFIXES

    found = list(islice((f for f in folder.rglob("*.npz") if not f.name.startswith(".")), MAX_SEARCHED_FILES))
    amass = sorted({f.parent for f in found if f.name.endswith(AMASS_FILE_SUFFIXES)})
    clips = sorted({f.parent for f in found if not f.name.endswith(AMASS_FILE_SUFFIXES)})
    hints = (
        [f"{first_few(clips, 3)} hold{'s' if len(clips) == 1 else ''} .npz clips: give one of them"] if clips else []
    )
    if amass:  # one folder of them: import it; several: import the whole tree (the import searches it)
        source = amass[0] if len(amass) == 1 else folder
        hints.append(
            f"{first_few(amass, 3)} hold{'s' if len(amass) == 1 else ''} AMASS files: convert them to clips with "
            f"`rgsd-motions import {source} --out DIR` and give DIR"
        )
    return "".join(f"; {h}" for h in hints)


def _collect(source: MotionSource) -> list[tuple[MotionClip, str]]:
    """Each clip a source names, with where it came from (its file, a built-in demo clip, a clip object)."""
    if isinstance(source, MotionClip):
        validate_clip(source, "a clip object")  # files are checked as they load; a clip built in memory is not
        return [(source, "a clip object")]
    if isinstance(source, (str, os.PathLike)):
        if str(source) == "demo":
            from rgsd_envs.motion.demo import demo_clips

            return [(c, "a built-in demo clip") for c in demo_clips()]
        return [(load_clip(f), str(f)) for f in clip_files(source)]
    clips: list[tuple[MotionClip, str]] = []
    for item in source:
        clips += _collect(item)
    return clips


def _check_unique_names(found: list[tuple[MotionClip, str]]) -> None:
    """Clip names index the clips: a repeated one is an error naming where each copy came from."""
    origins: dict[str, list[str]] = {}
    for clip, origin in found:
        origins.setdefault(clip.name, []).append(origin)
    repeated = {name: where for name, where in origins.items() if len(where) > 1}
    if repeated:
        name, *others = sorted(repeated)
        more = f" (also repeated: {', '.join(others)})" if others else ""
        raise ValueError(f"clip names must be unique; {name!r} is the name of {' and '.join(repeated[name])}{more}")


def _check_body_shapes(found: list[tuple[MotionClip, str]]) -> int:
    """The index of a clip whose body shape every clip shares; else an error naming a clip of another shape and the
    file of one of the most clips' shape (the first clip's where no shape has most)."""
    groups: list[list[int]] = []  # clips by body shape, in order of first appearance
    for i, (clip, _) in enumerate(found):
        group = next(
            (g for g in groups if np.allclose(clip.body_offsets, found[g[0]][0].body_offsets, atol=1e-6)), None
        )
        if group is None:
            groups.append([i])
        else:
            group.append(i)
    if len(groups) == 1:
        return 0
    common = max(groups, key=len)  # the first of the largest: the first clip's shape on a tie
    tie = sum(len(g) == len(common) for g in groups) > 1
    odd = next(i for g in groups if g is not common for i in g)
    others = len(found) - len(common) - 1
    (clip, origin), (ref, ref_origin) = found[odd], found[common[0]]
    shared = "the first clip's" if tie else f"the shape of {len(common)} of the {len(found)} clips"
    more = f"; {others} other clip{'s' if others > 1 else ''} differ{'' if others > 1 else 's'} too" if others else ""
    raise InputFileError(
        origin,
        f"clip {clip.name!r} was made for another body shape than {ref.name!r} ({ref_origin}, {shared}){more}; "
        "clips of one library share one body: import them all with the same --smpl-model and --betas",
        "body_offsets",
    )


class MotionLib:
    """Reference clips concatenated into torch tensors on one device.

    Sampling and lookup are batched over environments: ``sample_clips(n)``,
    ``sample_start_frames(ids)``, ``frame_state(ids, frames)`` (exact frames) and
    ``state_at(ids, times)`` (interpolated: rotations slerp, the rest lerp).
    """

    def __init__(self, source: MotionSource, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32):
        found = _collect(source)
        if not found:
            raise ValueError("MotionLib needs at least one clip")
        _check_unique_names(found)
        clips = [clip for clip, _ in found]
        names = [c.name for c in clips]
        ref = clips[_check_body_shapes(found)].body_offsets
        self.device = torch.device(device)
        self.dtype = dtype
        self.clips = clips
        self.origins: list[str] = [origin for _, origin in found]
        """Where each clip came from: its file, "a built-in demo clip" or "a clip object" (for messages)."""
        self.names: list[str] = names
        self.categories: list[str] = [c.category for c in clips]
        self.body_offsets = np.asarray(ref, dtype=np.float64)
        self.fps = CLIP_FPS
        lengths = np.array([c.num_frames for c in clips])
        self.num_frames = torch.as_tensor(lengths, device=self.device)
        """(M,) frames per clip."""
        self.starts = torch.as_tensor(np.concatenate([[0], np.cumsum(lengths)[:-1]]), device=self.device)
        """(M,) index of each clip's first frame in the concatenated tensors."""
        self.durations = (self.num_frames - 1).to(dtype) / self.fps
        """(M,) seconds from first to last frame."""
        self.clip_of_frame = torch.repeat_interleave(torch.arange(len(clips), device=self.device), self.num_frames)
        """(F,) clip index of every concatenated frame."""
        self._frames: dict[str, Tensor] = {}
        for name in _FRAME_FIELDS:
            arr = np.concatenate([getattr(c, name) for c in clips])
            self._frames[name] = torch.as_tensor(arr, dtype=dtype, device=self.device)
        # MuJoCo states of every frame, in float64 (RSI sets them exactly)
        self._qpos = torch.as_tensor(np.concatenate([c.qpos for c in clips]), device=self.device)
        self._qvel = torch.as_tensor(np.concatenate([c.qvel for c in clips]), device=self.device)

    def __len__(self) -> int:
        return len(self.clips)

    @property
    def num_clips(self) -> int:
        """Number of clips M."""
        return len(self.clips)

    @property
    def total_frames(self) -> int:
        """Frames over all clips."""
        return int(self.num_frames.sum())

    def clip_id(self, name: str) -> int:
        """Index of a clip by name."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no clip named {name!r}; clips are {', '.join(self.names)}") from None

    def frames(self, name: str) -> Tensor:
        """All frames of one field concatenated over clips, e.g. ``frames("body_pos")``."""
        return self._frames[name]

    def sample_clips(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """n clip indices, uniform over clips."""
        return torch.randint(self.num_clips, (n,), generator=generator, device=self.device)

    def sample_start_frames(self, clip_ids: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """A uniform start frame in each clip, excluding its last frame."""
        u = torch.rand(clip_ids.shape, generator=generator, device=self.device)
        return (u * (self.num_frames[clip_ids] - 1).to(u.dtype)).long()

    def frame_state(self, clip_ids: Tensor, frames: Tensor) -> ReferenceState:
        """Exact reference state at integer frames (clamped to each clip)."""
        frames = torch.minimum(frames.clamp_min(0), self.num_frames[clip_ids] - 1)
        idx = self.starts[clip_ids] + frames
        return ReferenceState(**{k: v[idx] for k, v in self._frames.items()})

    def frame_qpos_qvel(self, clip_ids: Tensor, frames: Tensor) -> tuple[Tensor, Tensor]:
        """MuJoCo (qpos, qvel) of integer frames, float64: what RSI sets."""
        frames = torch.minimum(frames.clamp_min(0), self.num_frames[clip_ids] - 1)
        idx = self.starts[clip_ids] + frames
        return self._qpos[idx], self._qvel[idx]

    def state_at(self, clip_ids: Tensor, times: Tensor) -> ReferenceState:
        """Reference state at times (s) from each clip's start, interpolated between frames."""
        f = (times.to(self.dtype) * self.fps).clamp_min(0)
        last = self.num_frames[clip_ids] - 1
        f0 = torch.minimum(f.floor().long(), last)
        f1 = torch.minimum(f0 + 1, last)
        a = (f - f0.to(f.dtype)).clamp(0, 1)
        i0, i1 = self.starts[clip_ids] + f0, self.starts[clip_ids] + f1
        out = {}
        for k, v in self._frames.items():
            x0, x1 = v[i0], v[i1]
            w = a.reshape(a.shape + (1,) * (x0.dim() - 1))
            out[k] = rot.quat_slerp(x0, x1, w) if k in _QUAT_FIELDS else x0 + w * (x1 - x0)
        return ReferenceState(**out)

    def to(self, device: str | torch.device) -> MotionLib:
        """This library on another device (a new object sharing the clips)."""
        lib = MotionLib(self.clips, device=device, dtype=self.dtype)
        lib.origins = list(self.origins)
        return lib

    def subset(self, clip_ids: Sequence[int]) -> MotionLib:
        """A library of just these clips, in the order given (a new object sharing the clips, on this device)."""
        lib = MotionLib([self.clips[i] for i in clip_ids], device=self.device, dtype=self.dtype)
        lib.origins = [self.origins[i] for i in clip_ids]
        return lib

    def __repr__(self) -> str:
        return f"MotionLib({self.num_clips} clips, {self.total_frames} frames, device={self.device})"


def load_motions(source: MotionSource) -> list[MotionClip]:
    """The clips a source names ("demo", file, folder, or a list of these)."""
    return [clip for clip, _ in _collect(source)]


def motion_categories(source: MotionSource) -> set[str]:
    """The categories of the clips a source names, read without loading the clips' arrays (a file that cannot be
    read is left to whatever loads the clips, which names it)."""
    from rgsd_envs.utils.files import read_npz

    out: set[str] = set()
    for item in source if isinstance(source, (list, tuple)) else [source]:
        if isinstance(item, MotionClip) or str(item) == "demo":
            out.update(clip.category for clip in load_motions(item))
            continue
        for f in clip_files(item):
            try:
                out.update(str(c) for c in read_npz(f, ("category",)).values())
            except InputFileError:
                continue
    return out
