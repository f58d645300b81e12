"""Downstream curves over seeds: mean and spread of success rate and style FID against training steps."""

from __future__ import annotations

import csv
import json
import struct

import numpy as np
import pytest
import yaml

from rgsd_agents.downstream.report import EVALUATIONS, aggregate_seeds, read_evaluations, seed_curves
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.testing import make_fake_run


def fake_downstream(path, low_level, style, seed, rows, init_skill=None, **task):
    """A downstream run folder: config.yaml (``task``: more task fields) and evaluations.jsonl with ``rows`` (step,
    success, fid or None)."""
    path.mkdir(parents=True)
    cfg = {"low_level": str(low_level), "seed": seed, "task": {"style": style, **task}}
    if init_skill is not None:
        cfg["init_skill"] = init_skill
    (path / "config.yaml").write_text(yaml.safe_dump(cfg))
    lines = []
    for i, (step, success, fid) in enumerate(rows):
        row = {"iteration": i, "step": step, "eval/success_rate": success, "eval/final_distance": 1.0}
        if fid is not None:
            row["eval/style_fid"] = fid
        lines.append(json.dumps(row))
    (path / EVALUATIONS).write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def lows(tmp_path):
    return {
        "rgsd": make_fake_run(tmp_path / "low_rgsd"),
        "calm": make_fake_run(
            tmp_path / "low_calm", method={"name": "calm", "latent_choice": "encoder", "encoder": "calm_encoder.pt"}
        ),
    }


def test_mean_and_spread_over_seeds_on_the_steps_all_seeds_share(tmp_path, lows):
    runs = [
        fake_downstream(tmp_path / "s0", lows["rgsd"], "sidestep", 0, [(0, 0.0, 30.0), (100, 0.5, 20.0), (200, 1.0, 10.0)]),
        fake_downstream(tmp_path / "s1", lows["rgsd"], "sidestep", 1, [(0, 0.0, 40.0), (100, 0.25, 10.0), (200, 0.5, 6.0)]),
        # a shorter run: only the steps every seed reached are averaged
        fake_downstream(tmp_path / "s2", lows["rgsd"], "sidestep", 2, [(0, 0.5, 20.0), (100, 0.0, 30.0)]),
    ]  # fmt: skip
    curves = seed_curves(runs)
    assert (curves.style, curves.method, curves.seeds) == ("sidestep", "rgsd", [0, 1, 2])
    assert curves.steps["eval/success_rate"].tolist() == [0, 100]
    st = curves.summary("eval/success_rate")
    np.testing.assert_allclose(st["mean"], [1 / 6, 0.25])
    np.testing.assert_allclose(st["std"], [np.std([0, 0, 0.5], ddof=1), np.std([0.5, 0.25, 0.0], ddof=1)])
    np.testing.assert_allclose(curves.summary("eval/style_fid")["mean"], [30.0, 20.0])
    np.testing.assert_allclose(curves.summary("eval/style_fid")["max"], [40.0, 30.0])


def test_aggregate_groups_runs_by_style_and_method_and_draws_one_panel_per_style(tmp_path, lows):
    def rows(success):
        return [(0, 0.0, None), (64, success, None)]

    runs = [
        fake_downstream(tmp_path / "f0", lows["rgsd"], "freestyle", 0, rows(1.0)),
        fake_downstream(tmp_path / "f1", lows["rgsd"], "freestyle", 1, rows(0.5)),
        fake_downstream(tmp_path / "c0", lows["calm"], "freestyle", 0, rows(0.2)),
        fake_downstream(tmp_path / "b0", lows["rgsd"], "backward", 0, [(0, 0.0, 9.0), (64, 0.3, 3.0)]),
    ]
    paths = aggregate_seeds(runs, tmp_path / "agg")
    doc = json.loads(paths["json"].read_text())["groups"]
    assert [(g["style"], g["method"], g["seeds"]) for g in doc] == [
        ("freestyle", "rgsd", [0, 1]), ("freestyle", "calm", [0]), ("backward", "rgsd", [0]),
    ]  # fmt: skip
    assert doc[0]["curves"]["eval/success_rate"]["mean"] == [0.0, 0.75]
    assert "eval/style_fid" not in doc[0]["curves"] and doc[2]["curves"]["eval/style_fid"]["mean"] == [9.0, 3.0]
    table = list(csv.DictReader(paths["csv"].open()))
    row = next(r for r in table if r["style"] == "freestyle" and r["method"] == "rgsd" and r["step"] == "64")
    assert float(row["mean"]) == 0.75 and float(row["std"]) == pytest.approx(np.std([1.0, 0.5], ddof=1))
    assert row["seeds"] == "2" and row["metric"] == "eval/success_rate"
    width, height = struct.unpack(">II", paths["figure"].read_bytes()[16:24])
    assert width > height  # two styles side by side (one would stand taller than wide), two metrics stacked


