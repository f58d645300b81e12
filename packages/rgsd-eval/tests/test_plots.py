"""The clip-by-clip cosine matrix of the clip embeddings: numbers and a figure readable at 20 clips."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from rgsd_eval.plots import clip_cosine_matrix, plot_clip_cosine


def png_size(path) -> tuple[int, int]:
    """Width and height of a PNG from its IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_cosine_matrix_matches_hand_computed_values():
    z = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 3.0, 0.0], [-1.0, 0.0, 0.0]])
    want = np.array(
        [
            [1.0, 0.0, np.sqrt(0.5), -1.0],
            [0.0, 1.0, np.sqrt(0.5), 0.0],
            [np.sqrt(0.5), np.sqrt(0.5), 1.0, -np.sqrt(0.5)],
            [-1.0, 0.0, -np.sqrt(0.5), 1.0],
        ]
    )
    np.testing.assert_allclose(clip_cosine_matrix(z), want, atol=1e-12)


def test_cosine_matrix_is_symmetric_with_unit_diagonal_and_ignores_scale():
    z = np.random.default_rng(0).normal(size=(20, 16))
    cos = clip_cosine_matrix(z)
    np.testing.assert_allclose(cos, cos.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-12)
    np.testing.assert_allclose(clip_cosine_matrix(z * np.arange(1, 21)[:, None]), cos, atol=1e-12)
    assert cos.min() >= -1.0 and cos.max() <= 1.0


def test_zero_embedding_has_cosine_zero_not_nan():
    cos = clip_cosine_matrix(np.array([[0.0, 0.0], [1.0, 0.0]]))
    assert np.isfinite(cos).all() and cos[0, 1] == 0.0


@pytest.mark.parametrize("m", [5, 20])
def test_figure_gives_each_clip_room_for_its_name(tmp_path, m):
    names = [f"b{i}_walk_turn_left_{i}" for i in range(m)]
    z = np.random.default_rng(1).normal(size=(m, 16))
    path = plot_clip_cosine(z, names, tmp_path / "embeddings_cosine.png", "run")
    width, height = png_size(path)
    # at 100 dpi every row is at least ~35 px tall: 8 pt names and 6.5 pt values fit
    assert height >= 35 * m and width >= 35 * m
