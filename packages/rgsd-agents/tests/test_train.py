"""End to end on tiny settings: run-folder files, finite losses, determinism, exact resumption, truncation bootstrap."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import sys

import numpy as np
import pytest
import torch
import yaml

from rgsd_agents.config import CURRICULUM_KEYS, MethodConfig, PPOConfig, TrainConfig
from rgsd_agents.rl.loop import CONFIG_CHANGES
from rgsd_agents.testing import (
    assert_same_tensors,
    reproducible,
    split_and_resume,
    tiny_encoder_file,
    tiny_train_config,
)
from rgsd_agents.training.runner import Runner
from rgsd_envs.envs.config import DEVIATION_KEYS, NO_DEVIATION, ClipSamplingConfig, DeviationConfig, EnvConfig
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM
from rgsd_envs.rewards.encoders import load_encoder
from rgsd_envs.runs.policy import load_policy
from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.testing import stop_signals_as_in_a_terminal
from rgsd_envs.utils.provenance import provenance


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    """A small random MLP encoder standardised on the demo references (saved like a pretrained one)."""
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


def tiny_config(encoder: str, **kw) -> TrainConfig:
    """The shared tiny settings, with TrainConfig's own probe schedule (the untrained policy is probed)."""
    return tiny_train_config(encoder, **{"probe_every": TrainConfig.probe_every, **kw})


def _params(runner: Runner) -> dict[str, torch.Tensor]:
    state = {f"ac.{k}": v for k, v in runner.ac.state_dict().items()}
    state.update({f"enc.{k}": v for k, v in runner.method.trainable.state_dict().items()})
    return state


def test_training_writes_the_run_folder_with_finite_losses(tmp_path, tiny_encoder, caplog):
    caplog.set_level(logging.INFO, logger="rgsd_agents.probe")
    runner = Runner(tiny_config(tiny_encoder), tmp_path / "run", progress=False)
    history = runner.learn()
    runner.close()
    assert "probing imitation every 50 iterations: 5 of 5 clips, 20 worlds, up to 90 frames each" in caplog.text
    assert len(history) == 4
    for m in history:
        assert {"losses/policy_loss", "losses/value_loss", "method/loss", "charts/SPS"} <= m.keys()
        assert all(math.isfinite(v) for v in m.values())
    assert any("rollout/imitation_reward" in m for m in history) and any(
        "rollout/discovery_reward" in m for m in history
    )
    run = RunDir(tmp_path / "run")
    run.check(RunDir.CONFIG, RunDir.POLICY, RunDir.ENCODER, RunDir.DISCOVERY_ENCODER)
    assert {p.name for p in run.checkpoints_dir.iterdir()} >= {"iter_000002.pt", "iter_000004.pt", "latest.pt"}
    assert any(run.tensorboard_dir.iterdir())
    sharpness = json.loads(run.file("reward_sharpness.json").read_text())  # logged at the start
    assert set(sharpness["cos"]) == set(runner.env.unwrapped.core.lib.names)
    assert -1.0 <= sharpness["mean_cos"]["held_still"] <= 1.0
    assert run.env_config().p_imitation == 0.7
    assert run.config()["ppo"]["minibatch_size"] == 16
    policy = load_policy(run.policy_path)
    assert policy.meta["iteration"] == 4
    assert policy.meta["provenance"] == provenance()  # the code that wrote it, which rgsd eval reports
    obs = torch.randn(3, POLICY_OBS_DIM)
    torch.testing.assert_close(policy.act(obs), runner.ac.actor.act(obs))
    disc = load_encoder(run.discovery_encoder_path)
    x = torch.randn(2, ENCODER_INPUT_DIM)
    torch.testing.assert_close(disc(x), runner.method.trainable(x))
    assert not torch.allclose(disc(x), run.load_encoder()(x))  # the discovery encoder was trained


def test_same_seed_gives_the_same_numbers_and_another_seed_does_not(tmp_path, tiny_encoder):
    histories = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        runner = Runner(tiny_config(tiny_encoder, iterations=2, seed=seed), tmp_path / name, progress=False)
        histories.append(reproducible(runner.learn()))
        runner.close()
    assert histories[0] == histories[1]
    assert histories[0] != histories[2]


