"""Training configuration: dataclasses that load from YAML (``rgsd train --config``).

The defaults are the values of the paper's table "Hyperparameters" (its appendix) and, where the paper
states none, ours: 4096 worlds and 20,000 iterations (docs/training.md, Presets); the presets in
``rgsd_agents/presets`` override what differs.
A config names its skill method (``method.name``: ``rgsd_agents.methods``) and
the method's own options; the method decides the rest of its set-up (its
encoder, whether imitation episodes are trained). The resolved config is saved as
``<run>/config.yaml``; its ``env:`` section is an ``rgsd_envs`` ``EnvConfig``.
"""

from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rgsd_agents.pretraining.config import PretrainConfig, PretrainOptions
from rgsd_agents.rl.networks import NetworkConfig
from rgsd_agents.rl.precision import check_bf16_setting
from rgsd_envs.envs.config import DEVIATION_KEYS, MOTIONS_HINT, EnvConfig, missing_motion
from rgsd_envs.utils.config import (
    UNNAMED,
    check_overrides,
    from_dict_with_overrides,
    not_a_config_file,
    parse_set,  # noqa: F401  (rgsd_agents.config.parse_set, as before)
    read_settings,
    to_dict,
)
from rgsd_envs.utils.config import scientific_numbers as _numbers
from rgsd_envs.utils.device import check_device_name
from rgsd_envs.utils.files import InputFileError

CURRICULUM_KEYS = tuple(f"env.deviation.{k}" for k in DEVIATION_KEYS)
"""Config keys a training curriculum (``TrainConfig.curriculum``, or ``--resume --set``) may change mid-run: the
deviation rule of imitation episodes."""


@dataclass
class PPOConfig:
    """The PPO update rule (clipped surrogate, value regression on standardised returns, GAE;
    ``rgsd_agents.rl.ppo``)."""

    actor_lr: float = 2e-5
    """Adam learning rate of the actor (the RGSD paper's skill policy: 2e-5)."""
    critic_lr: float = 1e-4
    """Adam learning rate of the critic (the RGSD paper's skill policy: 1e-4)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip: float = 0.2
    """Clip range of the probability ratio."""
    epochs: int = 5
    """Passes over each rollout."""
    minibatch_size: int = 32768
    """Samples per gradient step; the rollout (num_envs x horizon) is split into batch // minibatch_size parts."""
    entropy_coef: float = 0.1
    """Weight of the entropy bonus (no effect with a fixed std: ``networks.learn_std: false``)."""
    critic_coef: float = 0.5
    """Weight of the value loss, the mean squared error of the standardised value (0.5: the usual halved square;
    ASE's and CALM's code: critic_coef 5)."""
    bound: float = 1.1
    """Action means beyond +-bound pay the bounds loss, 10 x their squared excess (ASE's and CALM's code: 1.0; the
    env clips actions to [-1, 1], so a mean outside gets no policy gradient back)."""
    max_grad_norm: float | None = 1.0
    """Gradient-norm clip, applied to the actor and the critic separately; None: no clipping (ASE's and CALM's
    code: truncate_grads False)."""
    bf16: bool | str = False
    """Run the hidden layers of actor and critic under bf16 autocast in the update (output layers, losses and
    Adam in float32); its speed-up is not measured in the committed results (``benchmarks/update_cost.py`` times
    the update both ways). "auto": on for a CPU learner whose CPU has native bf16
    (``rgsd_agents.rl.precision.resolve_bf16``), off elsewhere."""

    def __post_init__(self) -> None:
        check_bf16_setting(self.bf16)
        positive = {
            "actor_lr": self.actor_lr,
            "critic_lr": self.critic_lr,
            "clip": self.clip,
            "epochs": self.epochs,
            "minibatch_size": self.minibatch_size,
            "bound": self.bound,
            **({} if self.max_grad_norm is None else {"max_grad_norm": self.max_grad_norm}),
        }
        bad = [k for k, v in positive.items() if not v > 0]
        if bad:
            raise ValueError(f"ppo.{bad[0]} must be > 0, got {positive[bad[0]]!r}")
        if self.critic_coef < 0:
            raise ValueError(f"ppo.critic_coef must be >= 0, got {self.critic_coef}")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.gae_lambda <= 1.0):
            raise ValueError(f"ppo.gamma and ppo.gae_lambda must be in [0, 1], got {self.gamma}, {self.gae_lambda}")


