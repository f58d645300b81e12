"""Encoders: the contract, the file format, the training-free default encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, FRAME_DIM, FRAME_LAYOUT, reference_encoder_inputs
from rgsd_envs.envs.torch_env import RGSDTorchEnv
from rgsd_envs.motion.library import MotionLib
from rgsd_envs.rewards.encoders import (
    MLPEncoder,
    ReferenceKernelEncoder,
    check_encoder,
    clip_embeddings,
    load_encoder,
    spread_directions,
    within_motion_alignment,
)
from rgsd_envs.utils.files import InputFileError


@pytest.fixture(scope="module")
def lib(real_clip_dir):
    return MotionLib(real_clip_dir)


@pytest.fixture(scope="module")
def inputs(lib):
    return reference_encoder_inputs(lib)


def test_mlp_encoder_outputs_unit_vectors_and_round_trips_through_its_file(tmp_path):
    torch.manual_seed(0)
    enc = MLPEncoder(hidden=(32, 16), kappa=7.0)
    enc.set_input_stats(torch.randn(ENCODER_INPUT_DIM), torch.rand(ENCODER_INPUT_DIM) + 0.5)
    x = torch.randn(5, ENCODER_INPUT_DIM)
    out = enc(x)
    np.testing.assert_allclose(out.norm(dim=-1).detach(), 1.0, atol=1e-6)
    path = enc.save(tmp_path / "enc.pt", clip_names=["a", "b"])
    back = load_encoder(path)
    assert back.kappa == 7.0 and back.hidden == (32, 16)
    torch.testing.assert_close(back(x), out.detach())
    assert not list(tmp_path.glob(".*tmp"))


def test_loading_a_missing_corrupt_or_foreign_encoder_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputFileError, match="no such encoder file"):
        load_encoder(tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a torch file")
    with pytest.raises(InputFileError, match="not a readable encoder file"):
        load_encoder(bad)
    other = tmp_path / "other.pt"
    torch.save({"format": "something-else"}, other)
    with pytest.raises(InputFileError, match="not an rgsd encoder file") as err:
        load_encoder(other)
    assert err.value.field == "format"


def test_encoder_file_with_the_wrong_width_is_refused(tmp_path):
    enc = MLPEncoder(hidden=(8,), out_dim=8)
    path = enc.save(tmp_path / "narrow.pt")
    with pytest.raises(InputFileError, match="8-D skills, the environment's skill_dim is 16") as err:
        load_encoder(path, skill_dim=16)
    assert err.value.field == "out_dim"
    assert load_encoder(path).out_dim == 8  # without a skill_dim to meet, any width loads
    with pytest.raises(InputFileError, match="skill_dim is 16"):
        RGSDTorchEnv(2, encoder=str(path))


def test_check_encoder_rejects_wrong_shapes_and_non_unit_outputs():
    with pytest.raises(ValueError, match=r"returned \(2, 3\)"):
        check_encoder(torch.nn.Linear(ENCODER_INPUT_DIM, 3))
    with pytest.raises(ValueError, match=r"failed on the probe input torch\.zeros\(2, 1795\)"):
        check_encoder(torch.nn.Linear(7, 16))
    with pytest.raises(ValueError, match="unit vectors"):
        check_encoder(lambda x: torch.ones(x.shape[0], 16))


def test_an_encoder_that_returns_no_tensor_is_told_the_type_it_returned():
    unit = np.eye(16)[:2]
    with pytest.raises(
        ValueError, match=r"returned a numpy\.ndarray for the probe .*; expected a torch\.Tensor of \(2, 16\)"
    ):
        check_encoder(lambda x: unit)
    with pytest.raises(ValueError, match=r"returned a list for the probe"):
        check_encoder(lambda x: unit.tolist())


def test_an_encoder_that_is_unit_only_on_nonzero_inputs_is_told_it_was_probed_with_zeros():
    # normalising a slice of the state is a unit vector for real states but 0 for the all-zero probe
    with pytest.raises(ValueError) as err:
        check_encoder(lambda x: torch.nn.functional.normalize(x[:, :16], dim=-1))
    message = str(err.value)
    assert "on the probe input torch.zeros(2, 1795) it returned norms [0.0, 0.0]" in message
    assert "maps every float32 (B, 1795) input, all zeros included, to rows of norm 1 (B, 16)" in message


def test_spread_directions_are_orthonormal_up_to_16_and_spread_beyond():
    d = spread_directions(13)
    torch.testing.assert_close(d @ d.T, torch.eye(13), atol=1e-5, rtol=0)
    many = spread_directions(20)
    cos = many @ many.T - 2 * torch.eye(20)
    np.testing.assert_allclose(many.norm(dim=-1), 1.0, atol=1e-5)
    assert cos.max() < 0.5


def _random_max_cosine(num: int, dim: int = 16, draws: int = 20) -> float:
    """The mean over draws of the largest pairwise cosine of ``num`` random unit vectors: the baseline to beat."""
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(draws):
        u = torch.nn.functional.normalize(torch.randn(num, dim, generator=g), dim=-1)
        out.append(float((u @ u.T - 2 * torch.eye(num)).max()))
    return float(np.mean(out))


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "grad"])
@pytest.mark.parametrize("num", [17, 20, 100])
def test_spread_directions_past_16_work_under_any_grad_mode_and_beat_random(mode, num):
    """Environments are built under no_grad (and may be under inference_mode): the directions do not care."""
    context = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode, "grad": torch.enable_grad}[mode]
    with context():
        d = spread_directions(num)
    assert d.shape == (num, 16) and not d.requires_grad and not d.is_inference()
    np.testing.assert_allclose(d.norm(dim=-1), 1.0, atol=1e-5)
    torch.testing.assert_close(d, spread_directions(num), atol=0, rtol=0)  # the same as under grad
    cos = d @ d.T - 2 * torch.eye(num)
    assert cos.max() < _random_max_cosine(num) - 0.1


def test_the_kernel_encoder_builds_on_17_clips_under_no_grad(inputs, lib):
    clip_of_frame = torch.arange(inputs.shape[0]) % 17  # 17 clips: more than the 16 skill dimensions
    with torch.no_grad():
        enc = ReferenceKernelEncoder(inputs, clip_of_frame, 17)
    assert enc.directions.shape == (17, 16)
    np.testing.assert_allclose(enc(inputs[:4]).norm(dim=-1), 1.0, atol=1e-5)


def test_default_kernel_encoder_maps_reference_states_to_their_clip(lib, inputs):
    enc = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    z = clip_embeddings(enc, inputs, lib.clip_of_frame, lib.num_clips)
    e = enc(inputs)
    own = (e * z[lib.clip_of_frame]).sum(-1)
    assert own.mean() > 0.98 and own.min() > 0.85
    assert within_motion_alignment(enc, inputs, lib.clip_of_frame, lib.num_clips) > 0.98
    # z_m of different clips are nearly orthogonal (directions are orthonormal)
    off = z @ z.T - 2 * torch.eye(lib.num_clips)
    assert off.max() < 0.3


def test_default_encoder_reward_is_near_max_on_the_reference_and_lower_for_other_clips(lib, inputs):
    enc = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    kappa = enc.kappa
    z = clip_embeddings(enc, inputs, lib.clip_of_frame, lib.num_clips)
    e = enc(inputs)
    reward = kappa + kappa * e @ z.T  # r = C + kappa mu^T z, C = kappa: max 2 kappa
    own = reward.gather(1, lib.clip_of_frame[:, None]).squeeze(1)
    other = reward.clone()
    other[torch.arange(len(e)), lib.clip_of_frame] = float("nan")
    assert own.mean() > 0.98 * 2 * kappa
    assert torch.nanmean(other) < 1.2 * kappa


def test_nearest_other_frame_in_chunks_equals_the_full_distance_matrix(monkeypatch):
    from rgsd_envs.rewards import encoders

    keys = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    full = torch.cdist(keys, keys)
    full.fill_diagonal_(float("inf"))
    monkeypatch.setattr(encoders, "NEAREST_CHUNK", 7)  # 50 rows in 8 chunks, the last one short
    torch.testing.assert_close(encoders._nearest_other_distance(keys), full.min(dim=1).values)


def test_the_kernel_encoder_weighs_clips_by_a_gaussian_of_the_nearest_frames_distance(lib, inputs):
    """mu(s) = normalize(sum_c w_c d_c), w = softmax_c(-min_f |k(s) - k_f|^2 / (2 b^2)), the min over clip c's frames."""
    enc = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    g = torch.Generator().manual_seed(0)
    states = inputs[torch.randint(len(inputs), (6,), generator=g)] + 0.3 * torch.randn(6, inputs.shape[1], generator=g)
    newest = states[:, -FRAME_DIM:]
    keys = torch.cat([newest[:, FRAME_LAYOUT[k]] for k in ("phase", "root_height", "body_pos", "body_lin_vel")], -1)
    d2 = torch.cdist((keys - enc.key_mean) / enc.key_std, enc.keys).square()
    nearest = torch.stack([d2[:, lib.clip_of_frame == c].min(1).values for c in range(lib.num_clips)], 1)
    w = torch.softmax(-nearest / (2 * enc.bandwidth**2), dim=1)
    assert w.max(1).values.min() < 0.99  # the states sit between clips: the bandwidth matters
    torch.testing.assert_close(
        enc(states), torch.nn.functional.normalize(w @ enc.directions, dim=-1), atol=1e-5, rtol=0
    )
    older = states.clone()
    older[:, :-FRAME_DIM] = torch.randn(6, inputs.shape[1] - FRAME_DIM, generator=g)  # only the newest frame counts
    torch.testing.assert_close(enc(older), enc(states))


