"""What ``rgsd pretrain`` prints and writes at any clip count: the reward-sharpness table per clip or per category,
"-" with a note where a clip had no state scored, and a figure that fails as a warning after the encoder is saved."""

from __future__ import annotations

import argparse
import logging
import math

import rgsd_eval.plots
from rgsd_agents.commands import pretrain as pretrain_cmd
from rgsd_agents.pretraining.config import COSINE_PLOT_FILE, ENCODER_FILE, PLOT_FILE, PretrainConfig
from rgsd_agents.pretraining.loop import pretrain
from rgsd_agents.pretraining.reward_sharpness import COLUMNS, SHARPNESS_FILE, TABLE_CLIPS, format_table


def report_of(rows: dict[str, dict[str, float]]) -> dict:
    """A sharpness report with these per-clip cosines (means over the clips with a number, as the report has)."""
    mean = {c: math.fsum(v for r in rows.values() if math.isfinite(v := r[c])) / len(rows) for c in COLUMNS}
    return {
        "kappa": 10.0,
        "constant": 10.0,
        "columns": list(COLUMNS),
        "cos": rows,
        "mean_cos": mean,
        "mean_reward": {c: 10.0 + 10.0 * v for c, v in mean.items()},
    }


def row(value: float, **cells: float) -> dict[str, float]:
    return {c: cells.get(c, value) for c in COLUMNS}


def test_a_few_clips_print_a_row_each():
    report = report_of({f"clip{i}": row(0.1 * i) for i in range(5)})
    lines = format_table(report, ["walk"] * 5).splitlines()
    assert [line.split()[0] for line in lines[2:7]] == [f"clip{i}" for i in range(5)]
    assert lines[4].split()[1:] == ["0.200"] * len(COLUMNS)
    assert SHARPNESS_FILE not in "\n".join(lines)


def test_many_clips_print_a_row_per_category_and_say_where_every_clip_is():
    """1000 clips printed 1000 rows."""
    m = 1000
    categories = ["walk" if i % 4 else "punch" for i in range(m)]
    values = [0.5 if c == "walk" else 0.9 + 0.1 * (i % 8 == 0) for i, c in enumerate(categories)]
    report = report_of({f"clip{i:04d}": row(v) for i, v in enumerate(values)})
    lines = format_table(report, categories).splitlines()
    assert len(lines) < 10
    assert "per category" in lines[0] and lines[1].startswith("category (clips)")
    punch, walk = lines[2].split(), lines[3].split()
    assert punch[:2] == ["punch", "(250)"] and walk[:2] == ["walk", "(750)"]
    assert punch[2] == f"{(0.9 * 125 + 1.0 * 125) / 250:.3f}" and walk[2] == "0.500"
    assert any(f"every clip's row: {SHARPNESS_FILE}" == line for line in lines)


def test_many_clips_without_categories_print_the_first_rows_and_count_the_rest():
    report = report_of({f"clip{i:03d}": row(0.5) for i in range(100)})
    lines = format_table(report).splitlines()
    assert f"... and {100 - TABLE_CLIPS} more clips" in lines and len(lines) < TABLE_CLIPS + 10


def test_a_column_without_a_scored_state_reads_a_dash_with_a_note():
    """A 2-frame clip showed nan in 8 of 10 columns, a 10-frame one nan under sim_twin, with no word of why."""
    nan = math.nan
    short = row(nan, reference=0.99, other_clips=-0.2)
    report = report_of({"long": row(0.8), "short2": short, "short10": row(0.9, sim_twin=nan)})
    lines = format_table(report).splitlines()
    assert "nan" not in "\n".join(lines)
    cells = dict(zip(COLUMNS, lines[3].split()[1:]))
    assert cells["reference"] == "0.990" and cells["held_still"] == "-" and cells["other_clips"] == "-0.200"
    assert lines[4].split()[1:3] == ["0.900", "-"]
    note = lines[-1]
    assert note.startswith(
        "'-': 2 clip(s) with no state scored in some columns: short2 (8 columns), short10 (sim_twin)"
    )
    assert "shorter than their spacing" in note and "3 or more frames" in note


def test_categories_leave_clips_without_a_scored_state_out_of_their_means():
    nan = math.nan
    rows = {f"c{i:02d}": row(0.5) for i in range(40)}
    rows["c00"] = row(nan, reference=1.0)
    lines = format_table(report_of(rows), ["a"] * 20 + ["b"] * 20).splitlines()
    a = lines[2].split()
    assert a[:4] == ["a", "(20)", f"{(1.0 + 19 * 0.5) / 20:.3f}", "0.500"]
    assert lines[-1].startswith("left out of the category means: 1 clip(s)")


# -- pretraining ------------------------------------------------------------------------------------


def test_a_figure_that_fails_is_a_warning_after_the_encoder_and_report_are_saved(tmp_path, monkeypatch, caplog):
    def fail(*args, **kwargs):
        raise ValueError("Image size of 100000x100000 pixels is too large")

    monkeypatch.setattr(rgsd_eval.plots, "plot_clip_cosine", fail)
    (tmp_path / COSINE_PLOT_FILE).write_bytes(b"an earlier pretraining's figure")
    cfg = PretrainConfig(motions="demo", hidden=(32,), steps=2, eval_every=1, target_alignment=None)
    with caplog.at_level(logging.WARNING):
        result = pretrain(cfg, tmp_path, progress=False)
    assert result.cosine_path is None and result.plot_path == tmp_path / PLOT_FILE
    assert (tmp_path / ENCODER_FILE).is_file() and (tmp_path / SHARPNESS_FILE).is_file()
    assert not (tmp_path / COSINE_PLOT_FILE).exists() and not list(tmp_path.glob(".*.tmp"))
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{tmp_path / COSINE_PLOT_FILE} not written (ValueError: Image size of 100000x100000 pixels is too large); " \
        "the other outputs are complete" in said  # the figure's place in the folder, not the staging folder's  # fmt: skip
    assert result.clip_categories == ["walk", "run", "sidestep", "backward", "punch"]


def test_the_command_says_which_figure_was_not_written(tmp_path, monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(rgsd_eval.plots, "plot_state_embeddings", fail)
    parser = argparse.ArgumentParser(prog="rgsd")
    pretrain_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pretrain", "--motions", "demo", "--out", str(tmp_path), "--steps", "2", "--hidden",
                              "32", "--target-alignment", "-1", "--no-progress"])  # fmt: skip
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "embeddings: not written (see the warning above)" in printed
    assert f"cosines:    {tmp_path / COSINE_PLOT_FILE}" in printed


def test_up_to_the_table_limit_every_clip_has_a_row():
    report = report_of({f"clip{i:02d}": row(0.5) for i in range(TABLE_CLIPS)})
    lines = format_table(report, ["a"] * TABLE_CLIPS).splitlines()
    assert "per clip" in lines[0] and len(lines) == TABLE_CLIPS + 4