def test_two_training_seeds_share_no_world_s_episode_draws(tmp_path, tiny_encoder):
    """Gymnasium's int seed gives world i seed + i, so with it seed 1's worlds would replay seed 0's shifted by one."""
    draws = []
    for seed in (0, 1):
        runner = Runner(tiny_config(tiny_encoder, num_envs=8, seed=seed), tmp_path / str(seed), progress=False)
        core = runner.env.core
        episodes = []  # each world's first three episodes: clip, start frame, task, skill
        for _ in range(3):
            skill = core.skill.cpu().numpy().astype(np.float64)
            episodes.append(np.column_stack([core.clip_host, core.frame_host, core.task_host, skill]))
            core.reset_envs(np.arange(8))
        runner.close()
        draws.append({tuple(np.concatenate([e[i] for e in episodes])) for i in range(8)})
    assert len(draws[0]) == len(draws[1]) == 8
    assert not draws[0] & draws[1], "a world of seed 1 draws the episodes of a world of seed 0"


TUNED_OPTIONS = dict(
    ppo=PPOConfig(minibatch_size=16, epochs=2, actor_lr=1e-3, critic_lr=1e-3, bf16=True),
    method=MethodConfig("rgsd", {"minibatch_size": 16, "lr": 1e-3, "update_every": 2}),
    env=EnvConfig(
        deviation=DeviationConfig(metric="max", adaptive=True),
        clip_sampling=ClipSamplingConfig(mode="failure_weighted", failure_share=1.0),
    ),
)
"""The tuned options all at once: bf16 update, discovery every 2nd iteration, tightening max rule, failure-weighted
clip draws."""


@pytest.mark.parametrize("options", [{}, TUNED_OPTIONS], ids=["defaults", "tuned_options"])
def test_resume_continues_exactly(tmp_path, tiny_encoder, options):
    straight = Runner(tiny_config(tiny_encoder, iterations=4, **options), tmp_path / "straight", progress=False)
    full = reproducible(straight.learn())
    straight.close()
    if options:  # the options did act: the encoder skipped iterations, thresholds and clip draws were logged
        assert ["method/loss" in m for m in full] == [True, False, True, False]
        assert any(k.startswith("termination/") for k in full[-1])
        drawn = [v for k, v in full[-1].items() if k.startswith("clip_sampling/")]
        assert len(drawn) == straight.env.core.lib.num_clips and sum(drawn) == pytest.approx(1.0)

    # Split at 3, off the every-2nd-iteration discovery cadence: a resume that lost the method's iteration counter
    # would train the encoder at iteration 4 as well, which a split at 2 (a multiple of 2) would not show.
    resumed, rest = split_and_resume(tiny_config(tiny_encoder, iterations=3, **options), tmp_path / "split", 4)
    assert rest == full[3:]
    assert_same_tensors(_params(straight), _params(resumed))
    assert RunDir(tmp_path / "split").config()["iterations"] == 4


def test_resume_refuses_changes_that_would_break_continuation(tmp_path, tiny_encoder):
    runner = Runner(tiny_config(tiny_encoder, iterations=2), tmp_path / "run", progress=False)
    runner.learn()
    runner.close()
    with pytest.raises(ValueError, match="only iterations"):
        Runner.resume(tmp_path / "run", {"ppo.epochs": 3})


def test_resume_may_tighten_the_deviation_rule_and_records_when(tmp_path, tiny_encoder):
    runner = Runner(tiny_config(tiny_encoder, iterations=2), tmp_path / "run", progress=False)
    runner.learn()
    samples = runner.global_step
    runner.close()
    changes = {"iterations": 3, "env.deviation.heading_deg": 10.0, "env.deviation.adaptive": True}
    resumed = Runner.resume(tmp_path / "run", changes)
    assert resumed.env.core.deviation_rule.cfg.heading_deg == 10.0  # the env plays by the new rule
    history = resumed.learn()
    resumed.close()
    assert any(k.startswith("termination/") for k in history[-1])  # the tightening rule acted
    saved = RunDir(tmp_path / "run").config()  # the env as it started; the change is a curriculum step
    assert saved["env"]["deviation"]["adaptive"] is False
    assert saved["curriculum"] == [
        {"at_samples": float(samples), "set": {"env.deviation.heading_deg": 10.0, "env.deviation.adaptive": True}}
    ]
    recorded = yaml.safe_load((tmp_path / "run" / CONFIG_CHANGES).read_text())
    assert recorded == [
        {"iteration": 2, "samples": samples, "key": "env.deviation.heading_deg", "old": None, "new": 10.0},
        {"iteration": 2, "samples": samples, "key": "env.deviation.adaptive", "old": False, "new": True},
    ]
    Runner.resume(tmp_path / "run", {"env.deviation.heading_deg": 10.0}).close()  # the same value again: no entry
    assert len(yaml.safe_load((tmp_path / "run" / CONFIG_CHANGES).read_text())) == 2
    assert len(RunDir(tmp_path / "run").config()["curriculum"]) == 1
    with pytest.raises(
        ValueError, match=r"not env\.p_imitation \(from the checkpoint on, so may env\.deviation\.threshold"
    ):
        Runner.resume(tmp_path / "run", {"env.p_imitation": 0.5})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- iteration: [2\n", "not valid YAML at line 2, column 1"),
        ("iteration: 2\n", "expected a list of config changes (iteration, samples, key, old, new), got dict; "),
    ],
    ids=["not-yaml", "mapping"],
)
def test_a_config_changes_file_that_is_no_list_of_changes_is_named_and_kept(text, message, tmp_path):
    from rgsd_agents.rl.loop import record_config_changes
    from rgsd_envs.utils.files import InputFileError

    path = tmp_path / CONFIG_CHANGES
    path.write_text(text)
    with pytest.raises(InputFileError) as err:
        record_config_changes(RunDir(tmp_path), {"env.deviation.heading_deg": (None, 10.0)}, 2, 64)
    assert err.value.path == str(path) and err.value.reason.startswith(message), err.value
    assert path.read_text() == text and sorted(p.name for p in tmp_path.iterdir()) == [CONFIG_CHANGES]