def test_the_nearest_other_frame_of_chosen_rows_is_their_row_of_the_full_distance_matrix(monkeypatch):
    from rgsd_envs.rewards import encoders

    keys = torch.randn(50, 6, generator=torch.Generator().manual_seed(0))
    full = torch.cdist(keys, keys)
    full.fill_diagonal_(float("inf"))
    rows = encoders.spaced_rows(50, 12)
    assert rows.tolist() == [0, 4, 9, 13, 18, 22, 27, 31, 36, 40, 45, 49]
    assert encoders.spaced_rows(50, 50).tolist() == list(range(50))
    monkeypatch.setattr(encoders, "NEAREST_CHUNK", 5)
    torch.testing.assert_close(encoders._nearest_other_distance(keys, rows), full.min(dim=1).values[rows])


def test_the_kernel_bandwidth_comes_from_a_fixed_sample_of_frames(lib, inputs, monkeypatch):
    from rgsd_envs.rewards import encoders

    keys = encoders._kernel_keys(inputs)
    keys = (keys - keys.mean(0)) / keys.std(0).clamp_min(1e-2)
    nearest = encoders._nearest_other_distance(keys)
    assert lib.total_frames <= encoders.BANDWIDTH_SAMPLE  # a small library: every frame, as before
    enc = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    assert enc.bandwidth == float(3.0 * nearest.median())
    monkeypatch.setattr(encoders, "BANDWIDTH_SAMPLE", 40)
    sampled = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    assert sampled.bandwidth == float(3.0 * nearest[encoders.spaced_rows(lib.total_frames, 40)].median())
    assert sampled.bandwidth == pytest.approx(enc.bandwidth, rel=0.3)


