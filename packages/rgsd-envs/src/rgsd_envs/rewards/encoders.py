"""State encoders mu(s): float32 (B, 1795) -> unit vectors (B, 16) (the env's ``skill_dim``, 16 by default).

An encoder is any callable with that contract, or a file saved by
``MLPEncoder.save``. Two are shipped:

* ``MLPEncoder``: the paper's encoder (docs/training.md, Pretraining), trained by ``rgsd pretrain``.
* ``ReferenceKernelEncoder``: a training-free default built from the reference
  clips. Each clip m gets a fixed direction u_m (orthonormal when there are at
  most 16 clips); a state's embedding is the kernel-weighted mix of the
  directions of the clips whose reference frames it resembles (phase, root
  height, body positions and velocities of the newest frame, standardised).
  Reference states map to their clip's direction, so ``r = C + kappa mu(s')^T z_m``
  is an imitation reward out of the box. It is what ``gym.make`` uses when no
  encoder is given; for the method itself, pretrain an MLPEncoder.
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, FRAME_DIM, FRAME_LAYOUT, SKILL_DIM
from rgsd_envs.utils.files import InputFileError, PickledObjectsError, load_plain, save_plain
from rgsd_envs.utils.threads import single_threaded

Tensor = torch.Tensor
EncoderLike = Callable[[Tensor], Tensor]
ENCODER_FILE_FORMAT = "rgsd-encoder"
ENCODER_FILE_VERSION = 1
PAPER_HIDDEN = (1024, 1024, 1024, 512)
"""The paper's encoder hidden sizes (its table "Hyperparameters")."""
DEFAULT_KAPPA = 10.0
"""vMF concentration: InfoNCE temperature 1/kappa and the reward's scale."""


class MLPEncoder(nn.Module):
    """mu_phi: input standardisation, MLP with ReLU, linear to 16, L2-normalised."""

    def __init__(
        self,
        hidden: Sequence[int] = PAPER_HIDDEN,
        input_dim: int = ENCODER_INPUT_DIM,
        out_dim: int = SKILL_DIM,
        kappa: float = DEFAULT_KAPPA,
    ):
        super().__init__()
        self.hidden = tuple(int(h) for h in hidden)
        self.input_dim = input_dim
        self.out_dim = out_dim
        self.kappa = float(kappa)
        layers: list[nn.Module] = []
        width = input_dim
        for h in self.hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, out_dim))
        self.net = nn.Sequential(*layers)
        self.register_buffer("input_mean", torch.zeros(input_dim))
        self.register_buffer("input_std", torch.ones(input_dim))

    def set_input_stats(self, mean: Tensor, std: Tensor) -> None:
        """Standardise inputs with these statistics (std floored at 1e-3)."""
        self.input_mean.copy_(mean)
        self.input_std.copy_(std.clamp_min(1e-3))

    def forward(self, x: Tensor) -> Tensor:
        """Unit embeddings (B, 16) of states (B, 1795)."""
        return F.normalize(self.net((x - self.input_mean) / self.input_std), dim=-1)

    def save(self, path: str | os.PathLike, **extra: Any) -> Path:
        """Write the encoder (and extra metadata, e.g. clip names/embeddings) atomically."""
        payload = {
            "format": ENCODER_FILE_FORMAT,
            "version": ENCODER_FILE_VERSION,
            "kind": "mlp",
            "hidden": list(self.hidden),
            "input_dim": self.input_dim,
            "out_dim": self.out_dim,
            "kappa": self.kappa,
            "state_dict": {k: v.detach().cpu() for k, v in self.state_dict().items()},
            **extra,
        }
        return save_plain(payload, path)