def test_a_resume_that_changes_the_rule_beside_a_corrupt_record_changes_no_file(tmp_path, tiny_encoder):
    from rgsd_envs.utils.files import InputFileError

    run = tmp_path / "run"
    runner = Runner(tiny_config(tiny_encoder, iterations=2), run, progress=False)
    runner.learn()
    runner.close()
    (run / CONFIG_CHANGES).write_text("iteration: 2\n")
    config = (run / "config.yaml").read_text()
    with pytest.raises(InputFileError, match=r"config_changes\.yaml: expected a list of config changes"):
        Runner.resume(run, {"iterations": 3, "env.deviation.heading_deg": 10.0})
    assert (run / "config.yaml").read_text() == config  # no curriculum step saved that the record lacks
    assert (run / CONFIG_CHANGES).read_text() == "iteration: 2\n"


def test_a_curriculum_step_tightens_the_deviation_rule_at_its_sample_count_and_resumes_exactly(tmp_path, tiny_encoder):
    batch = tiny_config(tiny_encoder).batch_size
    step = {"at_samples": 2 * batch, "set": {"env.deviation.adaptive": True, "env.deviation.heading_deg": 10}}
    cfg = tiny_config(tiny_encoder, iterations=4, curriculum=[step])
    straight = Runner(cfg, tmp_path / "straight", progress=False)
    assert straight.env.core.cfg.deviation.heading_deg is None  # not yet
    full = reproducible(straight.learn())
    straight.close()
    assert straight.env.core.deviation_rule.cfg.heading_deg == 10.0
    assert [any(k.startswith("termination/") for k in m) for m in full] == [False, False, True, True]
    recorded = yaml.safe_load((tmp_path / "straight" / CONFIG_CHANGES).read_text())
    assert [(e["iteration"], e["samples"], e["key"], e["old"], e["new"]) for e in recorded] == [
        (2, 2 * batch, "env.deviation.adaptive", False, True),
        (2, 2 * batch, "env.deviation.heading_deg", None, 10.0),
    ]
    # split at the step: the resumed run finds it in force, trains the same numbers and records nothing again
    resumed, rest = split_and_resume(tiny_config(tiny_encoder, iterations=2, curriculum=[step]), tmp_path / "split", 4)
    assert rest == full[2:]
    assert_same_tensors(_params(straight), _params(resumed))
    assert len(yaml.safe_load((tmp_path / "split" / CONFIG_CHANGES).read_text())) == 2


def test_a_curriculum_that_would_change_anything_but_the_deviation_rule_is_refused(tiny_encoder):
    with pytest.raises(ValueError, match=r"curriculum\[0\]\.set may change env\.deviation\.threshold.*not ppo\.epochs"):
        tiny_config(tiny_encoder, curriculum=[{"at_samples": 10, "set": {"ppo.epochs": 2}}])
    with pytest.raises(ValueError, match=r"curriculum\[1\]\.at_samples must be a number >= the previous"):
        steps = [
            {"at_samples": 10, "set": {"env.deviation.min": 0.3}},
            {"at_samples": 5, "set": {"env.deviation.min": 0.2}},
        ]
        tiny_config(tiny_encoder, curriculum=steps)
    with pytest.raises(ValueError, match=r"curriculum\[0\]\.set: deviation\.min must be in"):
        tiny_config(
            tiny_encoder,
            curriculum=[{"at_samples": 1, "set": {"env.deviation.min": 0.9, "env.deviation.adaptive": True}}],
        )