def test_runs_that_start_at_the_style_latent_are_a_group_of_their_own(tmp_path, lows):
    """The same method and style from two starts are two curves, not four seeds of one."""
    runs = [
        fake_downstream(tmp_path / f"{start}{seed}", lows["rgsd"], "sidestep", seed, [(0, 0.0, fid), (64, 0.1, fid)],
                        init_skill=start)
        for start, fid in (("zero", 30.0), ("style", 4.0)) for seed in (0, 1)
    ]  # fmt: skip
    paths = aggregate_seeds(runs, tmp_path / "agg")
    doc = json.loads(paths["json"].read_text())["groups"]
    assert [(g["method"], g["init_skill"], g["seeds"]) for g in doc] == [
        ("rgsd", "zero", [0, 1]),
        ("rgsd", "style", [0, 1]),
    ]
    assert [g["curves"]["eval/style_fid"]["mean"] for g in doc] == [[30.0, 30.0], [4.0, 4.0]]
    assert seed_curves(runs[2:]).label == "rgsd, style start" and seed_curves(runs[:2]).label == "rgsd"
    with pytest.raises(InputFileError, match="init_skill 'style'"):
        seed_curves(runs[1:3])


def test_seeds_of_different_styles_or_a_repeated_seed_are_refused(tmp_path, lows):
    a = fake_downstream(tmp_path / "a", lows["rgsd"], "sidestep", 0, [(0, 0.0, 1.0)])
    b = fake_downstream(tmp_path / "b", lows["rgsd"], "backward", 1, [(0, 0.0, 1.0)])
    c = fake_downstream(tmp_path / "c", lows["rgsd"], "sidestep", 0, [(0, 0.0, 1.0)])
    with pytest.raises(InputFileError, match="backward"):
        seed_curves([a, b])
    with pytest.raises(ValueError, match="repeat a seed"):
        seed_curves([a, c])


def test_seeds_of_another_task_are_refused_naming_the_field(tmp_path, lows):
    rows = [(0, 0.0, 30.0), (100, 0.5, 20.0)]
    a = fake_downstream(tmp_path / "s0", lows["rgsd"], "sidestep", 0, rows, arena_size=4.0)
    b = fake_downstream(tmp_path / "s1", lows["rgsd"], "sidestep", 1, rows, arena_size=20.0)
    with pytest.raises(InputFileError, match=r"s1/config.yaml: field 'task.arena_size': 20.0; .*s0 has 4.0"):
        seed_curves([a, b])
    with pytest.raises(InputFileError, match=r"task\.arena_size"):
        aggregate_seeds([a, b], tmp_path / "out")
    # the default written out or left out is the same task; where and how fast the worlds run may differ
    c = fake_downstream(tmp_path / "s2", lows["rgsd"], "sidestep", 2, rows, arena_size=4.0, device="cuda",
                        num_threads=2, episode_seconds=20.0)  # fmt: skip
    assert seed_curves([a, c]).seeds == [0, 2]
    (c / "config.yaml").write_text((c / "config.yaml").read_text() + "eval_episodes: 64\n")
    with pytest.raises(InputFileError, match=r"field 'eval_episodes': 64; .* has 16"):
        seed_curves([a, c])


def test_a_resumed_run_s_repeated_evaluation_counts_once_with_its_last_value(tmp_path, lows):
    run = fake_downstream(tmp_path / "r", lows["rgsd"], "sidestep", 0, [(0, 0.0, 5.0), (64, 0.2, 4.0)])
    with open(run / EVALUATIONS, "a") as f:
        f.write(json.dumps({"iteration": 1, "step": 64, "eval/success_rate": 0.4}) + "\n")
    evals = read_evaluations(run)
    assert list(evals) == [0, 64] and evals[64] == {"eval/success_rate": 0.4}


def test_runs_without_the_evaluations_file_are_read_from_tensorboard(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "old"
    writer = SummaryWriter(str(run / "tb"))
    for step, v in ((0, 0.0), (32, 0.5)):
        writer.add_scalar("eval/success_rate", v, step)
        writer.add_scalar("rollout/reward", 1.0, step)
    writer.close()
    assert read_evaluations(run) == {0: {"eval/success_rate": 0.0}, 32: {"eval/success_rate": 0.5}}
    with pytest.raises(InputFileError, match="no evaluations"):
        read_evaluations(tmp_path / "empty")


def test_rgsd_downstream_seeds_writes_the_curves_of_finished_runs(tmp_path, lows, capsys):
    from rgsd_agents.cli import main as rgsd

    runs = [
        fake_downstream(tmp_path / f"s{i}", lows["rgsd"], "sidestep", i, [(0, 0.0, 9.0), (32, 0.5 * i, 5.0)])
        for i in range(3)
    ]
    out = tmp_path / "curves"
    assert rgsd(["downstream", "--seeds", *map(str, runs), "--out", str(out)]) == 0
    assert f"figure: {out / 'seeds.png'}" in capsys.readouterr().out
    doc = json.loads((out / "seeds.json").read_text())["groups"]
    assert doc[0]["seeds"] == [0, 1, 2] and doc[0]["curves"]["eval/success_rate"]["mean"] == [0.0, 0.5]
    assert rgsd(["downstream", "--seeds", str(runs[0]), str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "config.yaml" in capsys.readouterr().err
