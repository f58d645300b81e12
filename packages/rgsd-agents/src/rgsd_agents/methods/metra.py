"""METRA: Metric-Aware Abstraction (Park et al. 2024) on the shared PPO runner.

* Representation phi(s) in R^16 (the env's skill dimension) of the 358-D frame
  features (the policy's observation without the phase). Trained to maximise
  ``(phi(s') - phi(s))^T z`` subject to ``||phi(s) - phi(s')||^2 <= 1`` through
  a dual variable lambda = exp(log_lambda)::

      L_phi    = -mean[(phi(s') - phi(s))^T z + lambda.detach() * min(eps, 1 - ||phi(s') - phi(s)||^2)]
      L_lambda =  log_lambda * mean[min(eps, 1 - ||phi(s') - phi(s)||^2)].detach()

  (METRA's slack eps = 1e-3 and initial lambda = 30). Minimising L_lambda raises
  lambda while the constraint is violated and lowers it while it holds with slack.
  This is the paper's constraint on the Euclidean norm; METRA's code averages the
  squared difference over phi's dimensions instead (||delta||^2 / d <= 1), which
  allows steps sqrt(d) = 4 times longer here and scales the reward alike.
* Reward ``(phi(s') - phi(s))^T z`` with the current phi.
* Schedule: phi and lambda take ``phi_steps`` gradient steps per iteration,
  each on ``minibatch_size`` transitions drawn from the rollout (METRA's code:
  50-200 steps of 256 transitions per epoch; one step per iteration learns phi
  far more slowly than the policy moves).
* Skills: z uniform on the unit sphere (METRA's continuous skills are unit
  vectors), drawn by the env at each episode start and held for the episode.
* Policy learner: on-policy PPO (the shared runner), not the SAC of the METRA
  paper: the RGSD paper's authors ran their skill-discovery baselines with PPO
  on the same massively parallel worlds, and one learner for every method keeps
  the comparison about the objectives.
* The frame features are in the root's heading frame (``rgsd_envs.envs.observations``): global
  position and yaw are not in them, so phi can express travel only through
  velocities (METRA's locomotion results use x-y coordinates in the state).

Evaluation picks a clip's latent as the best of N sampled latents by Cartesian error.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rgsd_agents.methods.base import MethodContext, SkillMethod
from rgsd_agents.methods.common import MLPHead, transition_features
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import HUMANOID_LAYOUT, ObservationLayout

Tensor = torch.Tensor


@dataclass
class METRAConfig:
    """METRA's representation, dual variable and update (defaults: the METRA paper's values)."""

    hidden: tuple[int, ...] = (1024, 1024)
    """Hidden sizes of phi, a ReLU MLP from the 358-D frame features to the skill dimension (METRA: 1024,
    1024)."""
    lr: float = 1e-4
    """Adam learning rate of phi (METRA: 1e-4)."""
    dual_lr: float = 1e-4
    """Adam learning rate of log lambda, the dual variable (METRA: 1e-4)."""
    dual_lambda_init: float = 30.0
    """Initial lambda, the weight of the constraint ||phi(s') - phi(s)||^2 <= 1 in phi's loss (METRA: 30)."""
    dual_slack: float = 1e-3
    """eps of the constraint term min(eps, 1 - ||phi(s') - phi(s)||^2): slack beyond eps counts for nothing, so a
    satisfied constraint lowers lambda slowly and does not pay phi to shrink its steps (METRA: 1e-3)."""
    phi_steps: int = 50
    """Gradient steps of phi and lambda per iteration (METRA's code: 50-200)."""
    minibatch_size: int = 256
    """Transitions per step, drawn uniformly from the rollout (METRA's code: 256)."""
    max_grad_norm: float | None = None
    """Gradient-norm clip of phi's and of log lambda's steps, each on its own (None: no clipping); the policy's
    clip is ``ppo.max_grad_norm``."""

    def __post_init__(self) -> None:
        self.hidden = tuple(int(h) for h in self.hidden)
        if self.phi_steps < 1 or self.minibatch_size < 1:
            raise ValueError(f"phi_steps and minibatch_size must be >= 1, got {self.phi_steps}, {self.minibatch_size}")
        if self.dual_lambda_init <= 0:
            raise ValueError(f"method.options.dual_lambda_init must be > 0, got {self.dual_lambda_init}")


def state_pair(encoder_inputs: Tensor, layout: ObservationLayout = HUMANOID_LAYOUT) -> tuple[Tensor, Tensor]:
    """(s, s') frame features (B, 358) each from encoder inputs of s' (B, 1795) (another env: its ``layout``)."""
    x = transition_features(encoder_inputs, 2, layout)
    return x[..., : layout.feature_dim], x[..., layout.feature_dim :]


@torch.no_grad()
def metra_reward(phi: nn.Module, s: Tensor, s_next: Tensor, z: Tensor) -> Tensor:
    """(phi(s') - phi(s))^T z, (B,)."""
    return ((phi(s_next) - phi(s)) * z).sum(-1)


def constraint_slack(delta: Tensor, slack: float) -> Tensor:
    """min(eps, 1 - ||delta||^2) per sample: positive while ||phi(s') - phi(s)|| <= 1 holds."""
    return (1.0 - delta.square().sum(-1)).clamp(max=slack)


def metra_losses(
    phi: nn.Module, log_lambda: Tensor, s: Tensor, s_next: Tensor, z: Tensor, slack: float
) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
    """(phi's loss, the dual loss, statistics) of one minibatch (see the module docstring)."""
    delta = phi(s_next) - phi(s)
    objective = (delta * z).sum(-1)
    penalty = constraint_slack(delta, slack)
    lam = log_lambda.exp()
    phi_loss = -(objective + lam.detach() * penalty).mean()
    dual_loss = log_lambda * penalty.detach().mean()
    with torch.no_grad():
        stats = {
            "phi_loss": phi_loss.detach(),
            "objective": objective.mean(),
            "constraint_slack": penalty.mean(),
            "step_norm": delta.norm(dim=-1).mean(),
            "dual_lambda": lam.detach(),
        }
    return phi_loss, dual_loss, stats


class METRA(SkillMethod):
    """METRA on the shared runner (see the module docstring)."""

    NAME = "metra"
    CONFIG = METRAConfig
    LATENT_CHOICE = "best_of_n"

    def __init__(self, cfg: METRAConfig, ctx: MethodContext):
        super().__init__(cfg, ctx)
        self.layout = ctx.reference.layout
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ctx.seed + 303)
            self.phi = MLPHead(self.layout.feature_dim, cfg.hidden, self.layout.skill_dim)
        self.phi.norm.fit(transition_features(ctx.reference.inputs.cpu(), 1, self.layout))
        self.phi.to(self.device)
        self.log_lambda = nn.Parameter(torch.tensor(float(cfg.dual_lambda_init), device=self.device).log())
        self.optimizer = torch.optim.Adam(
            self.phi.parameters(), lr=cfg.lr, fused=True
        )  # see ppo.PPO: no host read per step
        self.dual_optimizer = torch.optim.Adam([self.log_lambda], lr=cfg.dual_lr, fused=True)

    def modules(self) -> dict[str, nn.Module]:
        return {"phi": self.phi}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"optimizer": self.optimizer, "dual_optimizer": self.dual_optimizer}

    @torch.no_grad()
    def relabel(self, storage: RolloutStorage) -> dict[str, Tensor]:
        s, s_next = state_pair(storage.flat("encoder_inputs"), self.layout)
        reward = metra_reward(self.phi, s, s_next, storage.flat("skills"))
        storage.rewards.copy_(reward.view_as(storage.rewards))
        return {"reward": reward.mean()}

    def update(self, storage: RolloutStorage, generator: torch.Generator) -> dict[str, Tensor]:
        cfg = self.cfg
        s_all, next_all = state_pair(storage.flat("encoder_inputs"), self.layout)
        z_all = storage.flat("skills")
        params = list(self.phi.parameters())
        # every step's rows drawn at once on the CPU generator (the same minibatches on every device), one copy over
        rows = torch.randint(z_all.shape[0], (cfg.phi_steps, cfg.minibatch_size), generator=generator)
        rows = rows.to(z_all.device, non_blocking=True)
        sums: dict[str, Tensor] = {}
        for idx in rows:
            phi_loss, dual_loss, stats = metra_losses(
                self.phi, self.log_lambda, s_all[idx], next_all[idx], z_all[idx], cfg.dual_slack
            )
            self.step_optimizer(self.optimizer, phi_loss, params)
            self.step_optimizer(self.dual_optimizer, dual_loss, [self.log_lambda])
            for k, v in stats.items():
                sums[k] = sums[k] + v if k in sums else v
        return {k: v / cfg.phi_steps for k, v in sums.items()}

    def extra_state(self) -> dict:
        return {"log_lambda": self.log_lambda.detach().cpu().clone()}

    def load_extra_state(self, state: dict) -> None:
        with torch.no_grad():
            self.log_lambda.copy_(state["log_lambda"].to(self.device))