def test_the_kernel_encoder_embeds_in_chunks_of_bounded_size_with_the_same_numbers(lib, inputs, monkeypatch):
    from rgsd_envs.rewards import encoders

    enc = ReferenceKernelEncoder(inputs, lib.clip_of_frame, lib.num_clips)
    frames = lib.total_frames
    g = torch.Generator().manual_seed(0)
    states = inputs[torch.randint(frames, (512,), generator=g)] + 0.1 * torch.randn(512, inputs.shape[1], generator=g)
    whole = enc(states)  # one chunk: 512 states x frames is below KERNEL_CHUNK
    monkeypatch.setattr(encoders, "KERNEL_CHUNK", 100 * frames)  # 100 states at a time, the last chunk short
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        chunked = enc(states)
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=0)
    # the largest allocation is one chunk's states x frames, never the batch's (512 x frames x 4 bytes)
    assert max(ev.cpu_memory_usage for ev in prof.events()) <= 100 * frames * 8


def test_library_clip_embeddings_are_the_env_s_or_those_the_encoder_file_stores_for_these_clips(tmp_path):
    from rgsd_envs.envs.core import RGSDCore, library_clip_embeddings

    lib = MotionLib("demo")

    def env_z(encoder):
        core = RGSDCore(1, motions=lib, encoder=encoder)
        try:
            return core.clip_embeddings
        finally:
            core.close()

    torch.testing.assert_close(library_clip_embeddings(lib, None, 16), env_z(None), atol=0, rtol=0)
    torch.manual_seed(0)
    enc = MLPEncoder((16,))
    inputs = reference_encoder_inputs(lib)
    enc.set_input_stats(inputs.mean(0), inputs.std(0))
    plain = enc.save(tmp_path / "plain.pt")
    computed = env_z(str(plain))
    torch.testing.assert_close(library_clip_embeddings(lib, plain, 16), computed)
    stored = torch.nn.functional.normalize(torch.randn(5, 16), dim=-1)
    names = list(lib.names)
    kept = enc.save(tmp_path / "stored.pt", clip_names=names, clip_embeddings=stored)
    assert torch.equal(library_clip_embeddings(lib, kept, 16), stored)
    other = enc.save(tmp_path / "other.pt", clip_names=names[::-1], clip_embeddings=stored)  # other clips' order
    torch.testing.assert_close(library_clip_embeddings(lib, other, 16), computed)


def test_stored_clip_embeddings_are_reused_only_for_clips_of_the_same_frame_counts(tmp_path):
    """Clips of the demo's names but other lengths (an encoder pretrained on other clips) are embedded anew."""
    from rgsd_envs.envs.core import library_clip_embeddings

    lib = MotionLib("demo")
    torch.manual_seed(0)
    enc = MLPEncoder((16,))
    inputs = reference_encoder_inputs(lib)
    enc.set_input_stats(inputs.mean(0), inputs.std(0))
    computed = library_clip_embeddings(lib, enc.save(tmp_path / "plain.pt"), 16)
    stored = torch.nn.functional.normalize(torch.randn(5, 16), dim=-1)
    names, frames = list(lib.names), lib.num_frames.tolist()
    same = enc.save(tmp_path / "same.pt", clip_names=names, clip_frames=frames, clip_embeddings=stored)
    assert torch.equal(library_clip_embeddings(lib, same, 16), stored)
    longer = [n + 1 for n in frames[:1]] + frames[1:]  # the first clip one frame longer: another take of it
    other = enc.save(tmp_path / "other.pt", clip_names=names, clip_frames=longer, clip_embeddings=stored)
    assert not torch.allclose(computed, stored)
    torch.testing.assert_close(library_clip_embeddings(lib, other, 16), computed)
    names_only = enc.save(tmp_path / "names_only.pt", clip_names=names, clip_embeddings=stored)  # no frame counts
    assert torch.equal(library_clip_embeddings(lib, names_only, 16), stored)
