"""``--set KEY=VALUE`` values are converted to the field's type or refused in one line naming the ``--set``,
before any run folder exists."""

from __future__ import annotations

import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.config import TrainConfig, load_config, parse_set
from rgsd_agents.downstream.runner import DownstreamConfig
from rgsd_agents.reproduce.scale import load_scale
from rgsd_envs.utils.config import OverrideError


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("num_envs=abc", "error: --set num_envs=abc: expected int, got 'abc'"),
        ("ppo.epochs=2.5", "error: --set ppo.epochs=2.5: expected int, got '2.5'"),
        ("max_minutes=soon", "error: --set max_minutes=soon: expected float or null, got 'soon'"),
        ("env.contact_termination=3", "error: --set env.contact_termination=3: expected true/false, got '3'"),
        ("env.deviation.adaptive=3", "error: --set env.deviation.adaptive=3: expected true/false, got '3'"),
        ("nonexistent.key=3", "error: --set nonexistent.key=3: unknown key 'nonexistent' in the config; valid keys: "),
        ("ppo.nonexistent=3", "error: --set ppo.nonexistent=3: unknown key 'nonexistent' in 'ppo'; valid keys: "),
        # a key of another level of the config is named
        (
            "env.num_envs=8",
            "error: --set env.num_envs=8: unknown key 'num_envs' in 'env' (did you mean --set num_envs=8?); ",
        ),
        (
            "gamma=0.9",
            "error: --set gamma=0.9: unknown key 'gamma' in the config (did you mean --set ppo.gamma=0.9?); ",
        ),
        # a key of the same section comes before the same name in another section (pretrain.lr)
        (
            "ppo.lr=1e-4",
            "error: --set ppo.lr=0.0001: unknown key 'lr' in 'ppo' (did you mean --set ppo.actor_lr=0.0001 or --set "
            "ppo.critic_lr=0.0001?); valid keys: ",
        ),
        ("ppo.epoch=2", "error: --set ppo.epoch=2: unknown key 'epoch' in 'ppo' (did you mean --set ppo.epochs=2?); "),
        # a section given a name: the name's key
        (
            "method=ase",
            "error: --set method=ase: expected a mapping of MethodConfig keys, got 'ase'; to choose it by name: "
            "--set method.name=ase\n",
        ),
        # named as the user typed it, not as --device
        ("device=gpu", "error: --set device=gpu: field 'device': must be one of auto, cpu, cuda, cuda:N, got 'gpu'\n"),
        (
            "env.motions=nowhere",
            "error: --set env.motions=nowhere: field 'env.motions': no such motion file or folder: nowhere; give "
            "'demo', clip files or folders of clips\n",
        ),
        # values of the right type that the config refuses: named by the --set too, not blamed on the preset
        ("num_envs=0", "error: --set num_envs=0: num_envs must be >= 1, got 0"),
        ("seed=-1", "error: --set seed=-1: seed must be an int in [0, 2**32), got -1"),
        ("ppo.gamma=1.5", "error: --set ppo.gamma=1.5: field 'ppo': ppo.gamma and ppo.gae_lambda must be in [0, 1]"),
        ("max_minutes=0", "error: --set max_minutes=0: max_minutes must be > 0 or null (no budget), got 0"),
        ("max_minutes=-1", "error: --set max_minutes=-1: max_minutes must be > 0 or null (no budget), got -1"),
    ],
)
def test_bad_set_is_refused_in_one_line_naming_it_before_any_run_folder(
    setting, message, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # the default run folder would be runs/demo_<date> here
    # iterations=0: were the bad value taken, the run would end at once instead of training for minutes
    assert rgsd(["train", "--config", "demo", "--set", setting, "--set", "iterations=0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert "demo.yaml" not in err  # the preset is not to blame
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--config", "demo"],
        ["pretrain", "--motions", "demo"],
        ["downstream", "--low-level", "missing"],
        ["demo"],
    ],
    ids=["train", "pretrain", "downstream", "demo"],
)
def test_a_device_that_is_no_device_name_is_refused_by_its_flag(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        rgsd([*command, "--out", str(tmp_path / "out"), "--device", "gpu"])
    assert exit_.value.code == 2
    assert "argument --device: expected one of auto, cpu, cuda, cuda:N, got 'gpu'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_config_file_s_device_is_named_by_the_file_and_its_field(tmp_path):
    (tmp_path / "gpu.yaml").write_text("base: demo\ndevice: gpu\n")
    with pytest.raises(ValueError, match=r"gpu\.yaml: field 'device': must be one of auto, cpu, cuda, cuda:N, got"):
        load_config(tmp_path / "gpu.yaml")
    with pytest.raises(ValueError, match=r"^--set device=tpu: field 'device': must be one of"):
        load_config("default", {"device": "tpu"}, cls=DownstreamConfig, presets="downstream")
    assert load_config("demo", {"device": "CUDA:1"}).device == "CUDA:1"  # a name; whether it is usable: later


def test_set_values_are_converted_to_the_field_type():
    cfg = load_config(
        "demo", {"num_envs": 1e3, "ppo.actor_lr": 1, "max_minutes": "2.5e1", "networks.actor_hidden": [8]}
    )
    assert (cfg.num_envs, type(cfg.num_envs)) == (1000, int)
    assert (cfg.ppo.actor_lr, type(cfg.ppo.actor_lr)) == (1.0, float)
    assert cfg.max_minutes == 25.0 and cfg.networks.actor_hidden == (8,)
    assert load_config("demo", {"max_minutes": None}).max_minutes is None


def test_downstream_set_is_checked_against_its_own_config():
    with pytest.raises(OverrideError, match=r"--set task.style=3: expected"):
        load_config("default", {"task.style": 3}, cls=DownstreamConfig, presets="downstream")
    assert isinstance(load_config("demo", {}), TrainConfig)


def test_a_downstream_latent_branch_is_refused_when_the_config_loads():
    with pytest.raises(ValueError, match=r"--set networks.latent_branch=\[64\]: .*latent_branch must be empty"):
        load_config("default", {"networks.latent_branch": [64]}, cls=DownstreamConfig, presets="downstream")
    with pytest.raises(ValueError, match=r"actor_hidden and critic_hidden must be non-empty"):  # the base's checks hold
        load_config("default", {"networks.actor_hidden": []}, cls=DownstreamConfig, presets="downstream")


def test_method_options_pass_the_set_check_and_the_method_checks_them():
    cfg = load_config("ase", parse_set(["method.options.hidden=[16, 8]", "method.options.beta=0.25"]))
    assert cfg.method.options == {"hidden": [16, 8], "beta": 0.25}
    with pytest.raises(ValueError, match=r"method\.options\.bta.*valid keys: beta"):
        load_config("ase", parse_set(["method.options.bta=0.25"]))


@pytest.mark.parametrize(
    ("command", "setting", "message"),
    [
        (["pretrain", "--motions", "demo"], "steps=many", "error: --set steps=many: expected int, got 'many'"),
        (["pretrain", "--motions", "demo"], "nope=1", "error: --set nope=1: unknown key 'nope' in the config"),
        (["pretrain", "--motions", "demo"], "steps", "error: --set steps: expected key=value"),
        (["reproduce", "--motions", "demo"], "seeds=two", "error: --set seeds=two: expected int, got 'two'"),
        (["reproduce", "--motions", "demo"], "eval.nope=1", "error: --set eval.nope=1: unknown key 'nope' in 'eval'"),
        (["eval", "--run", "missing"], "rollouts=x", "error: --set rollouts=x: expected int, got 'x'"),
        (["downstream", "--low-level", "missing"], "task.style=3", "error: --set task.style=3: expected"),
        # a value that is not YAML: named with where the YAML breaks, not a traceback
        (["train", "--config", "demo"], "ppo.epochs=[", "error: --set ppo.epochs=[: not valid YAML at line 1"),
        (["pretrain", "--motions", "demo"], "steps={", "error: --set steps={: not valid YAML at line 1, column 2"),
        (["reproduce", "--motions", "demo"], "seeds=[", "error: --set seeds=[: not valid YAML at line 1"),
        (["eval", "--run", "missing"], "rollouts=[", "error: --set rollouts=[: not valid YAML at line 1"),
        (["downstream", "--low-level", "missing"], "task.style='a", "error: --set task.style='a: not valid YAML"),
    ],
)
def test_every_command_that_takes_a_config_checks_its_set_the_same_way(
    command, setting, message, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert rgsd([*command, "--out", str(tmp_path / "out"), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_pretrain_set_sets_the_config_and_the_options_win_over_it(tmp_path):
    from rgsd_agents.cli import build_parser
    from rgsd_agents.commands.pretrain import config_from_args

    args = build_parser().parse_args(
        ["pretrain", "--out", str(tmp_path), "--set", "eval_every=7", "--set", "hidden=[8, 4]", "--set", "lr=3e-4",
         "--set", "steps=9", "--steps", "5"]
    )  # fmt: skip
    cfg = config_from_args(args)
    assert (cfg.eval_every, cfg.hidden, cfg.lr, cfg.steps) == (7, (8, 4), 3e-4, 5)


def test_reproduce_set_changes_the_scale_and_saves_it(tmp_path):
    from rgsd_agents.reproduce.scale import ReproduceScale, load_scale
    from rgsd_envs.utils.config import set_overrides

    sets = set_overrides(ReproduceScale, ["eval.settings.rollouts=2", "downstream.styles=[sidestep]", "seeds=1"])
    scale, _ = load_scale("smoke", sets)
    assert scale.eval.settings["rollouts"] == 2 and scale.downstream.styles == ["sidestep"] and scale.seeds == 1


def test_eval_set_sits_between_the_config_file_and_the_flags(tmp_path):
    from rgsd_agents.cli import build_parser
    from rgsd_eval.cli import config_from_args

    config = tmp_path / "eval.yaml"
    config.write_text("rollouts: 3\nvideo_clips: 1\n")
    args = build_parser().parse_args(
        ["eval", "--run", "r", "--out", "o", "--config", str(config), "--set", "rollouts=5", "--set", "video_clips=2",
         "--set", "protocol=paper", "--rollouts", "7"]
    )  # fmt: skip
    cfg = config_from_args(args)
    assert (cfg.protocol, cfg.rollouts, cfg.video_clips) == ("paper", 7, 2)


def test_a_file_s_own_bad_value_names_the_file_even_beside_a_set_unless_the_set_mends_it(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: demo\nnum_envs: 0\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: num_envs must be >= 1, got 0"):
        load_config(bad, {"seed": 3})
    assert load_config(bad, {"num_envs": 4}).num_envs == 4  # the --set mends the file: no error
    with pytest.raises(ValueError, match=r"^--set ppo\.gamma=1\.5: field 'ppo': ppo\.gamma"):
        load_config(bad, {"num_envs": 4, "ppo.gamma": 1.5})  # one --set mends the file, the other breaks it
    with pytest.raises(ValueError, match=r"^--set train\.minutes=-1: train\.minutes must be > 0 or null"):
        load_scale("smoke", {"train.minutes": -1})
    with pytest.raises(ValueError, match=r"^--set num_envs=0: num_envs must be >= 1"):
        load_config("default", {"num_envs": 0}, cls=DownstreamConfig, presets="downstream")
