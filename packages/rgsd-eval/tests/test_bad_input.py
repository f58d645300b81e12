"""Bad input gives one clear error naming the file (and field), before any rollout runs."""

from __future__ import annotations

import pytest
import yaml

from rgsd_envs.runs.policy import PolicyMLP
from rgsd_envs.utils.files import InputFileError
from rgsd_eval.cli import main
from rgsd_eval.config import EvalConfig
from rgsd_eval.pipeline import run_evaluation
from rgsd_eval.runs import load_run
from rgsd_eval.testing import make_fake_run


@pytest.fixture
def good_run(tmp_path):
    return make_fake_run(tmp_path / "good")


def test_missing_run_folder(tmp_path):
    with pytest.raises(InputFileError, match="run folder not found") as err:
        load_run(tmp_path / "nope")
    assert err.value.path.endswith("nope")


def test_run_without_policy(tmp_path):
    run = make_fake_run(tmp_path / "r")
    (run / "policy.pt").unlink()
    with pytest.raises(InputFileError, match=r"missing policy\.pt"):
        load_run(run)


def test_policy_for_another_environment(tmp_path):
    run = make_fake_run(tmp_path / "r")
    PolicyMLP(100, 69, (8,)).save(run / "policy.pt")
    with pytest.raises(InputFileError, match="375") as err:
        load_run(run)
    assert err.value.field == "obs_dim"


def test_unknown_env_key_in_the_run_config(tmp_path):
    run = make_fake_run(tmp_path / "r", env={"bogus_key": 1})
    with pytest.raises(InputFileError, match="bogus_key") as err:
        load_run(run)
    assert err.value.path.endswith("config.yaml")


def test_encoder_latents_need_an_encoder(tmp_path):
    run = make_fake_run(tmp_path / "r", encoder_hidden=None)
    with pytest.raises(InputFileError, match=r"encoder\.pt"):
        load_run(run, "encoder")
    assert load_run(run, "auto").latent.kind == "best-of"


def test_unknown_motions_path(good_run, tmp_path):
    with pytest.raises(InputFileError, match="motions not found") as err:
        run_evaluation([good_run], tmp_path / "no_such_clips", tmp_path / "out", EvalConfig(progress=False))
    assert "no_such_clips" in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing written


def test_second_bad_run_fails_before_the_first_is_evaluated(good_run, tmp_path):
    with pytest.raises(InputFileError, match="run folder not found"):
        run_evaluation([good_run, tmp_path / "missing"], "demo", tmp_path / "out", EvalConfig(progress=False))
    assert not (tmp_path / "out").exists()


def test_output_path_that_is_a_file(good_run, tmp_path):
    f = tmp_path / "taken"
    f.write_text("x")
    with pytest.raises(InputFileError, match="not a folder"):
        run_evaluation([good_run], "demo", f, EvalConfig(progress=False))


def test_cli_reports_bad_input_in_one_line(tmp_path, capsys):
    assert main(["--run", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "run folder not found" in err and "\n" not in err


def test_cli_rejects_bad_flags(tmp_path, capsys):
    for flags in (["--latent", "best-of-zero"], ["--rollouts", "0"], ["--kappas", "20", "-1"]):
        with pytest.raises(SystemExit) as exit_:
            main(["--run", str(tmp_path), "--out", str(tmp_path / "o"), *flags])
        assert exit_.value.code == 2
    assert "best-of-N" in capsys.readouterr().err


def test_bad_eval_config_file(good_run, tmp_path, capsys):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(yaml.safe_dump({"rollouts": 2, "kapas": [1]}))
    assert main(["--run", str(good_run), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 2
    assert "kapas" in capsys.readouterr().err
    with pytest.raises(ValueError, match="rollouts"):
        EvalConfig(rollouts=0)
    with pytest.raises(ValueError, match="video_size"):
        EvalConfig(video_size=(63, 48))
    with pytest.raises(ValueError, match=r"^max_clips must be >= 1 or null, got 0$"):
        EvalConfig(max_clips=0)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("fid_window=0", "fid_window must be >= 2, got 0"),
        ("rollouts=0", "rollouts must be >= 1, got 0"),
        ("kappas=[]", "kappas must be a non-empty list of kappas > 0, got []"),
        ("video_size=[63, 48]", "video_size must be [width, height], each even and >= 2, got [63, 48]"),
        ("action_noise=-1.5", "action_noise must be a std >= 0 or 'policy', got -1.5"),
    ],
)
def test_a_setting_out_of_range_states_its_rule_and_names_the_set(good_run, tmp_path, capsys, setting, message):
    assert main(["--run", str(good_run), "--out", str(tmp_path / "o"), "--set", setting]) == 2
    assert capsys.readouterr().err == f"error: --set {setting}: {message}\n"
    assert not (tmp_path / "o").exists()


def test_a_config_file_out_of_range_is_named(good_run, tmp_path, capsys):
    cfg = tmp_path / "eval.yaml"
    cfg.write_text("fid_window: 1\n")
    assert main(["--run", str(good_run), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 2
    assert capsys.readouterr().err == f"error: {cfg}: fid_window must be >= 2, got 1\n"


def test_a_config_file_that_is_not_utf8_text_is_named(good_run, tmp_path, capsys):
    cfg = tmp_path / "bin.yaml"
    cfg.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["--run", str(good_run), "--out", str(tmp_path / "o"), "--config", str(cfg)]) == 2
    assert capsys.readouterr().err == f"error: {cfg}: not a UTF-8 text file\n"


def test_a_sweep_category_the_motions_lack_is_refused_before_any_rollout(good_run, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["--run", str(good_run), "--out", str(out), "--set", "sweep_categories=[run, nosuchcat]"]) == 2
    assert capsys.readouterr().err == (
        "error: sweep_categories: no category 'nosuchcat' in the motions "
        "(categories: walk, run, sidestep, backward, punch)\n"
    )
    assert not out.exists()


def test_the_paper_protocol_s_sweep_categories_lead_only_where_the_motions_have_them():
    cfg = EvalConfig.for_protocol("paper")
    cfg.check_sweep_categories(["walk", "punch"])  # its run, sidestep, backward: not asked for here, not refused
    assert cfg.sweep_clip_ids(["walk", "punch"]) == [0, 1]
