"""Bad input to the ``rgsd`` commands: one line naming the file, flag or field, exit 2, nothing half-written."""

from __future__ import annotations

import shutil

import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.testing import tiny_encoder_file
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM


def test_pretraining_into_a_trained_run_is_refused_and_its_encoder_kept(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "latest.pt").write_bytes(b"ckpt")
    encoder = tiny_encoder_file(run / "encoder.pt").read_bytes()
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(run), "--steps", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {run} holds a trained run; pretrain into another --out\n"
    assert (run / "encoder.pt").read_bytes() == encoder
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "encoder.pt"]


def test_a_training_that_fails_during_set_up_leaves_no_run_folder(tmp_path, capsys):
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    (tmp_path / "empty").mkdir()
    out = tmp_path / "run"
    sets = ["--set", f"encoder={encoder}", "--set", f"env.motions={tmp_path / 'empty'}"]
    assert rgsd(["train", "--config", "demo", "--out", str(out), "--no-progress", *sets]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'empty'}: folder holds no .npz motion clips\n"
    assert not out.exists()  # its config.yaml and encoder.pt were written, then removed with the folder


@pytest.mark.parametrize("command", ["train", "pretrain"])
def test_an_empty_motions_list_in_a_config_file_names_the_file_before_any_folder(command, tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("env:\n  motions: []\n" if command == "train" else "motions: []\n")
    out = tmp_path / "run"
    assert rgsd([command, "--config", str(config), "--out", str(out), "--no-progress"]) == 2
    field = "env.motions" if command == "train" else "motions"  # the key as the file spells it
    assert capsys.readouterr().err == (
        f"error: {config}: field '{field}': is empty ([]): give 'demo', clip files or folders of clips\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "preset"),
    [
        (["train"], "cpu"),
        (["downstream", "--low-level", "missing"], "default"),
        (["reproduce", "--motions", "demo", "--plan-only"], "cpu"),
    ],
    ids=["train", "downstream", "reproduce"],
)
def test_an_empty_config_file_is_refused_naming_it_before_any_folder(command, preset, tmp_path, capsys):
    """An empty file would run every default: for training, the paper's 4096 worlds and 20000 iterations."""
    config = tmp_path / "empty.yaml"
    config.write_text("")
    flag = "--scale" if command[0] == "reproduce" else "--config"
    out = tmp_path / "out"
    assert rgsd([*command, flag, str(config), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: {config}: holds no settings; start from a preset with a line such as `base: {preset}`\n"
    )
    assert not out.exists()
    assert rgsd(["pretrain", "--config", str(config), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: {config}: holds no settings; give PretrainConfig fields, or no config file for the defaults\n"
    )
    assert not out.exists()


def test_a_garbage_encoder_file_is_called_corrupt_without_torch_s_unsafe_advice(tmp_path, capsys):
    garbage = tmp_path / "encoder.pt"
    garbage.write_text("garbage\n")
    out = tmp_path / "run"
    assert rgsd(["train", "--config", "demo", "--out", str(out), "--set", f"encoder={garbage}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {garbage}: not a readable encoder file (truncated or corrupt?): ")
    assert "weights_only" not in err and err.count("\n") == 1, err
    assert not out.exists()


@pytest.mark.parametrize("minutes", ["0", "-1"])
def test_the_demo_refuses_a_budget_that_is_not_positive(minutes, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        rgsd(["demo", "--out", str(tmp_path / "demo"), "--minutes", minutes])
    assert exit_.value.code == 2
    assert "argument --minutes: expected a positive number of minutes" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "play.gif"], "video is written as .mp4, but the output path 'play.gif' ends in '.gif'"),
        (["--size", "63", "64"], "H.264 video needs an even width and height, got 63x64"),
    ],
)
def test_play_refuses_a_bad_video_before_it_runs_the_policy(args, message, tmp_path, monkeypatch, capsys):
    import rgsd_agents.play

    def no_rollout(*_, **__):
        raise AssertionError("the rollout ran before the video settings were checked")

    monkeypatch.setattr(rgsd_agents.play, "play_rollout", no_rollout)
    monkeypatch.chdir(tmp_path)
    assert rgsd(["play", str(tmp_path / "run"), *args]) == 2
    assert capsys.readouterr().err.startswith(f"error: {message}")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_as_the_output_folder_is_named_in_one_line(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("hi")
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    assert rgsd(["train", "--config", "demo", "--out", str(afile), "--set", f"encoder={encoder}"]) == 2
    assert capsys.readouterr().err == f"error: {afile}: output path exists and is not a folder\n"
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(afile / "enc"), "--steps", "2"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {afile / 'enc'}: cannot create this folder: ")
    assert afile.read_text() == "hi" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "encoder.pt"]


def test_eval_checks_every_run_s_encoder_before_it_evaluates_any(demo_run, tmp_path, capsys):
    import torch

    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_agents.pretraining.encoder import build_encoder

    other = tmp_path / "other"
    shutil.copytree(demo_run, other, ignore=shutil.ignore_patterns("checkpoints", "tb", "report", "pretrain"))
    cfg = PretrainConfig(hidden=(32,), device="cpu", skill_dim=8)
    build_encoder(cfg, torch.zeros(4, ENCODER_INPUT_DIM)).save(other / "encoder.pt")  # a run of another skill space
    out = tmp_path / "eval"
    args = ["eval", "--run", str(demo_run), "--run", str(other), "--out", str(out), "--no-video", "--rollouts", "1"]
    assert rgsd(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {other / 'encoder.pt'}: field 'out_dim': encoder maps states to 8-D skills"), err
    assert not out.exists()  # the first run was not evaluated either


def _low_level_without_sidestep(tmp_path):
    """A fake low-level run whose clips are one walk."""
    from rgsd_envs.motion.demo import demo_clips
    from rgsd_eval.testing import make_fake_run

    clips = tmp_path / "clips"
    clips.mkdir()
    next(c for c in demo_clips() if c.category == "walk").save(clips / "walk.npz")
    return make_fake_run(tmp_path / "low", motions=str(clips))


def test_downstream_refuses_a_style_the_low_level_has_no_clips_of_before_any_folder(tmp_path, capsys):
    low = _low_level_without_sidestep(tmp_path)
    out = tmp_path / "goal"
    assert rgsd(["downstream", "--low-level", str(low), "--style", "sidestep", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"error: {low / 'config.yaml'}: field 'env.motions': style 'sidestep' needs reference clips of category "
        "'sidestep'; the low-level run's clips have categories ['walk']"
    ), err
    assert not out.exists()


LOW_LEVEL_MOTIONS_FIX = (
    "put the clips back there or set env.motions in the low-level run's config.yaml to where they are now"
)


def test_a_low_level_whose_clips_moved_is_named_as_the_low_level_s_config_field(tmp_path, capsys):
    from rgsd_eval.testing import make_fake_run

    low = make_fake_run(tmp_path / "low", motions=str(tmp_path / "renamed"))
    out = tmp_path / "goal"
    assert rgsd(["downstream", "--low-level", str(low), "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"error: {low / 'config.yaml'}: field 'env.motions': motions not found: {tmp_path / 'renamed'} (the clips "
        f"the low-level run trained on, as its config names them; moved or renamed?); {LOW_LEVEL_MOTIONS_FIX}\n"
    )
    assert not out.exists()


@pytest.mark.parametrize("command", ["play", "eval", "export", "view"])
def test_every_command_that_hints_at_motions_takes_the_flag(command, capsys):
    """``RunDir.training_motions``'s hint names --motions: each command that reads a run's clips has it."""
    with pytest.raises(SystemExit):
        rgsd([command, "--help"])
    assert "--motions" in capsys.readouterr().out


def test_play_without_rendering_says_how_to_get_it_in_one_line_before_the_rollout(tmp_path, monkeypatch, capsys):
    import rgsd_agents.play
    import rgsd_envs.render

    def no_rollout(*_, **__):
        raise AssertionError("the rollout ran before rendering was checked")

    monkeypatch.setattr(rgsd_agents.play, "play_rollout", no_rollout)
    monkeypatch.setattr(rgsd_envs.render, "_gl_backend", lambda: "disable")  # as MUJOCO_GL=disable
    assert rgsd(["play", str(tmp_path / "run"), "--frames", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: MuJoCo's rendering is disabled"), err
    assert "apt-get install libegl1" in err and f"rgsd view {tmp_path / 'run'}" in err


@pytest.mark.parametrize("command", ["play", "eval"])
def test_training_motions_that_moved_are_named_with_their_config_field_and_the_flag(command, tmp_path, capsys):
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "run", motions=str(tmp_path / "renamed"))
    argv = ["play", str(run)] if command == "play" else ["eval", "--run", str(run), "--out", str(tmp_path / "ev")]
    assert rgsd(argv) == 2
    assert capsys.readouterr().err == (
        f"error: {run / 'config.yaml'}: field 'env.motions': motions not found: {tmp_path / 'renamed'} (the clips "
        "this run trained on, as its config names them; moved or renamed?); give the clips with --motions PATH\n"
    )
    assert not (tmp_path / "ev").exists()


def test_a_downstream_run_stopped_by_sigterm_checkpoints_writes_no_report_and_exits_130(tmp_path, monkeypatch, capsys):
    import signal

    from rgsd_agents.downstream.runner import DownstreamRunner
    from rgsd_eval.testing import make_fake_run

    iterate = DownstreamRunner.iterate

    def iterate_then_sigterm(self):
        metrics = iterate(self)
        signal.raise_signal(signal.SIGTERM)
        return metrics

    monkeypatch.setattr(DownstreamRunner, "iterate", iterate_then_sigterm)
    low = make_fake_run(tmp_path / "low")
    out = tmp_path / "goal"
    tiny = ["num_envs=4", "horizon=4", "iterations=50", "eval_every=100", "networks.actor_hidden=[16]"]
    sets = [a for kv in [*tiny, "networks.critic_hidden=[16]", "ppo.minibatch_size=8"] for a in ("--set", kv)]
    assert rgsd(["downstream", "--low-level", str(low), "--out", str(out), "--no-progress", *sets]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"stopped by SIGTERM after iteration 1: checkpoint {out / 'checkpoints' / 'latest.pt'}; "
        f"continue with: rgsd downstream --resume {out}"
    )
    assert (out / "checkpoints" / "latest.pt").is_file() and not (out / "report.md").exists()


@pytest.mark.parametrize(
    "command",
    [["train"], ["pretrain"], ["downstream", "--low-level", "missing"], ["eval", "--run", "missing"]],
    ids=["train", "pretrain", "downstream", "eval"],
)
def test_a_config_that_is_a_folder_is_called_a_folder_not_missing(command, tmp_path, capsys):
    config = tmp_path / "adir.yaml"
    config.mkdir()
    out = tmp_path / "run"
    assert rgsd([*command, "--config", str(config), "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {config}: is a folder, not a config file (give the YAML file)\n"
    assert not out.exists()


def test_seed_curves_of_skill_runs_say_they_are_not_downstream_runs(tmp_path, capsys):
    runs = [tmp_path / "run1", tmp_path / "run2"]
    for run in runs:
        run.mkdir()
        (run / "config.yaml").write_text("seed: 0\nenv:\n  motions: demo\n")  # a skill run's: no low_level
    out = tmp_path / "seeds"
    assert rgsd(["downstream", "--seeds", *map(str, runs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {runs[0]}: a skill-policy run (rgsd train, rgsd demo), but rgsd downstream --seeds")
    assert "takes a downstream run" in err and "repeat a seed" not in err and err.count("\n") == 1
    assert not out.exists()


def _clips_folder(path):
    path.mkdir()
    for name in ("walk.npz", "run.npz"):
        (path / name).write_bytes(b"clip")
    return path


def _eval_report(path):
    path.mkdir()
    (path / "metrics.json").write_text("{}")
    (path / "report.md").write_text("# report\n")
    return path


def test_training_into_a_folder_of_clips_is_refused_before_writing(tmp_path, capsys):
    clips = _clips_folder(tmp_path / "clips")
    (tmp_path / "empty").mkdir()  # were it not refused, set-up would fail on these motions instead
    sets = ["--set", f"env.motions={tmp_path / 'empty'}"]
    assert rgsd(["train", "--config", "demo", "--out", str(clips), "--no-progress", *sets]) == 2
    assert capsys.readouterr().err == (
        f"error: {clips} holds motion clips (run.npz, walk.npz), not a run; choose another --out\n"
    )
    assert sorted(p.name for p in clips.iterdir()) == ["run.npz", "walk.npz"]


@pytest.mark.parametrize(
    ("make", "what"), [(_clips_folder, "motion clips (run.npz, walk.npz)"), (_eval_report, "an rgsd eval report")]
)
def test_pretraining_into_clips_or_a_report_is_refused_before_writing(make, what, tmp_path, capsys):
    out = make(tmp_path / "out")
    before = sorted(p.name for p in out.iterdir())
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(out), "--steps", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: {out} holds {what}, not an encoder; pretrain into another --out\n"
    assert sorted(p.name for p in out.iterdir()) == before


def _reproduce_report(path):
    path.mkdir()
    (path / "report.json").write_text("{}")
    return path


def _shipped_policy(path):
    path.mkdir()
    (path / "policy.pt").write_bytes(b"policy")
    return path


def _encoder_folder(path):
    path.mkdir()
    tiny_encoder_file(path / "encoder.pt")
    return path


@pytest.mark.parametrize(
    ("make", "taken"),
    [
        (_reproduce_report, "holds an rgsd reproduce report, not a run; choose another --out"),
        (_shipped_policy, "holds a trained policy (policy.pt) but no checkpoint to continue; train into another"),
        (_encoder_folder, "holds an encoder (encoder.pt) but no training run; to train with it, into a new folder"),
    ],
    ids=["reproduce-report", "policy", "encoder"],
)
def test_a_demo_into_a_folder_of_other_outputs_is_refused_as_a_training_is(make, taken, tmp_path, monkeypatch, capsys):
    from rgsd_agents.training.runner import Runner

    def no_training(*args, **kwargs):
        raise AssertionError("the demo started training")

    monkeypatch.setattr(Runner, "__init__", no_training)
    out = make(tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert rgsd(["demo", "--out", str(out), "--no-eval", "--no-progress"]) == 2
    assert f"error: {out} {taken}" in capsys.readouterr().err  # on stderr, as every refusal
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no config.yaml, encoder.pt or lock


def test_what_a_folder_holds_besides_runs(tmp_path):
    from rgsd_agents.commands import holds_other_outputs

    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.yaml", "tracking_latents.npz", ".lock"):  # a run's own files: no clips, no report
        (run / name).write_bytes(b"")
    assert holds_other_outputs(run) is None and holds_other_outputs(tmp_path / "new") is None
    assert holds_other_outputs(_eval_report(tmp_path / "eval")) == "an rgsd eval report"
    repro = _eval_report(tmp_path / "repro")
    (repro / "report.json").write_text("{}")
    assert holds_other_outputs(repro) == "an rgsd reproduce report"
    clips = _clips_folder(tmp_path / "clips")
    for i in range(3):
        (clips / f"c{i}.npz").write_bytes(b"")
    assert holds_other_outputs(clips) == "motion clips (c0.npz, c1.npz, c2.npz, ...)"


@pytest.mark.parametrize(
    "command",
    [["train"], ["pretrain"], ["downstream", "--low-level", "missing"], ["reproduce", "--motions", "demo"]],
    ids=["train", "pretrain", "downstream", "reproduce"],
)
def test_a_config_file_that_is_not_utf8_text_is_named_in_one_line(command, tmp_path, capsys):
    config = tmp_path / "bin.yaml"
    config.write_bytes(b"\xff\xfe\x00garbage")
    flag = "--scale" if command[0] == "reproduce" else "--config"
    out = tmp_path / "out"
    assert rgsd([*command, flag, str(config), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {config}: not a UTF-8 text file\n"
    assert not out.exists()


def test_a_run_folder_whose_config_is_not_utf8_text_is_named_by_export(tmp_path, capsys):
    from rgsd_eval.testing import make_fake_run

    run = make_fake_run(tmp_path / "run")
    (run / "config.yaml").write_bytes(b"\xff\xfe\x00garbage")
    assert rgsd(["export", str(run)]) == 2
    assert capsys.readouterr().err == f"error: {run / 'config.yaml'}: not a UTF-8 text file\n"


def test_a_section_that_is_no_mapping_is_named_also_under_a_set_of_one_of_its_keys(tmp_path, capsys):
    config = tmp_path / "b4.yaml"
    config.write_text("base: cpu\nenv: 5\n")
    expected = f"error: {config}: field 'env': expected a mapping of EnvConfig keys, got '5'\n"
    for sets in ([], ["--set", "env.motions=demo"], ["--set", "env.deviation.threshold=0.5"]):
        assert rgsd(["train", "--config", str(config), "--out", str(tmp_path / "o"), *sets]) == 2
        assert capsys.readouterr().err == expected, sets
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hidden", "0"], "--hidden 0: field 'hidden': must be one or more sizes > 0, got [0]"),
        (["--hidden", "64", "-2"], "--hidden 64 -2: field 'hidden': must be one or more sizes > 0, got [64, -2]"),
        (["--set", "hidden=[]"], "--set hidden=[]: field 'hidden': must be one or more sizes > 0, got []"),
        (["--lr", "0"], "--lr 0.0: field 'lr': must be > 0, got 0.0"),
        (["--steps", "-1"], "--steps -1: field 'steps': must be >= 0, got -1"),
        (["--set", "eval_every=0"], "--set eval_every=0: field 'eval_every': must be >= 1, got 0"),
    ],
)
def test_pretrain_names_the_flag_and_the_rule_of_a_value_out_of_range(args, message, tmp_path, capsys):
    out = tmp_path / "enc"
    assert rgsd(["pretrain", "--motions", "demo", "--out", str(out), *args]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("reward_kappa=-1", "reward_kappa must be a finite number > 0 or null, got -1.0"),
        ("reward_kappa=0", "reward_kappa must be a finite number > 0 or null, got 0.0"),
        ("reward_kappa=.inf", "reward_kappa must be a finite number > 0 or null, got inf"),
        ("reward_constant=.nan", "reward_constant must be a finite number or null, got nan"),
    ],
)
def test_train_refuses_a_reward_scale_that_is_not_positive_and_finite(setting, message, tmp_path, capsys):
    encoder = tiny_encoder_file(tmp_path / "encoder.pt")
    out = tmp_path / "run"
    quick = ["--set", "iterations=0", "--set", "num_envs=2"]  # were it accepted: over at once
    assert (
        rgsd(["train", "--config", "demo", "--out", str(out), "--set", f"encoder={encoder}", "--set", setting, *quick])
        == 2
    )
    assert capsys.readouterr().err == f"error: --set {setting}: {message}\n"
    assert not out.exists()


def _rgsd_eval(argv):
    from rgsd_eval.cli import main

    return main(argv)


def _rgsd_motions(argv):
    from rgsd_envs.motion.cli import main

    return main(argv)


@pytest.mark.parametrize(
    ("main", "command"),
    [
        (rgsd, ["train", "--config", "demo", "--set", "iterations=0", "--out"]),
        (rgsd, ["pretrain", "--motions", "demo", "--steps", "0", "--out"]),
        (rgsd, ["downstream", "--low-level", "missing", "--out"]),
        (rgsd, ["eval", "--run", "missing", "--out"]),
        (_rgsd_eval, ["--run", "missing", "--out"]),
        (rgsd, ["play", "missing", "--out"]),
        (rgsd, ["view", "missing", "--motions"]),
        (_rgsd_motions, ["demo", "--variants", "2", "--out"]),
    ],
    ids=["train", "pretrain", "downstream", "eval", "rgsd-eval", "play", "view", "rgsd-motions"],
)
def test_a_negative_seed_is_refused_by_its_flag(main, command, tmp_path, capsys):
    """numpy's generators take no negative seed: refused where it is typed, not as a traceback from deep inside."""
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main([*command, str(out), "--seed", "-1"])
    assert exit_.value.code == 2
    assert "argument --seed: expected a seed (a whole number >= 0), got -1\n" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["pretrain", "--motions", "demo", "--steps", "0"], "field 'seed': must be >= 0, got -1"),
        (["downstream", "--low-level", "missing"], "seed must be >= 0, got -1"),
        (["eval", "--run", "missing"], "seed must be >= 0, got -1"),
    ],
    ids=["pretrain", "downstream", "eval"],
)
def test_a_negative_seed_set_in_a_config_is_named_by_its_set(command, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert rgsd([*command, "--out", str(out), "--set", "seed=-1", "--no-progress"]) == 2
    assert capsys.readouterr().err == f"error: --set seed=-1: {message}\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            ["train", "--resume", "{run}", "--config", "cpu"],
            "--resume continues a run with its saved config; leave out --config and --out",
        ),
        (
            ["downstream", "--resume", "{run}", "--config", "my.yaml"],
            "--resume continues a run with its saved config; leave out --config",
        ),
        (
            ["downstream", "--resume", "{run}", "--style", "sidestep", "--out", "{out}"],
            "--resume continues a run with its saved config; leave out --style, --out",
        ),
        (
            [
                "downstream",
                "--seeds",
                "{run}",
                "--out",
                "{out}",
                "--config",
                "default",
                "--set",
                "seed=1",
                "--seed",
                "0",
            ],
            "--seeds RUN ... reads finished runs and trains nothing; leave out --config, --set, --seed",
        ),
        (
            ["downstream", "--seeds", "{run}", "--out", "{out}", "--low-level", "{run}", "--style", "sidestep"],
            "--seeds RUN ... reads finished runs and trains nothing; leave out --low-level, --style",
        ),
        (["downstream", "--seeds", "{run}"], "--seeds RUN ... needs --out DIR (the report folder)"),
        (["reproduce", "--out", "{out}"], "--motions is required (unless --report-only)"),
        (["reproduce", "--motions", "demo", "--seeds", "0", "--out", "{out}"], "--seeds must be >= 1"),
    ],
    ids=[
        "train-resume",
        "downstream-resume-config",
        "downstream-resume-style",
        "seeds-config",
        "seeds-style",
        "seeds",
        "reproduce-motions",
        "reproduce-seeds",
    ],
)
def test_a_flag_the_mode_would_ignore_is_refused_by_name_on_stderr(command, message, tmp_path, capsys):
    names = {"run": tmp_path / "run", "out": tmp_path / "out"}
    assert rgsd([a.format(**names) for a in command]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {message}\n")
    assert list(tmp_path.iterdir()) == []