def test_the_curriculum_keys_are_the_deviation_rules_fields():
    assert set(DEVIATION_KEYS) == {f.name for f in dataclasses.fields(DeviationConfig)}
    assert tuple(f"env.deviation.{k}" for k in DEVIATION_KEYS) == CURRICULUM_KEYS


def test_rollout_bootstraps_truncated_steps_with_the_final_observation_value(tmp_path, tiny_encoder):
    env = EnvConfig(deviation=NO_DEVIATION, contact_termination=False, fall_height=0.0)
    runner = Runner(tiny_config(tiny_encoder, horizon=60, env=env), tmp_path / "run", progress=False)
    recorded = []
    step = runner.env.step

    def recording_step(actions):
        out = step(actions)
        recorded.append(out)
        return out

    runner.env.step = recording_step
    norm = runner.ac.obs_normalizer
    mean, std = norm.mean.clone().float(), (norm.var + norm.eps).sqrt().float()  # frozen for the rollout
    runner.rollout()
    runner.close()
    gamma = runner.cfg.ppo.gamma
    truncations = terminations = 0
    for t, (_, reward, term, trunc, info) in enumerate(recorded):
        for i in range(runner.cfg.num_envs):
            stored = runner.storage.rewards[t, i].item()
            expected = float(reward[i])
            if trunc[i]:
                truncations += 1
                final = torch.as_tensor(info["final_obs"][i]).unsqueeze(0)
                with torch.no_grad():
                    expected += gamma * runner.ac.value(((final - mean) / std).clamp(-norm.clip, norm.clip)).item()
            terminations += int(term[i])
            assert runner.storage.dones[t, i].item() == float(term[i] or trunc[i])
            assert abs(stored - expected) < 1e-4 * max(1.0, abs(expected)), (t, i, stored, expected)
    assert truncations > 0