@dataclass
class MethodConfig:
    """The skill-discovery method that trains the policy (``rgsd_agents.methods``)."""

    name: str = "rgsd"
    """"rgsd", "diayn", "ase", "calm", "metra" or "fb_cpr" (``rgsd_agents.methods.METHODS``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The method's own settings (its ``CONFIG`` dataclass: RGSD's and DIAYN's discovery encoder
    ``rgsd_agents.methods.discovery.DiscoveryConfig``, ``rgsd_agents.methods.ase.ASEConfig``, ...); the run's
    config.yaml holds them all, defaults filled in."""


WORLD_SEED_STRIDE = 2**32
"""How far apart two training seeds' env seeds lie: world seeds never reach it within one seed (ranks x num_envs
worlds), so training seeds s and s + 1 share no world's stream (with Gymnasium's seed + i they would share all
but one)."""


def training_world_seed(seed: int, rank: int, num_envs: int) -> int:
    """The env reset seed of a training rank's worlds (world i gets this + i): ranks share no world, nor seeds."""
    return seed * WORLD_SEED_STRIDE + rank * num_envs


@dataclass
class TrainConfig:
    """One training run: environment, encoder, networks, PPO, the skill method and the loop."""

    seed: int = 0
    """Seeds the networks, the action noise, the minibatches, the env worlds and the pretraining (an int in [0,
    2**32)). World i of rank r draws the episodes (clip, start frame, task, skill) of env seed
    ``seed * 2**32 + r * num_envs + i`` (``training_world_seed``): two training seeds share no world's episode
    draws, and seed 0's worlds are Gymnasium's 0, 1, 2, ..."""
    device: str = "auto"
    """Torch device of the learner (networks, PPO, storage, discovery encoder, pretraining): "auto" (cuda when
    available), "cpu", "cuda" or "cuda:N". The mujoco simulator stays on the CPU (observations and actions cross
    through pinned buffers); env-side tensors follow ``env.device``."""
    num_envs: int = 4096
    """Parallel worlds."""
    horizon: int = 32
    """Steps per world per iteration (rollout = num_envs x horizon samples)."""
    iterations: int = 20000
    """Rollout-and-update iterations."""
    max_minutes: float | None = None
    """Stop once the training iterations have taken this long, summed over resumed sessions (minutes, > 0; None: run
    all iterations). It counts the iterations' own time only: probes, checkpoints and the start report come on top,
    so the command takes longer; the progress bar's time left is wall-clock time."""
    checkpoint_every: int = 100
    """Iterations between checkpoints (also written at the end and when Ctrl-C, SIGTERM or SIGHUP stops the run)."""
    keep_checkpoints: int = 5
    """Newest ``iter_XXXXXX.pt`` files kept (``latest.pt`` is always kept)."""
    log_every: int = 1
    """Iterations between TensorBoard writes."""
    probe_every: int = 50
    """Iterations between imitation probes (deterministic rollouts from fixed starts of up to 32 clips, at most 300
    frames each, ``probe/`` in TensorBoard, also before the first iteration) and the discovery encoder's reference
    alignment; 0: never."""
    torch_threads: int | None = None
    """torch intra-op threads of the updates (None: one per core)."""
    rollout_threads: int | None = 1
    """torch intra-op threads while collecting a rollout (None: as the updates). Small per-step batches
    run faster on one thread, and the env's own torch work then skips its thread switching."""
    encoder: str | None = None
    """Frozen pretrained encoder file of a method that imitates (RGSD); None: pretrain one on env.motions
    (``pretrain:``) into <run>/pretrain."""
    reward_kappa: float | None = None
    """kappa of r = C + kappa mu(s')^T z (> 0; None: the encoder's)."""
    reward_constant: float | None = None
    """C of the reward (a finite number; None: kappa, so rewards lie in [0, 2 kappa])."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """The environment (``rgsd_envs.envs.config.EnvConfig``)."""
    pretrain: PretrainOptions = field(default_factory=PretrainOptions)
    """Encoder pretraining when ``encoder`` is None (the random encoder of the other methods takes its ``hidden``
    sizes); it runs on env.motions with the run's seed and device."""
    networks: NetworkConfig = field(default_factory=NetworkConfig)
    """Actor and critic."""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """The PPO update."""
    method: MethodConfig = field(default_factory=MethodConfig)
    """The skill method and its options."""
    curriculum: list[dict[str, Any]] = field(default_factory=list)
    """Steps that change the deviation rule mid-run, in order: ``{at_samples: N, set: {env.deviation.KEY: VALUE,
    ...}}`` applies once the run has trained N samples (``CURRICULUM_KEYS``; each change is logged and recorded in
    the run's ``config_changes.yaml``; ``env`` holds the values before the first step)."""

    def __post_init__(self) -> None:
        if not 0 <= self.seed < WORLD_SEED_STRIDE:
            raise ValueError(f"seed must be an int in [0, 2**32), got {self.seed}")
        for name in ("num_envs", "horizon", "checkpoint_every", "keep_checkpoints", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rollout_threads is not None and self.rollout_threads < 1:
            raise ValueError(f"rollout_threads must be >= 1 or null, got {self.rollout_threads}")
        if self.reward_kappa is not None and not (math.isfinite(self.reward_kappa) and self.reward_kappa > 0):
            raise ValueError(f"reward_kappa must be a finite number > 0 or null, got {self.reward_kappa}")
        if self.reward_constant is not None and not math.isfinite(self.reward_constant):
            raise ValueError(f"reward_constant must be a finite number or null, got {self.reward_constant}")
        if type(self.pretrain) is not PretrainOptions:  # a PretrainConfig's clips, seed and device are the run's
            raise ValueError("pretrain must be a PretrainOptions (the run's env.motions, seed and device apply)")
        check_max_minutes(self.max_minutes)
        check_device_name(self.device)
        missing = missing_motion(self.env.motions)  # before any pretraining or run folder
        if missing is not None:
            raise InputFileError(UNNAMED, f"no such motion file or folder: {missing}; {MOTIONS_HINT}", "env.motions")
        if self.iterations < 0 or self.probe_every < 0:
            raise ValueError(f"iterations and probe_every must be >= 0, got {self.iterations}, {self.probe_every}")
        from rgsd_agents.methods import method_class, method_config

        method_config(self.method.name, self.method.options)  # a bad name or option ends here, naming the key
        if self.encoder is not None and method_class(self.method.name).ENCODER != "pretrained":
            raise ValueError(f"method {self.method.name!r} starts from a random encoder: leave encoder unset")

        check_curriculum(self)

    def curriculum_changes(self, index: int) -> dict[str, Any]:
        """The deviation-rule changes of curriculum step ``index`` (``DeviationConfig`` field names)."""
        return {k.removeprefix("env.deviation."): v for k, v in self.curriculum[index]["set"].items()}

    def pretrain_config(self) -> PretrainConfig:
        """The run's encoder pretraining: ``pretrain:`` on ``env.motions`` with the run's seed and device."""
        return PretrainConfig.of_run(self.pretrain, self.env.motions, self.seed, self.device, self.env.skill_dim)

    @property
    def batch_size(self) -> int:
        """Samples per iteration."""
        return self.num_envs * self.horizon


def check_max_minutes(value: float | None, name: str = "max_minutes") -> None:
    """A time budget is positive or None (no budget): 0 or less would end a run before its first iteration, with
    an untrained policy."""
    if value is not None and not value > 0:
        raise ValueError(f"{name} must be > 0 or null (no budget), got {value:g}")


def check_curriculum(cfg: TrainConfig) -> None:
    """A clear error for a malformed ``curriculum``: a step that is not ``{at_samples, set}``, steps out of
    order, a key outside ``CURRICULUM_KEYS``, a value of the wrong type or an env config it would make invalid."""
    import dataclasses

    from rgsd_envs.utils.config import OverrideError, check_override

    deviation, last = cfg.env.deviation, 0.0
    for i, step in enumerate(cfg.curriculum):
        where = f"curriculum[{i}]"
        if not isinstance(step, dict) or set(step) != {"at_samples", "set"}:
            raise ValueError(f"{where} must be a mapping with at_samples and set, got {step!r}")
        at, changes = step["at_samples"], step["set"]
        if isinstance(at, bool) or not isinstance(at, (int, float)) or at < last:
            raise ValueError(f"{where}.at_samples must be a number >= the previous step's ({last:g}), got {at!r}")
        if not isinstance(changes, dict) or not changes:
            raise ValueError(f"{where}.set must be a non-empty mapping of {', '.join(CURRICULUM_KEYS)}")
        bad = sorted(set(changes) - set(CURRICULUM_KEYS))
        if bad:
            raise ValueError(f"{where}.set may change {', '.join(CURRICULUM_KEYS)} only, not {bad[0]}")
        step["at_samples"], last = float(at), float(at)
        try:
            step["set"] = {k: check_override(TrainConfig, k, v) for k, v in changes.items()}
        except OverrideError as err:
            raise ValueError(f"{where}.set.{err.key}: {err.reason}") from None
        try:
            deviation = dataclasses.replace(deviation, **cfg.curriculum_changes(i))
        except ValueError as err:
            raise ValueError(f"{where}.set: {err}") from None


def preset_names(folder: str = "") -> list[str]:
    """Names of the built-in presets (``rgsd_agents/presets/<folder>/*.yaml``; folder "downstream" for those)."""
    files = resources.files("rgsd_agents") / "presets" / folder
    return sorted(p.name[: -len(".yaml")] for p in files.iterdir() if p.name.endswith(".yaml"))


def preset_path(name: str, folder: str = "") -> Path:
    """Path of a built-in preset, or a clear error listing them."""
    path = Path(str(resources.files("rgsd_agents") / "presets" / folder / f"{name}.yaml"))
    if not path.is_file():
        raise InputFileError(name, f"no such config file or preset; presets: {', '.join(preset_names(folder))}")
    return path


def _names_a_file(spec: str | os.PathLike) -> bool:
    """Whether a config spec that is no file names one (a suffix or a folder) rather than a built-in preset."""
    return bool(Path(spec).suffix) or os.sep in str(spec)


def config_missing(spec: str | os.PathLike, presets: str = "") -> str | None:
    """Why ``spec`` opens no config (None: it names a config file or a built-in preset, as ``config_chain`` reads
    it), worded for an error that names the config."""
    if Path(spec).is_file():
        return None
    if _names_a_file(spec):
        return f"no config file {str(spec)!r}"
    try:
        preset_path(str(spec), presets)
    except InputFileError:
        return f"no preset {str(spec)!r} (add rgsd_agents/presets/{presets + '/' if presets else ''}{spec}.yaml)"
    return None


def read_config_data(spec: str | os.PathLike, presets: str = "") -> tuple[dict, Path]:
    """The mapping of a YAML config file or preset, with its ``base:`` (a preset name or a file beside it) merged
    underneath: the file's keys win, mappings merge key by key, and a ``method`` naming another method than the
    base's replaces the base's whole ``method`` section (its options belong to the other method)."""
    return _merged(config_chain(spec, presets))


def _merged(chain: list[tuple[Path, dict]]) -> tuple[dict, Path]:
    """A config chain's keys merged (``read_config_data``) and its top file."""
    data: dict = {}
    for _, own in chain:
        data = merge_config(data, copy.deepcopy(own))
    return data, chain[-1][0]


def config_chain(spec: str | os.PathLike, presets: str = "", _seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict]]:
    """The files of a config, its bases first and ``spec``'s last, each with the keys it sets itself."""
    path = Path(spec)
    if not path.is_file():
        if path.is_dir():
            raise InputFileError(path, not_a_config_file(path))
        if _names_a_file(spec):
            raise InputFileError(path, f"config file not found (or give a preset: {', '.join(preset_names(presets))})")
        path = preset_path(str(spec), presets)
    if path.resolve() in _seen:
        raise InputFileError(path, "base: the config names itself as its base, directly or through another file")
    data = _numbers(read_settings(path, f"start from a preset with a line such as `base: {_example_preset(presets)}`"))
    base = data.pop("base", None)
    if base is None:
        return [(path, data)]
    if not isinstance(base, str):
        raise InputFileError(path, f"expected a preset name or a YAML file, got {base!r}", "base")
    return [*config_chain(_base_file(path, base, presets), presets, (*_seen, path.resolve())), (path, data)]


