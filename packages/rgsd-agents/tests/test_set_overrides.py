"""``--set KEY=VALUE`` values are converted to the field's type or refused in one line naming the ``--set``,
before any run folder exists."""

from __future__ import annotations

import pytest

from rgsd_agents.cli import main as rgsd
from rgsd_agents.config import TrainConfig, load_config, parse_set
from rgsd_agents.downstream.runner import DownstreamConfig
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


def test_method_options_pass_the_set_check_and_the_method_checks_them():
    cfg = load_config("ase", parse_set(["method.options.hidden=[16, 8]", "method.options.beta=0.25"]))
    assert cfg.method.options == {"hidden": [16, 8], "beta": 0.25}
    with pytest.raises(ValueError, match=r"method\.options\.bta.*valid keys: beta"):
        load_config("ase", parse_set(["method.options.bta=0.25"]))