def test_cli_train_writes_a_run_from_a_yaml_file_and_set_overrides(tmp_path, tiny_encoder):
    from rgsd_agents.commands import train

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(
        "num_envs: 4\nhorizon: 8\niterations: 2\ncheckpoint_every: 1\n"
        f"encoder: {tiny_encoder}\n"
        "networks: {actor_hidden: [16], critic_hidden: [16]}\n"
        "ppo: {minibatch_size: 16, epochs: 1}\nmethod: {options: {minibatch_size: 32}}\n"
    )
    parser = argparse.ArgumentParser()
    train.register(parser.add_subparsers())
    out = tmp_path / "run"
    args = parser.parse_args(
        ["train", "--config", str(cfg), "--out", str(out), "--set", "ppo.actor_lr=3e-4", "--seed", "5", "--no-progress"]
    )
    assert args.func(args) == 0
    saved = RunDir(out).config()
    assert saved["seed"] == 5 and saved["ppo"]["actor_lr"] == 3e-4
    assert (out / "checkpoints" / "iter_000002.pt").exists()
    args = parser.parse_args(["train", "--resume", str(out), "--set", "iterations=3", "--no-progress"])
    assert args.func(args) == 0
    assert load_policy(out / "policy.pt").meta["iteration"] == 3


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_ctrl_c_sigterm_and_sighup_finish_the_iteration_save_and_stop(tmp_path, tiny_encoder, name):
    import signal

    sig = getattr(signal, name)
    runner = Runner(tiny_config(tiny_encoder, iterations=50, checkpoint_every=100), tmp_path / "run", progress=False)
    iterate = runner.iterate

    def iterate_then_interrupt():
        metrics = iterate()
        if runner.iteration == 2:
            signal.raise_signal(sig)
        return metrics

    runner.iterate = iterate_then_interrupt
    with stop_signals_as_in_a_terminal():  # under nohup the loop leaves an ignored SIGHUP ignored
        before = signal.getsignal(sig)
        history = runner.learn()
        runner.close()
        assert signal.getsignal(sig) is before  # the loop's handler is removed again
    assert len(history) == 2 and runner.stopped_by == sig
    assert torch.load(tmp_path / "run" / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 2
    assert load_policy(tmp_path / "run" / "policy.pt").meta["iteration"] == 2


def _tiny_yaml(tmp_path, tiny_encoder, iterations: int = 2) -> str:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(
        f"num_envs: 4\nhorizon: 8\niterations: {iterations}\ncheckpoint_every: 100\nprobe_every: 0\n"
        f"encoder: {tiny_encoder}\n"
        "networks: {actor_hidden: [16], critic_hidden: [16]}\n"
        "ppo: {minibatch_size: 16, epochs: 1}\nmethod: {options: {minibatch_size: 32}}\n"
    )
    return str(cfg)


def _signal_at(monkeypatch, iteration: int, *signals: int) -> None:
    """Every Runner sends itself ``signals`` (one after the other) at the end of ``iteration``."""
    import signal

    iterate = Runner.iterate

    def iterate_then_signal(self):
        metrics = iterate(self)
        if self.iteration == iteration:
            for sig in signals:
                signal.raise_signal(sig)
        return metrics

    monkeypatch.setattr(Runner, "iterate", iterate_then_signal)


def test_a_stopped_train_exits_130_with_one_line_naming_the_checkpoint_and_the_resume_command(
    tmp_path, tiny_encoder, monkeypatch, capsys
):
    import signal

    from rgsd_agents.cli import main

    _signal_at(monkeypatch, 1, signal.SIGTERM)
    out = tmp_path / "run"
    assert (
        main(["train", "--config", _tiny_yaml(tmp_path, tiny_encoder, 50), "--out", str(out), "--no-progress"]) == 130
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "SIGTERM: finishing this iteration and writing a checkpoint (SIGTERM again to abort without saving)",
        f"stopped by SIGTERM after iteration 1: checkpoint {out / 'checkpoints' / 'latest.pt'}; "
        f"continue with: rgsd train --resume {out}",
    ]
    assert torch.load(out / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 1


def test_a_second_stop_signal_aborts_with_one_line_and_no_traceback(tmp_path, tiny_encoder, monkeypatch, capsys):
    import signal

    from rgsd_agents.cli import main

    monkeypatch.setattr("rgsd_agents.rl.loop.REPEAT_GRACE", 0.0)  # the second Ctrl-C comes at once here
    _signal_at(monkeypatch, 1, signal.SIGINT, signal.SIGINT)
    out = tmp_path / "run"
    assert (
        main(["train", "--config", _tiny_yaml(tmp_path, tiny_encoder, 50), "--out", str(out), "--no-progress"]) == 130
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "Traceback" not in "".join(err), err  # the first stop's line, then the abort's
    assert err[1] == (
        "aborted by a second Ctrl-C without writing a checkpoint; the run never reached its first checkpoint; start "
        f"it again with: rgsd train --config {out / 'config.yaml'} --out {out}"
    )
    assert not (out / "checkpoints" / "latest.pt").exists()


def test_resuming_a_run_that_reached_its_budget_says_so_and_writes_nothing(tmp_path, tiny_encoder, capsys):
    from rgsd_agents.cli import main

    out = tmp_path / "run"
    assert main(["train", "--config", _tiny_yaml(tmp_path, tiny_encoder), "--out", str(out), "--no-progress"]) == 0

    def files_written() -> dict:  # but the lock each command takes on the folder
        return {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != ".lock"}

    files = files_written()
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--no-progress"]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and "already reached its budget (iterations=2;" in said[0]
    assert said[0].endswith(f"rgsd train --resume {out} --set iterations=N")
    assert files_written() == files  # no TensorBoard file, no config rewritten
    more = ["--set", "iterations=100", "--set", "max_minutes=1e-6"]  # the 2 iterations took longer than that
    assert main(["train", "--resume", str(out), *more, "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "already reached its budget (max_minutes=1e-06;" in said and "--set max_minutes=N" in said
    assert files_written() == files


def test_the_summary_of_a_resumed_session_compares_its_first_and_last_probe_when_it_had_two(tmp_path):
    from rgsd_agents.commands.train import summary

    def it(i: int, err: float | None = None) -> dict[str, float]:
        m = {"charts/iteration": float(i), "charts/SPS": 100.0}
        if err is not None:
            m.update(
                {"probe/cartesian_error_cm": err, "probe/frames_within_threshold": 0.5, "probe_clips/walk_cm": err}
            )
        return m

    text = summary(tmp_path, [it(5), it(6, 30.0), it(7), it(8, 20.0)])
    assert "iteration 6 -> iteration 8): Cartesian error 30.0 cm -> 20.0 cm" in text
    assert "per clip (cm): walk 30 -> 20" in text
    one = summary(tmp_path, [it(9), it(10, 25.0)])  # one probe this session: nothing to compare it with
    assert "probe" not in one and "2 iterations this session" in one
    fresh = summary(
        tmp_path, [it(1), it(2, 20.0)], {"probe/cartesian_error_cm": 40.0, "probe/frames_within_threshold": 0.1}
    )
    assert "untrained -> iteration 2): Cartesian error 40.0 cm -> 20.0 cm" in fresh


def test_the_help_names_every_registered_method_and_its_loop(monkeypatch):
    """The --config help and the description come from the registry and the preset folder: a new method joins."""
    from rgsd_agents.commands.train import methods_by_loop, preset_help
    from rgsd_agents.methods import METHODS
    from rgsd_agents.methods.metra import METRA

    assert preset_help().startswith(
        "a YAML file or a preset name (<method> or <method>_paper for rgsd, diayn, ase, calm, metra, fb_cpr"
    )
    assert preset_help().endswith("; cpu, demo, paper)")  # the presets of no method
    assert methods_by_loop().startswith("rgsd, diayn, ase, calm, metra")
    assert methods_by_loop().endswith("fb_cpr on the off-policy runner")
    monkeypatch.setitem(METHODS, "unlisted", METRA)
    assert "fb_cpr, unlisted; cpu, demo, paper)" in preset_help()
    assert "unlisted on the PPO runner; fb_cpr" in methods_by_loop()


def test_the_summary_names_no_method_for_the_method_s_own_reward(tmp_path):
    from rgsd_agents.commands.train import summary

    history = [{"charts/iteration": float(i), "charts/SPS": 100.0, "method/reward": 0.1 * i} for i in range(1, 21)]
    assert "the method's own reward / step: 0.25 -> 1.95" in summary(tmp_path, history)


def test_the_summary_has_no_empty_heading_when_no_metric_spans_both_windows(tmp_path):
    """Meta Motivo's first iterations act at random with no update: its early window has no loss, so the summary
    shows no early-against-late heading without rows; once both windows have the FB loss, it compares them."""
    from rgsd_agents.commands.train import summary

    random_phase = [{"charts/iteration": float(i), "charts/SPS": 100.0} for i in range(1, 21)]
    updating = [{**h, "method/fb_loss": 2.0 - h["charts/iteration"] / 40} for h in random_phase]
    assert "mean over" not in summary(tmp_path, random_phase[:18] + updating[18:])
    assert "FB loss (Meta Motivo): 1.94 -> 1.51" in summary(tmp_path, updating)


def test_diayn_ablation_uses_a_random_encoder_and_no_imitation(tmp_path):
    from rgsd_agents.pretraining.config import PretrainOptions

    cfg = tiny_config(None, iterations=1, method=MethodConfig("diayn", {"minibatch_size": 16}))
    cfg.pretrain = PretrainOptions(hidden=(16,))
    runner = Runner(cfg, tmp_path / "run", progress=False)
    history = runner.learn()
    runner.close()
    assert (tmp_path / "run" / "encoder.pt").exists() and not (tmp_path / "run" / "pretrain").exists()
    assert history[0]["rollout/imitation_share"] == 0.0
    assert "rollout/imitation_reward" not in history[0] and "method/kl_to_frozen" not in history[0]
    assert "method/skill_cos" in history[0]  # the discovery encoder trains
    assert RunDir(tmp_path / "run").method()["latent_choice"] == "best_of_n"


def test_demo_command_pretrains_then_trains_into_the_run_folder(tmp_path):
    from rgsd_agents.commands import demo

    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    out = tmp_path / "demo"
    tiny = [
        "num_envs=4",
        "horizon=8",
        "iterations=2",
        "pretrain.steps=3",
        "pretrain.hidden=[16]",
        "probe_every=1",
        "networks.actor_hidden=[16]",
        "networks.critic_hidden=[16]",
        "ppo.minibatch_size=16",
        "method.options.minibatch_size=16",
    ]
    argv = ["demo", "--out", str(out), "--no-eval", "--no-progress"] + [a for kv in tiny for a in ("--set", kv)]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    assert (out / "pretrain" / "encoder.pt").exists() and (out / "encoder.pt").exists()
    RunDir(out).check(RunDir.CONFIG, RunDir.POLICY, RunDir.DISCOVERY_ENCODER)
    assert RunDir(out).config()["max_minutes"] == demo.DEFAULT_MINUTES
    assert args.func(args) == 2  # a finished demo (trained, no evaluation asked for): nothing to continue


TINY_DEMO = [
    "num_envs=4", "horizon=8", "iterations=3", "pretrain.steps=3", "pretrain.hidden=[16]", "probe_every=1",
    "networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=16",
    "method.options.minibatch_size=16",
]  # fmt: skip
"""``rgsd demo --set`` values for a demo of a few seconds."""


def _demo_args(out, *more: str) -> argparse.Namespace:
    """``rgsd demo --out out --no-progress`` with ``TINY_DEMO`` and ``more``, parsed."""
    from rgsd_agents.commands import demo

    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    sets = [a for kv in TINY_DEMO for a in ("--set", kv)]
    return parser.parse_args(["demo", "--out", str(out), "--no-progress", *sets, *more])


def test_an_interrupted_demo_continues_with_the_same_command_then_evaluates(tmp_path, monkeypatch, capsys):
    import signal

    from rgsd_agents import cli
    from rgsd_agents.commands import demo

    out = tmp_path / "demo"
    evals = []

    def fake_eval(argv):
        evals.append(argv)
        if len(evals) == 1:  # the first evaluation is stopped, as rgsd eval stops: one line, 130
            print("interrupted", file=sys.stderr)
            return 130
        _fake_eval_metrics(out / "report")
        return 0

    monkeypatch.setattr(demo, "eval_available", lambda: True)
    monkeypatch.setattr(cli, "main", fake_eval)
    iterate = Runner.iterate
    _signal_at(monkeypatch, 1, signal.SIGTERM)
    args = _demo_args(out)
    assert args.func(args) == 130
    err = capsys.readouterr().err
    latest = out / "checkpoints" / "latest.pt"
    assert f"stopped by SIGTERM after iteration 1: checkpoint {latest}; continue with: rgsd demo --out {out}" in err
    assert not evals and not (out / "report").exists()  # a run cut short is not evaluated

    monkeypatch.setattr(Runner, "iterate", iterate)
    assert args.func(_demo_args(out)) == 130
    captured = capsys.readouterr()
    assert f"[2/3] continuing the training in {out} from iteration 1 " in captured.out
    assert load_policy(out / "policy.pt").meta["iteration"] == 3  # trained on to the budget, not started anew
    assert captured.err.splitlines() == [
        "interrupted",
        f"the evaluation was stopped; rgsd demo --out {out} evaluates the trained run",
    ]

    assert args.func(_demo_args(out)) == 0
    printed = capsys.readouterr().out
    assert f"[2/3] the training in {out} is finished (iterations=3): on to the evaluation" in printed
    report = str(out / "report")
    eval_argv = ["eval", "--run", str(out), "--motions", "demo", "--out", report, "--device", "auto", "--no-progress"]
    assert evals == [eval_argv, eval_argv]
    assert "demo_walk        ERR 38.8 cm" in printed  # the demo's closing summary, from the evaluation

    assert args.func(_demo_args(out)) == 2  # a finished demo: refused, its report named
    assert (
        f"holds a finished demo (iterations=3; its report: {out / 'report' / 'report.md'})" in capsys.readouterr().err
    )
    assert len(evals) == 2


def test_a_second_demo_into_the_folder_of_a_new_one_that_runs_is_refused(tmp_path, monkeypatch, capsys):
    """A new demo holds its folder from before its pretraining: a second ``rgsd demo --out`` it stops at the lock."""
    import os

    from rgsd_agents import cli
    from rgsd_agents.training import runner as runner_module

    out = tmp_path / "demo"
    trainings: list = []
    second: list = []

    class Started(Exception):
        pass

    def running_demo(cfg, path, progress=True):
        """The first demo's training: it starts the second demo, which must not get this far."""
        trainings.append(path)
        assert len(trainings) == 1, "a second demo started training in the folder of one that runs"
        second.append(cli.main(["demo", "--out", str(out), "--no-eval", "--no-progress"]))
        second.append(capsys.readouterr().err)
        raise Started

    monkeypatch.setattr(runner_module, "Runner", running_demo)
    args = _demo_args(out, "--no-eval")
    with pytest.raises(Started):
        args.func(args)
    code, err = second
    assert code == 2
    assert err.strip() == (
        f"error: {out}: in use by pid {os.getpid()} (rgsd demo); wait for it to end or stop it, then run again"
    )
    assert not out.exists()  # the first demo failed with nothing but its lock written: its new folder is gone


def test_a_demo_into_a_run_on_other_clips_is_refused_with_the_command_that_continues_it(tmp_path, capsys):
    out = tmp_path / "cpu_run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "latest.pt").write_bytes(b"")
    (out / RunDir.CONFIG).write_text(yaml.safe_dump({"method": {"name": "rgsd"}, "env": {"motions": "motions/real"}}))
    args = _demo_args(out)
    assert args.func(args) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {out} holds a run on other clips than the demo's (env.motions: motions/real); continue it with "
        f"rgsd train --resume {out} or choose another --out"
    )


def test_demo_summary_gives_an_in_place_clip_s_drift_not_a_share_of_no_travel(tmp_path):
    from rgsd_agents.commands.demo import eval_summary

    _fake_eval_metrics(
        tmp_path / "report", punch={"err_cm": 20.0, "fall_rate": 0.0, "travel_m": 1.04, "ref_travel_m": 0.0}
    )
    lines = eval_summary(tmp_path / "report" / "metrics.json").splitlines()
    punch = next(x for x in lines if "demo_punch" in x)
    assert punch.endswith("ERR 20.0 cm, falls 0%, pelvis drifts 1.04 m (the reference stays in place)")
    assert any(x.endswith("pelvis travels 3.26 of 3.15 m") for x in lines if "demo_walk" in x)


def _fake_eval_metrics(report, **more_clips: dict) -> None:
    """A metrics.json as rgsd eval writes it (two clips and ``more_clips``, named demo_<key>; only the fields the demo
    summary reads)."""
    clip = {"err_cm": 38.8, "fall_rate": 0.0, "travel_m": 3.26, "ref_travel_m": 3.15}
    doc = {
        "runs": {
            "demo": {
                "imitation": {
                    "all": {"err_cm": 58.6, "fall_rate": 0.5},
                    "clips": {
                        "demo_walk": clip,
                        "demo_backward": {**clip, "err_cm": 78.5, "fall_rate": 1.0},
                        **{f"demo_{name}": c for name, c in more_clips.items()},
                    },
                }
            }
        }
    }
    report.mkdir(parents=True)
    (report / "metrics.json").write_text(json.dumps(doc))


def test_demo_closing_summary_quotes_rgsd_eval_before_the_labelled_probe(tmp_path, monkeypatch, capsys):
    from rgsd_agents import cli
    from rgsd_agents.commands import demo

    calls = []

    def fake_main(argv):
        calls.append(argv)
        _fake_eval_metrics(tmp_path / "demo" / "report")
        return 0

    monkeypatch.setattr(demo, "eval_available", lambda: True)
    monkeypatch.setattr(cli, "main", fake_main)
    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    tiny = ["num_envs=4", "horizon=8", "iterations=1", "pretrain.steps=3", "pretrain.hidden=[16]", "probe_every=1"]
    tiny += ["networks.actor_hidden=[16]", "networks.critic_hidden=[16]", "ppo.minibatch_size=16"]
    argv = ["demo", "--out", str(tmp_path / "demo"), "--no-progress"] + [a for kv in tiny for a in ("--set", kv)]
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    assert calls and calls[0][0] == "eval"
    out = capsys.readouterr().out
    closing = out[out.index("rgsd eval (") :]
    assert "demo_walk        ERR 38.8 cm, falls 0%, pelvis travels 3.26 of 3.15 m" in closing
    assert "demo_backward    ERR 78.5 cm, falls 100%" in closing
    assert closing.index("demo_backward") < closing.index("training probe (") < closing.index("results:")
    assert "probe (fixed starts of every clip" in closing[closing.index("training probe (") :]


def test_one_stop_delivered_twice_at_once_still_saves_and_stops(tmp_path, tiny_encoder, monkeypatch, capsys):
    """SLURM signals every process of a job and torchrun passes the signal on: a rank gets one stop twice within
    milliseconds, which is one stop, not an abort."""
    import signal

    from rgsd_agents.cli import main

    _signal_at(monkeypatch, 1, signal.SIGTERM, signal.SIGTERM)
    out = tmp_path / "run"
    assert (
        main(["train", "--config", _tiny_yaml(tmp_path, tiny_encoder, 50), "--out", str(out), "--no-progress"]) == 130
    )
    assert "stopped by SIGTERM after iteration 1" in capsys.readouterr().err
    assert torch.load(out / "checkpoints" / "latest.pt", weights_only=True)["iteration"] == 1


def test_a_fresh_run_of_zero_iterations_writes_the_untrained_policy(tmp_path, tiny_encoder, capsys):
    """``--set iterations=0`` is how the untrained baseline of an evaluation is made: its policy is written."""
    from rgsd_agents.cli import main

    out = tmp_path / "untrained"
    config = _tiny_yaml(tmp_path, tiny_encoder, 0)
    assert main(["train", "--config", config, "--out", str(out), "--no-progress"]) == 0
    assert load_policy(out / "policy.pt").meta["iteration"] == 0
    assert (out / "checkpoints" / "latest.pt").is_file()
    assert "already reached its budget" not in capsys.readouterr().out