def read_encoder_file(path: str | os.PathLike, skill_dim: int | None = None) -> dict[str, Any]:
    """The raw payload of an encoder file, checked (``skill_dim``: the output size the caller needs, None: any);
    errors name the file and field."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(path, "no such encoder file (make one with `rgsd pretrain`)")
    try:
        payload = load_plain(path)
    except PickledObjectsError:
        raise
    except Exception as err:  # torch raises many types for corrupt files
        raise InputFileError(path, f"not a readable encoder file (truncated or corrupt?): {err}") from None
    if not isinstance(payload, dict) or payload.get("format") != ENCODER_FILE_FORMAT:
        raise InputFileError(path, f"not an rgsd encoder file (expected format '{ENCODER_FILE_FORMAT}')", "format")
    if payload.get("version") != ENCODER_FILE_VERSION:
        raise InputFileError(path, f"unsupported version {payload.get('version')}", "version")
    for key in ("hidden", "input_dim", "out_dim", "kappa", "state_dict"):
        if key not in payload:
            raise InputFileError(path, "missing", key)
    if payload["input_dim"] != ENCODER_INPUT_DIM:
        raise InputFileError(
            path,
            f"encoder maps {payload['input_dim']} -> {payload['out_dim']}, the environment needs {ENCODER_INPUT_DIM} inputs",
            "input_dim",
        )
    if skill_dim is not None and payload["out_dim"] != skill_dim:
        raise InputFileError(
            path,
            f"encoder maps states to {payload['out_dim']}-D skills, the environment's skill_dim is {skill_dim}; "
            f"set env.skill_dim: {payload['out_dim']} or pretrain an encoder with skill_dim {skill_dim}",
            "out_dim",
        )
    return payload


def load_encoder(path: str | os.PathLike, skill_dim: int | None = None) -> MLPEncoder:
    """Load an encoder saved by ``MLPEncoder.save`` (eval mode, on the CPU); ``skill_dim``: the output size the caller
    needs (None: any)."""
    payload = read_encoder_file(path, skill_dim)
    enc = MLPEncoder(payload["hidden"], payload["input_dim"], payload["out_dim"], payload["kappa"])
    try:
        enc.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise InputFileError(path, f"weights do not match the stored architecture: {err}", "state_dict") from None
    return enc.eval()


def stored_clip_embeddings(
    path: str | os.PathLike, names: Sequence[str], frames: Sequence[int], skill_dim: int | None = None
) -> Tensor | None:
    """The clip embeddings z_m (clips, d) an encoder file stores (``rgsd pretrain`` writes them with the names and
    frame counts of the clips it embedded), or None unless it stores them for exactly ``names``, in that order, of
    ``frames`` frames each: clips of the same names but other lengths are other clips, whose z_m would be wrong. A
    file without frame counts (``clip_frames``) is matched on the names alone."""
    payload = read_encoder_file(path, skill_dim)
    z = payload.get("clip_embeddings")
    if payload.get("clip_names") != list(names) or not isinstance(z, Tensor):
        return None
    stored_frames = payload.get("clip_frames")
    if stored_frames is not None and [int(n) for n in stored_frames] != [int(n) for n in frames]:
        return None
    return z.to(torch.float32) if tuple(z.shape) == (len(names), payload["out_dim"]) else None


def spread_directions(num: int, dim: int = SKILL_DIM, seed: int = 0) -> Tensor:
    """num unit vectors in R^dim, orthonormal if num <= dim, else spread apart.

    The caller's grad mode does not matter: with more clips than dimensions the
    vectors are optimised with autograd, switched on here (environments are
    built under ``torch.no_grad()`` too), and the result is a plain tensor even
    under ``torch.inference_mode()``.
    """
    # one thread: 300 steps of tiny ops, which on 2 busy cores waited minutes at OpenMP barriers (100 clips)
    with torch.inference_mode(False), torch.enable_grad(), single_threaded():
        g = torch.Generator().manual_seed(seed)
        if num <= dim:
            q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
            return q[:num].to(torch.float32)
        x = F.normalize(torch.randn(num, dim, generator=g, dtype=torch.float64), dim=-1).requires_grad_(True)
        opt = torch.optim.Adam([x], lr=0.05)
        for _ in range(300):  # push apart: minimise the soft maximum of pairwise cosines
            u = F.normalize(x, dim=-1)
            cos = u @ u.T - 2.0 * torch.eye(num, dtype=u.dtype)
            loss = torch.logsumexp(20.0 * cos, dim=-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return F.normalize(x.detach(), dim=-1).to(torch.float32)


_KEY_SLICES = ("phase", "root_height", "body_pos", "body_lin_vel")


def _kernel_keys(x: Tensor) -> Tensor:
    """Newest frame's phase, root height, body positions and velocities from (B, 1795)."""
    last = x[:, -FRAME_DIM:]
    return torch.cat([last[:, FRAME_LAYOUT[k]] for k in _KEY_SLICES], dim=-1)


NEAREST_CHUNK = 2048
"""Rows of the frame-to-frame distance matrix held at once: the full matrix of 500 clips (~45k frames) would
need 8 GB."""
BANDWIDTH_SAMPLE = 4096
"""Frames whose nearest-neighbour spacing sets the kernel's bandwidth: evenly spaced over the library (all of a
library this size or smaller), so the cost grows with the frames, not their square (400 clips, 70k frames: the
same bandwidth as from every frame, in 4 s instead of 47 s)."""
KERNEL_CHUNK = 1 << 25
"""States x reference frames compared at once by ``ReferenceKernelEncoder.forward`` (128 MB of float32): 4096
states against 116k frames held ~2 GB per matrix, three of them at once."""


