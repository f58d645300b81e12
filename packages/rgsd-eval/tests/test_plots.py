"""The embedding figures: the clip-by-clip cosine matrix (numbers, readable at 20 clips) and the state scatter,
both bounded in size at any clip count; a figure that fails is a warning."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from rgsd_eval import plots
from rgsd_eval.evaluate import EmbeddingData, RunEvaluation
from rgsd_eval.plots import (
    category_blocks,
    category_mean_cosine,
    clip_cosine_matrix,
    figure_or_warning,
    plot_clip_cosine,
    plot_embedding,
    plot_state_embeddings,
)


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


# --- many clips: bounded figures, categories instead of clips ------------------------------------------------


def clip_set(m: int, per_category: int = 25) -> tuple[np.ndarray, list[str], list[str]]:
    """``m`` random clip embeddings, names and categories (a new category every ``per_category`` clips, the
    categories interleaved so that ordering by category moves rows)."""
    cats = [f"cat{(i % (m // per_category + 1)):02d}" for i in range(m)]
    return np.random.default_rng(2).normal(size=(m, 16)), [f"subj{i % 10:02d}_walk_{i:04d}" for i in range(m)], cats


def drawn_figure(monkeypatch, draw) -> tuple[Figure, tuple[int, int]]:
    """The figure ``draw()`` saves and its PNG size in pixels."""
    seen = {}
    real = plots.save_figure

    def keep(fig, path):
        seen["fig"] = fig
        return real(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    path = draw()
    return seen["fig"], png_size(path)


def test_a_small_cosine_figure_names_every_clip(tmp_path, monkeypatch):
    z, names, _ = clip_set(12)
    fig, _ = drawn_figure(monkeypatch, lambda: plot_clip_cosine(z, names, tmp_path / "c.png", "run"))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == names


@pytest.mark.parametrize("m", [100, 1000])
def test_a_cosine_figure_of_many_clips_is_bounded_and_names_the_categories(tmp_path, monkeypatch, m):
    """100 clips drew a 45 x 44 in figure (1.1 GB), 1000 would have needed 75 GB."""
    z, names, cats = clip_set(m)
    fig, (width, height) = drawn_figure(
        monkeypatch, lambda: plot_clip_cosine(z, names, tmp_path / "c.png", "run", cats)
    )
    limit = 100 * plots.MAX_FIGURE_INCHES + 50  # the tight bounding box may add a few pixels
    assert width <= limit and height <= limit
    matrix, means = fig.axes[0], fig.axes[1]
    order = list(dict.fromkeys(cats))
    assert [t.get_text() for t in matrix.get_yticklabels()] == [f"{c} ({cats.count(c)})" for c in order]
    assert [t.get_text() for t in means.get_yticklabels()] == order
    shown = matrix.get_images()[0].get_array()
    ordered, _ = category_blocks(cats)
    np.testing.assert_allclose(shown, clip_cosine_matrix(z)[np.ix_(ordered, ordered)])


def test_category_blocks_group_each_category_in_order_of_first_appearance():
    order, blocks = category_blocks(["run", "walk", "run", "kick", "walk", "run"])
    assert order.tolist() == [0, 2, 5, 1, 4, 3]
    assert blocks == [("run", 0, 3), ("walk", 3, 5), ("kick", 5, 6)]


def test_category_mean_cosine_by_hand():
    cos = np.array([[1.0, 0.5, 0.1, -0.2], [0.5, 1.0, 0.3, 0.0], [0.1, 0.3, 1.0, 0.4], [-0.2, 0.0, 0.4, 1.0]])
    names, means = category_mean_cosine(cos, ["a", "a", "b", "c"])
    assert names == ["a", "b", "c"]
    assert means[0, 0] == pytest.approx(0.5)  # the one pair of different clips, not the diagonal's 1s
    assert means[0, 1] == pytest.approx((0.1 + 0.3) / 2) and means[1, 0] == pytest.approx(0.2)
    assert means[0, 2] == pytest.approx((-0.2 + 0.0) / 2) and means[1, 2] == pytest.approx(0.4)
    assert np.isnan(means[1, 1]) and np.isnan(means[2, 2])  # a category of one clip has no pair


def state_embeddings(m: int, frames: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    e = rng.normal(size=(m * frames, 16))
    return e / np.linalg.norm(e, axis=1, keepdims=True), np.repeat(np.arange(m), frames), rng.normal(size=(m, 16))


def legend_labels(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def test_state_embeddings_of_a_few_clips_have_a_legend_entry_per_clip(tmp_path, monkeypatch):
    e, cof, z = state_embeddings(5)
    names = [f"clip{i}" for i in range(5)]
    fig, _ = drawn_figure(monkeypatch, lambda: plot_state_embeddings(e, cof, z, names, tmp_path / "e.png"))
    assert legend_labels(fig) == names


def test_state_embeddings_of_many_clips_are_coloured_by_category_in_a_bounded_figure(tmp_path, monkeypatch):
    """One legend entry per clip drew a 737 x 15282 px figure at 1000 clips."""
    m = 300
    e, cof, z = state_embeddings(m)
    _, names, cats = clip_set(m, per_category=100)
    fig, (width, height) = drawn_figure(
        monkeypatch, lambda: plot_state_embeddings(e, cof, z, names, tmp_path / "e.png", "t", cats)
    )
    assert legend_labels(fig) == [f"cat{k:02d} ({cats.count(f'cat{k:02d}')} clips)" for k in range(4)]
    assert width <= 1000 and height <= 1000


def test_state_embeddings_draw_a_bounded_number_of_points(tmp_path, monkeypatch):
    m = 50
    e, cof, z = state_embeddings(m, frames=plots.MAX_SCATTER_POINTS // 10)
    _, names, cats = clip_set(m)
    fig, _ = drawn_figure(monkeypatch, lambda: plot_state_embeddings(e, cof, z, names, tmp_path / "e.png", "", cats))
    dots = sum(len(c.get_offsets()) for c in fig.axes[0].collections if c.get_label() and "clips" in c.get_label())
    assert dots == plots.MAX_SCATTER_POINTS
    assert f"{plots.MAX_SCATTER_POINTS} of {len(e)} states drawn" in fig.axes[0].get_title()


def test_the_run_embedding_figure_is_coloured_by_category_past_the_legend_limit(tmp_path, monkeypatch):
    m = 40
    states, cof, z = state_embeddings(m)
    _, names, cats = clip_set(m, per_category=20)
    ev = RunEvaluation("run", {}, names, [], [], {}, EmbeddingData(states, cof, z, z.copy(), 0.9))
    fig, _ = drawn_figure(monkeypatch, lambda: plot_embedding(ev, tmp_path / "e.png", cats))
    assert legend_labels(fig) == ["cat00 (14 clips)", "cat01 (13 clips)", "cat02 (13 clips)"]


def test_colours_of_many_groups_do_not_repeat():
    assert len(set(plots._colours(45))) == 45 and len(set(plots._colours(20))) == 20


# --- a figure that fails -------------------------------------------------------------------------


def test_a_figure_that_fails_is_a_warning_and_leaves_no_file(tmp_path, monkeypatch, caplog):
    path = tmp_path / "embeddings_cosine.png"
    path.write_bytes(b"an earlier run's figure")

    def fail(self, fname, **kwargs):
        Path(fname).write_bytes(b"half a png")
        raise MemoryError("out of memory")

    monkeypatch.setattr(Figure, "savefig", fail)
    z, names, _ = clip_set(4)
    with caplog.at_level(logging.WARNING, logger="rgsd_eval.plots"):
        written = figure_or_warning(lambda: plot_clip_cosine(z, names, path), path)
    assert written is None and list(tmp_path.iterdir()) == []  # no temporary file, no stale figure
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and str(path) in said[0] and "MemoryError: out of memory" in said[0]


def test_a_top_view_figure_draws_at_most_forty_clips_evenly_spaced():
    from rgsd_eval.plots import MAX_TOP_VIEW_PANELS, top_view_clips

    assert top_view_clips(13) == list(range(13))
    chosen = top_view_clips(999)
    assert len(chosen) == MAX_TOP_VIEW_PANELS == 40
    assert chosen[0] == 0 and chosen[-1] == 998 and chosen == sorted(set(chosen))
    assert max(np.diff(chosen)) <= 26  # spread over the whole list, not its head