def _example_preset(presets: str = "") -> str:
    """The preset an error suggests starting from: "cpu" (the 2-core one) where the folder has it, else its first."""
    names = preset_names(presets)
    return next((n for n in ("cpu", "default") if n in names), names[0])


def _base_file(path: Path, base: str, presets: str) -> str | Path:
    """The file or preset a config's ``base:`` names (a file beside the config first), or an error naming the
    config and its ``base`` field."""
    beside = path.parent / base
    if beside.is_file():
        return beside
    names = preset_names(presets)
    if Path(base).is_file() or (base in names and not Path(base).suffix and os.sep not in base):
        return base
    raise InputFileError(
        path, f"{base!r} is neither a file beside it ({beside}) nor a preset ({', '.join(names)})", "base"
    )


def _blame(chain: list[tuple[Path, dict]], err: InputFileError) -> InputFileError:
    """``err`` about the merged config, naming the file of the chain that set its field (the last to set it)."""
    if err.field is None or err.path != str(chain[-1][0]):
        return err
    parts = err.field.split(".")
    for path, own in reversed(chain):
        node: Any = own
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return InputFileError(path, err.reason, err.field)
    return err


def merge_config(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base`` (see ``read_config_data``)."""
    out = dict(base)
    for key, value in top.items():
        old = out.get(key)
        other_method = key == "method" and isinstance(old, dict) and isinstance(value, dict)
        if other_method and value.get("name", old.get("name")) != old.get("name"):
            out[key] = value
        elif isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_config(old, value)
        else:
            out[key] = value
    return out


def load_config(
    spec: str | os.PathLike, overrides: dict[str, Any] | None = None, cls: type | None = None, presets: str = ""
) -> Any:
    """A config (``cls``, default TrainConfig) from a YAML file or a preset name (in ``presets/<presets>``; a file's
    ``base:`` merged underneath it), with dotted-key overrides (``--set``: converted to each field's type, or
    refused in one line naming it)."""
    chain = config_chain(spec, presets)
    data, path = _merged(chain)
    cls = cls or TrainConfig
    # checked before the file: a bad --set is named as such, not blamed on the preset
    checked = check_overrides(cls, {k: _numbers(v) for k, v in (overrides or {}).items()})
    try:
        return from_dict_with_overrides(cls, data, str(path), checked, overrides)
    except InputFileError as err:  # a field a base file set is that file's error
        raise _blame(chain, err) from None


def resolve(cfg: TrainConfig, base_dir: str | os.PathLike = ".") -> TrainConfig:
    """Make the config self-contained: absolute motion/encoder paths, the method's options with their defaults,
    and ``env.p_imitation`` 0 for a method without imitation episodes."""
    base = Path(base_dir)

    def absolute(p: str) -> str:
        return p if p == "demo" else str((base / p).resolve())

    motions = cfg.env.motions
    cfg.env.motions = absolute(motions) if isinstance(motions, str) else [absolute(m) for m in motions]
    if cfg.encoder is not None:
        cfg.encoder = absolute(cfg.encoder)
    from rgsd_agents.methods import method_class, method_config

    cfg.method.options = to_dict(method_config(cfg.method.name, cfg.method.options))
    if not method_class(cfg.method.name).IMITATION:
        cfg.env.p_imitation = 0.0
    return cfg