def _nearest_other_distance(keys: Tensor, rows: Tensor | None = None) -> Tensor:
    """Distance from each of ``rows`` of ``keys`` (F, k) (None: every row) to its nearest other row,
    ``NEAREST_CHUNK`` rows at a time."""
    rows = torch.arange(keys.shape[0], device=keys.device) if rows is None else rows.to(keys.device)
    out = torch.empty(rows.shape[0], dtype=keys.dtype, device=keys.device)
    for start in range(0, rows.shape[0], NEAREST_CHUNK):
        chunk = rows[start : start + NEAREST_CHUNK]
        d = torch.cdist(keys[chunk], keys)
        d[torch.arange(d.shape[0], device=keys.device), chunk] = float("inf")
        out[start : start + d.shape[0]] = d.min(dim=1).values
    return out


def spaced_rows(total: int, most: int) -> Tensor:
    """Up to ``most`` row indices evenly spaced over ``total`` rows (all of them when ``total <= most``)."""
    if total <= most:
        return torch.arange(total)
    return torch.linspace(0, total - 1, most, dtype=torch.float64).round().long()


class ReferenceKernelEncoder(nn.Module):
    """Training-free default encoder: kernel-weighted mix of per-clip directions."""

    def __init__(
        self,
        reference_inputs: Tensor,
        clip_of_frame: Tensor,
        num_clips: int,
        kappa: float = DEFAULT_KAPPA,
        seed: int = 0,
        dim: int = SKILL_DIM,
    ):
        super().__init__()
        keys = _kernel_keys(reference_inputs.to(torch.float32))
        mean, std = keys.mean(0), keys.std(0).clamp_min(1e-2)
        keys = (keys - mean) / std
        nearest = _nearest_other_distance(keys, spaced_rows(keys.shape[0], BANDWIDTH_SAMPLE))
        # bandwidth: a few nearest-neighbour spacings, so each state sees its clip's local frames
        self.bandwidth = float(3.0 * nearest[torch.isfinite(nearest)].median().clamp_min(1e-3))
        self.kappa = float(kappa)
        self.num_clips = num_clips
        self.register_buffer("key_mean", mean)
        self.register_buffer("key_std", std)
        self.register_buffer("keys", keys)
        self.register_buffer("clip_of_frame", clip_of_frame.long())
        self.register_buffer("directions", spread_directions(num_clips, dim, seed))

    def forward(self, x: Tensor) -> Tensor:
        """Unit embeddings (B, 16) of states (B, 1795), ``KERNEL_CHUNK`` states x reference frames at a time."""
        k = (_kernel_keys(x.to(torch.float32)) - self.key_mean) / self.key_std
        rows = max(1, KERNEL_CHUNK // self.keys.shape[0])
        return torch.cat([self._embed_keys(k[i : i + rows]) for i in range(0, k.shape[0], rows)])

    def _embed_keys(self, k: Tensor) -> Tensor:
        """Unit embeddings (B, 16) of standardised keys (B, k)."""
        # -|k - k_f|^2 / (2 b^2), (B, F), in place: one matrix of the chunk's size
        logits = torch.cdist(k, self.keys).square_().div_(-2.0 * self.bandwidth**2)
        # per clip: its nearest frame's logit (a max over its frames), then a softmax over clips
        per_clip = torch.full((k.shape[0], self.num_clips), float("-inf"), device=k.device)
        per_clip = per_clip.scatter_reduce(1, self.clip_of_frame.expand(k.shape[0], -1), logits, reduce="amax")
        w = torch.softmax(per_clip, dim=-1)
        return F.normalize(w @ self.directions, dim=-1)


def check_encoder(
    encoder: EncoderLike,
    name: str = "encoder",
    device: torch.device | str = "cpu",
    input_dim: int = ENCODER_INPUT_DIM,
    skill_dim: int = SKILL_DIM,
) -> None:
    """Raise a clear error unless encoder maps float32 (B, input_dim) on ``device`` (the humanoid's: 1795) to unit
    vectors (B, skill_dim); it is probed with zeros (2, input_dim), a state every encoder must embed."""
    x = torch.zeros(2, input_dim, device=device)
    probe = f"the probe input torch.zeros(2, {input_dim})"
    contract = (
        f"A valid encoder maps every float32 (B, {input_dim}) input, all zeros included, to rows of norm 1 "
        f"(B, {skill_dim}): e.g. F.normalize(net(x), dim=-1) with a net that has biases (a normalised part of x "
        "itself is 0 on zeros)."
    )
    try:
        with torch.no_grad():
            out = encoder(x)
    except Exception as err:
        raise ValueError(f"{name} failed on {probe}: {err}. {contract}") from None
    if not isinstance(out, Tensor):
        kind = (
            type(out).__qualname__
            if type(out).__module__ == "builtins"
            else f"{type(out).__module__}.{type(out).__qualname__}"
        )
        raise ValueError(
            f"{name} returned a {kind} for {probe}; expected a torch.Tensor of "
            f"(2, {skill_dim}) unit vectors on the input's device. {contract}"
        )
    if tuple(out.shape) != (2, skill_dim):
        shape = tuple(out.shape)
        raise ValueError(
            f"{name} returned {shape} for {probe}; expected (2, {skill_dim}) unit vectors (the environment's "
            f"skill_dim). {contract}"
        )
    norms = out.norm(dim=-1)
    if not torch.allclose(norms, torch.ones_like(norms), atol=1e-3):
        raise ValueError(f"{name} must return unit vectors; on {probe} it returned norms {norms.tolist()}. {contract}")


def resolve_encoder(
    spec: EncoderLike | str | os.PathLike | None,
    default: Callable[[], EncoderLike],
    device: torch.device | str = "cpu",
    skill_dim: int = SKILL_DIM,
) -> EncoderLike:
    """An encoder from a callable, a file path, or None (then ``default()``), an nn.Module moved to ``device``
    (where the env's inputs live); checked there to map into R^skill_dim."""
    if spec is not None and not isinstance(spec, (str, os.PathLike)) and not callable(spec):
        raise TypeError(f"encoder must be a callable, a path to an encoder file, or None; got {type(spec).__name__}")
    return encoder_on(default() if spec is None else spec, device, skill_dim=skill_dim)


def encoder_on(
    spec: EncoderLike | str | os.PathLike,
    device: torch.device | str = "cpu",
    name: str = "encoder",
    input_dim: int = ENCODER_INPUT_DIM,
    skill_dim: int = SKILL_DIM,
) -> EncoderLike:
    """An encoder object or file on ``device`` (an nn.Module is moved there), checked there on (2, ``input_dim``)
    to give (2, ``skill_dim``) unit vectors."""
    enc = load_encoder(spec, skill_dim) if isinstance(spec, (str, os.PathLike)) else spec
    if isinstance(enc, nn.Module):
        enc.to(device)
    check_encoder(enc, name, device, input_dim, skill_dim)
    return enc


def trainable_copy(encoder: EncoderLike) -> EncoderLike:
    """A separate copy for discovery: the trainable twin of a frozen nn.Module encoder."""
    return copy.deepcopy(encoder) if isinstance(encoder, nn.Module) else encoder


@torch.no_grad()
def embed(encoder: EncoderLike, inputs: Tensor, batch_size: int = 4096) -> Tensor:
    """Encoder outputs for many inputs, in chunks, without gradients (an nn.Module's inputs moved to its device)."""
    first = (
        next(itertools.chain(encoder.parameters(), encoder.buffers()), None) if isinstance(encoder, nn.Module) else None
    )
    dev = inputs.device if first is None else first.device
    return torch.cat([encoder(inputs[i : i + batch_size].to(dev)) for i in range(0, inputs.shape[0], batch_size)])


def clip_embeddings(encoder: EncoderLike, reference_inputs: Tensor, clip_of_frame: Tensor, num_clips: int) -> Tensor:
    """z_m: the normalised mean of each clip's state embeddings (M, 16)."""
    e = embed(encoder, reference_inputs)
    sums = torch.zeros(num_clips, e.shape[1], dtype=e.dtype).index_add_(0, clip_of_frame.cpu(), e.cpu())
    return F.normalize(sums, dim=-1)


def within_motion_alignment(
    encoder: EncoderLike, reference_inputs: Tensor, clip_of_frame: Tensor, num_clips: int
) -> float:
    """Mean over clips of the mean cosine between each state's embedding and z_m."""
    e = embed(encoder, reference_inputs).cpu()
    z = clip_embeddings(encoder, reference_inputs, clip_of_frame, num_clips)
    cos = (e * z[clip_of_frame.cpu()]).sum(-1)
    per_clip = torch.zeros(num_clips, dtype=cos.dtype).index_add_(0, clip_of_frame.cpu(), cos)
    counts = torch.bincount(clip_of_frame.cpu(), minlength=num_clips).to(cos.dtype)
    return float((per_clip / counts).mean())


def as_numpy_directions(x: Tensor) -> np.ndarray:
    """float64 numpy copy of directions (for per-environment samplers)."""
    return x.detach().cpu().to(torch.float64).numpy()
