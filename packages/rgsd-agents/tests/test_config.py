"""Training configs: presets, YAML loading, --set overrides, resolution."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import typing
from pathlib import Path

import pytest

from rgsd_agents.config import TrainConfig, load_config, parse_set, preset_names, resolve
from rgsd_agents.downstream.runner import DownstreamConfig
from rgsd_envs.utils.config import from_dict, save_yaml, to_dict
from rgsd_envs.utils.files import InputFileError


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def test_the_four_presets_exist_and_load():
    assert set(preset_names()) >= {"paper", "cpu", "demo", "diayn"}
    for name in preset_names():
        assert isinstance(load_config(name), TrainConfig)


def test_paper_preset_has_the_papers_hyperparameters():
    cfg = load_config("paper")
    assert (cfg.num_envs, cfg.horizon) == (4096, 32)
    assert cfg.networks.actor_hidden == cfg.networks.critic_hidden == (1024, 1024, 1024, 512)
    assert cfg.networks.activation == "tanh"
    p = cfg.ppo
    assert (p.actor_lr, p.critic_lr, p.minibatch_size, p.epochs) == (2e-5, 1e-4, 32768, 5)
    assert (p.clip, p.gae_lambda, p.gamma, p.entropy_coef) == (0.2, 0.95, 0.99, 0.1)
    assert cfg.method.name == "rgsd" and cfg.env.p_imitation == 0.7
    assert (cfg.method.options["lr"], cfg.method.options["alpha"]) == (1e-4, 0.5)
    assert cfg.pretrain.hidden == (1024, 1024, 1024, 512) and cfg.pretrain.lr == 1e-4 and cfg.pretrain.batch_size == 256
    assert cfg.encoder is None


def test_diayn_differs_from_cpu_only_by_the_method_and_its_grounding():
    cpu, diayn = (_flat(to_dict(resolve(load_config(name)))) for name in ("cpu", "diayn"))
    diff = {k for k in cpu if cpu[k] != diayn[k]}
    assert diff == {"method.name", "env.p_imitation"}
    assert diayn["method.name"] == "diayn" and diayn["env.p_imitation"] == 0.0


ALL_METHODS = ("rgsd", "diayn", "ase", "calm", "metra")


@pytest.mark.parametrize("name", ALL_METHODS)
def test_every_method_has_a_cpu_and_a_paper_preset_that_name_it(name):
    cpu, paper = load_config(name), load_config(f"{name}_paper")
    assert cpu.method.name == paper.method.name == name
    assert (cpu.num_envs, cpu.networks.actor_hidden, cpu.max_minutes) == (128, (256, 256), 150)
    assert (paper.num_envs, paper.horizon) == (4096, 32)
    if name in ("ase", "calm"):  # their own code's PPO and policy (tests/methods/test_adversarial_code.py)
        assert paper.networks.actor_hidden == paper.networks.critic_hidden == (1024, 1024, 512)
    else:
        assert paper.ppo.minibatch_size == 32768
        assert paper.networks.actor_hidden == paper.networks.critic_hidden == (1024, 1024, 1024, 512)


def test_meta_motivo_has_a_cpu_and_a_paper_preset_for_the_off_policy_loop():
    from rgsd_agents.training.trainers import trainer_class

    cpu, paper = (resolve(load_config(name)) for name in ("fb_cpr", "fb_cpr_paper"))
    assert cpu.method.name == paper.method.name == "fb_cpr" and trainer_class("fb_cpr").__name__ == "OffPolicyRunner"
    assert cpu.env.p_imitation == paper.env.p_imitation == 0.0
    assert (cpu.num_envs, cpu.max_minutes, paper.num_envs) == (16, 150, 4096)
    # the paper's 0.1 gradient steps per transition at GPU scale, with its 1024-wide networks and 5 M replay
    loop = paper.method.options["loop"]
    assert loop["updates_per_iteration"] / (paper.num_envs * loop["steps_per_iteration"]) == pytest.approx(0.1, 0.03)
    assert (paper.method.options["f_hidden"], loop["replay_capacity"]) == (1024, 5_000_000)
    # its code's 256-D z (examples/fbcpr_train_humenv.py:440), carried by the env's skill slot; 16 on 2 cores
    assert paper.env.skill_dim == paper.method.options["z_dim"] == 256 and cpu.env.skill_dim == 16


def test_a_preset_on_a_base_merges_section_by_section_and_another_method_brings_its_own_options(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text("method: {name: rgsd, options: {update_every: 4}}\nnum_envs: 8\nppo: {epochs: 3, clip: 0.1}\n")
    same = tmp_path / "same.yaml"
    same.write_text("base: base.yaml\nmethod: {options: {lr: 3.0e-4}}\nppo: {epochs: 1}\n")
    cfg = load_config(same)
    assert (cfg.num_envs, cfg.ppo.epochs, cfg.ppo.clip) == (8, 1, 0.1)
    assert cfg.method.options == {"update_every": 4, "lr": 3e-4}
    other = tmp_path / "other.yaml"
    other.write_text("base: base.yaml\nmethod: {name: metra, options: {hidden: [16]}}\n")
    assert load_config(other).method.options == {"hidden": [16]}  # not RGSD's update_every


def test_config_missing_says_what_to_add_for_a_preset_and_which_file_is_absent(tmp_path, monkeypatch):
    from rgsd_agents.config import config_missing

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("base: cpu\n")
    assert config_missing("cpu") is None and config_missing("mine.yaml") is None
    assert (
        config_missing("unlisted_paper") == "no preset 'unlisted_paper' (add rgsd_agents/presets/unlisted_paper.yaml)"
    )
    assert (
        config_missing("unlisted", "reproduce")
        == "no preset 'unlisted' (add rgsd_agents/presets/reproduce/unlisted.yaml)"
    )
    assert config_missing("gone.yaml") == "no config file 'gone.yaml'"


def test_a_base_that_loops_is_a_clear_error(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(InputFileError, match="base"):
        load_config(tmp_path / "a.yaml")


def test_an_error_in_a_base_file_names_that_file_and_the_field(tmp_path):
    """A typo or a wrong type in a base is blamed on the base, not on the file that inherits from it; a key both
    set is the inheriting file's."""
    (tmp_path / "base.yaml").write_text("base: cpu\nppo: {epohcs: 3}\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\nmax_minutes: 1\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "base.yaml"), "ppo.epohcs")
    (tmp_path / "child.yaml").write_text("base: base.yaml\nppo: {epochs: 1, epohcs: 2}\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "child.yaml"), "ppo.epohcs")


def test_a_bad_method_option_names_its_file_and_field_in_one_line(tmp_path):
    (tmp_path / "base.yaml").write_text("base: ase\nmethod: {options: {betta: 0.3}}\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\nnum_envs: 8\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "base.yaml"), "method.options.betta")
    assert "<config>" not in str(err.value) and "valid keys: beta," in str(err.value)


def test_a_missing_base_is_named_by_the_file_that_names_it(tmp_path):
    (tmp_path / "child.yaml").write_text("base: nosuch.yaml\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "child.yaml"), "base")
    assert "'nosuch.yaml' is neither a file beside it" in str(err.value) and "cpu" in str(err.value)


def test_a_config_that_is_not_valid_yaml_is_one_line_with_its_line_and_column(tmp_path):
    (tmp_path / "bad.yaml").write_text("base: cpu\nenv: {motions: demo\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "bad.yaml")
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(tmp_path / "bad.yaml") + ": not valid YAML at line 3")
    assert "from line 2, column 6" in text


@pytest.mark.parametrize("text", ["", "# settings to come\n", "{}\n"], ids=["empty", "comments", "braces"])
def test_a_config_file_without_settings_is_refused_naming_the_file_and_a_preset_to_start_from(text, tmp_path):
    """Every default of TrainConfig is the paper's scale (4096 worlds): an empty file is no way to ask for it."""
    from rgsd_agents.pretraining.config import PretrainConfig
    from rgsd_agents.reproduce.scale import load_scale
    from rgsd_envs.utils.config import load_yaml

    empty = tmp_path / "empty.yaml"
    empty.write_text(text)
    hint = "holds no settings; start from a preset with a line such as"
    with pytest.raises(InputFileError, match=rf"^{empty}: {hint} `base: cpu`$"):
        load_config(empty)
    with pytest.raises(InputFileError, match=rf"^{empty}: {hint} `base: default`$"):
        load_config(empty, cls=DownstreamConfig, presets="downstream")
    with pytest.raises(InputFileError, match=rf"^{empty}: {hint} `base: cpu`$"):
        load_scale(str(empty))
    with pytest.raises(InputFileError, match=rf"^{empty}: holds no settings; give PretrainConfig fields, or no"):
        load_yaml(PretrainConfig, empty)
    (tmp_path / "child.yaml").write_text("base: empty.yaml\nnum_envs: 8\n")
    with pytest.raises(InputFileError, match=rf"^{empty}: holds no settings"):  # an empty base, too
        load_config(tmp_path / "child.yaml")
    (tmp_path / "base_only.yaml").write_text("base: demo\n")  # the preset as it is: a setting
    assert load_config(tmp_path / "base_only.yaml").num_envs == load_config("demo").num_envs


def test_motions_that_do_not_exist_are_named_by_the_file_that_sets_them_and_their_key(tmp_path):
    (tmp_path / "base.yaml").write_text(f"base: demo\nenv: {{motions: {tmp_path / 'gone'}}}\n")
    (tmp_path / "child.yaml").write_text("base: base.yaml\nnum_envs: 8\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "base.yaml"), "env.motions")
    assert err.value.reason == f"no such motion file or folder: {tmp_path / 'gone'}; give 'demo', clip files or " + (
        "folders of clips"
    )
    (tmp_path / "child.yaml").write_text("base: base.yaml\nenv: {motions: []}\n")
    with pytest.raises(InputFileError) as err:
        load_config(tmp_path / "child.yaml")
    assert (err.value.path, err.value.field) == (str(tmp_path / "child.yaml"), "env.motions")
    assert err.value.reason == "is empty ([]): give 'demo', clip files or folders of clips"


def test_cpu_preset_holds_the_measured_recipe():
    cfg = load_config("cpu")
    assert cfg.max_minutes == 150 and cfg.env.deviation.heading_deg == 15.0 and not cfg.env.deviation.adaptive
    assert (cfg.env.clip_sampling.mode, cfg.env.clip_sampling.failure_share) == ("failure_weighted", 0.7)
    assert (cfg.ppo.bf16, cfg.method.options["update_every"]) == ("auto", 4)
    assert cfg.curriculum == [
        {
            "at_samples": 18599936.0,  # iteration 4541 of the measured run
            "set": {"env.deviation.adaptive": True, "env.deviation.min": 0.2, "env.deviation.heading_deg": 10.0},
        }
    ]
    assert cfg.curriculum[0]["at_samples"] == 4541 * cfg.batch_size


def test_demo_preset_pretrains_and_has_a_time_budget():
    cfg = load_config("demo")
    assert cfg.encoder is None and cfg.max_minutes is not None and cfg.max_minutes <= 20
    assert cfg.probe_every > 0


def test_demo_preset_holds_the_measured_recipe():
    cfg = load_config("demo")
    assert (cfg.max_minutes, cfg.env.p_imitation, cfg.env.deviation.heading_deg) == (15, 0.85, 15.0)
    assert (cfg.env.deviation.metric, cfg.env.deviation.threshold, cfg.env.deviation.adaptive) == ("max", 0.5, False)
    assert (cfg.pretrain.negatives, cfg.pretrain.target_alignment, cfg.pretrain.steps) == ("hard", None, 1500)
    assert (cfg.ppo.actor_lr, cfg.ppo.epochs, cfg.ppo.bf16, cfg.method.options["update_every"]) == (6e-5, 2, "auto", 4)
    assert cfg.curriculum == [
        {
            "at_samples": 2457600.0,  # iteration 600 of the measured runs
            "set": {
                "env.deviation.metric": "mean",
                "env.deviation.adaptive": True,
                "env.deviation.min": 0.2,
                "env.deviation.heading_deg": 10.0,
            },
        }
    ]
    assert cfg.curriculum[0]["at_samples"] == 600 * cfg.batch_size


def test_set_overrides_parse_yaml_values_including_scientific_notation():
    ov = parse_set(["ppo.actor_lr=3e-4", "networks.actor_hidden=[64, 64]", "env.motions=demo", "max_minutes=null"])
    assert ov == {"ppo.actor_lr": 3e-4, "networks.actor_hidden": [64, 64], "env.motions": "demo", "max_minutes": None}
    cfg = load_config("cpu", ov)
    assert cfg.ppo.actor_lr == 3e-4 and cfg.networks.actor_hidden == (64, 64) and cfg.max_minutes is None
    with pytest.raises(ValueError, match="key=value"):
        parse_set(["ppo.actor_lr"])


def test_unknown_keys_and_bad_values_name_the_field(tmp_path):
    with pytest.raises(InputFileError, match=r"ppo\.learning_rate"):
        load_config("cpu", {"ppo.learning_rate": 1e-3})
    with pytest.raises(InputFileError, match="ppo"):
        load_config("cpu", {"ppo.epochs": 0})
    with pytest.raises(InputFileError, match="presets: "):
        load_config("no_such_preset")
    with pytest.raises(InputFileError, match="not found"):
        load_config(tmp_path / "missing.yaml")


def test_resolved_config_is_self_contained_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative motions are the working folder's: they must exist when the config loads
    (tmp_path / "clips").mkdir()
    cfg = resolve(load_config("cpu", {"env.motions": "clips", "seed": 7}), base_dir=tmp_path)
    assert Path(cfg.env.motions).is_absolute()
    pretrain = cfg.pretrain_config()  # the run's pretraining: its clips, seed and device
    assert (pretrain.motions, pretrain.seed, pretrain.device, pretrain.steps) == (cfg.env.motions, 7, cfg.device, 3000)
    save_yaml(cfg, tmp_path / "config.yaml")
    import yaml

    again = from_dict(TrainConfig, yaml.safe_load((tmp_path / "config.yaml").read_text()))
    assert to_dict(again) == to_dict(cfg)


MAX_OPTIONS = 65
"""Leaf options a training config may have: an option that measured no gain is deleted, not kept off by default
(60; three that set ASE's and CALM's PPO and policy as their code has them: ``networks.latent_branch``,
``ppo.critic_coef``, ``ppo.bound``; ``env.discovery_end_frame``, which lets discovery episodes outlast their
clip, as Meta Motivo's latent redraw needs; and ``env.skill_dim``, a wider skill space for hundreds of clips)."""


def _leaves(cls: type, prefix: str = "") -> dict[str, tuple[type, str]]:
    """Dotted key -> (the dataclass that declares it, field name) of every leaf option, nested dataclasses
    followed (a free-form mapping such as ``method.options`` is one leaf)."""
    out: dict[str, tuple[type, str]] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.update(_leaves(hints[f.name], f"{prefix}{f.name}."))
        else:
            owner = next(c for c in cls.__mro__ if f.name in inspect.get_annotations(c))
            out[prefix + f.name] = (owner, f.name)
    return out


def _field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the attribute docstring under it in ``cls``'s source."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    docs = {}
    for node, after in itertools.pairwise(body):
        is_doc = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_doc:
            docs[node.target.id] = after.value.value
    return docs


def test_the_training_config_has_a_bounded_number_of_options():
    leaves = _leaves(TrainConfig)
    assert "method.options" in leaves and "env.deviation.heading_deg" in leaves and "env.clip_sampling.mode" in leaves
    assert len(leaves) <= MAX_OPTIONS, f"{len(leaves)} options: {sorted(leaves)}"


def test_every_training_option_has_a_docstring():
    missing = [key for key, (owner, name) in _leaves(TrainConfig).items() if not _field_docstrings(owner).get(name)]
    assert not missing, f"options without a docstring (the configuration reference is built from them): {missing}"


def test_options_measured_without_gain_are_gone():
    """Deleted with their code (docs/results.md, "Tried and measured no gain"); a config naming one is refused."""
    leaves = _leaves(TrainConfig)
    for key in ("ppo.lr_schedule", "env.reward", "env.failure_rate_per", "pretrain.sim_twins", "pretrain.input_noise"):
        assert key not in leaves
        with pytest.raises(InputFileError, match=key.split(".")[-1]):
            load_config("cpu", {key: 1})
