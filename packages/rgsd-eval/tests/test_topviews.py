"""Top views as data (top_views.npz) and the discovery figure drawn from them: one panel per method and category."""

from __future__ import annotations

import numpy as np
import pytest

from rgsd_envs.utils.files import InputFileError
from rgsd_eval.plots import plot_discovery_grid
from rgsd_eval.topviews import load_top_views, save_top_views


def _views(tmp_path, name, shift=0.0, variants=6):
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 20)
    ref = [np.stack([t * (i + 1), t * 0 + i, t * 0 + 0.9], -1) for i in range(3)]
    imitation = [r[None] + 0.01 for r in ref]
    var = [r[None] + shift + rng.normal(0, 0.1, (variants, 20, 3)) for r in ref]
    return save_top_views(
        tmp_path / f"{name}.npz", ["w1", "w2", "punch"], ["walk", "walk", "punch"], 50, ref, imitation, var, 4
    )


def test_top_views_round_trip_on_the_ground_plane_with_at_most_max_variants(tmp_path):
    tv = load_top_views(_views(tmp_path, "a"))
    assert tv.clip_names == ["w1", "w2", "punch"] and tv.kappa == 50.0
    assert tv.clips_of("walk") == [0, 1] and tv.clips_of("run") == []
    assert tv.ref[1].shape == (20, 2) and tv.imitation[0].shape == (1, 20, 2) and tv.variants[2].shape == (4, 20, 2)
    np.testing.assert_allclose(tv.ref[1][:, 1], 1.0)  # y of the second clip, z dropped
    np.testing.assert_allclose(tv.ref[0][-1], [1.0, 0.0], atol=1e-3)  # float16: millimetres
    with pytest.raises(InputFileError, match="missing"):
        load_top_views(tmp_path / "none.npz")


def test_the_discovery_grid_has_a_row_per_method_under_the_references_and_a_column_per_category(tmp_path):
    from PIL import Image

    views = {"rgsd": [load_top_views(_views(tmp_path, "a")), load_top_views(_views(tmp_path, "b", 0.5))],
             "ase": [load_top_views(_views(tmp_path, "c", 1.0))]}  # fmt: skip
    path = plot_discovery_grid(views, ["walk", "punch"], tmp_path / "grid.png", max_variants=8)
    width, height = Image.open(path).size
    one = plot_discovery_grid({"rgsd": views["rgsd"]}, ["walk", "punch"], tmp_path / "one.png", 8)
    assert Image.open(one).size[1] < height  # one row fewer
    assert width > 1.5 * height / 3  # two columns of square panels over three rows
