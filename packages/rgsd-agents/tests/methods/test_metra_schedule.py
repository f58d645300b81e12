"""METRA's schedule: phi and the dual variable take ``phi_steps`` gradient steps per iteration, as METRA's code."""

from __future__ import annotations

import torch

from rgsd_agents.methods import build_method
from rgsd_agents.methods.base import MethodContext
from rgsd_agents.methods.common import ReferenceData
from rgsd_agents.rl.storage import RolloutStorage
from rgsd_envs.envs.observations import ENCODER_INPUT_DIM, POLICY_OBS_DIM, SKILL_DIM, reference_encoder_inputs
from rgsd_envs.humanoid import skeleton as sk
from rgsd_envs.motion.library import MotionLib


def _storage(reference: ReferenceData) -> RolloutStorage:
    g = torch.Generator().manual_seed(0)
    st = RolloutStorage(4, 6, POLICY_OBS_DIM, sk.NUM_DOFS, SKILL_DIM, ENCODER_INPUT_DIM)
    st.encoder_inputs.copy_(reference.inputs[torch.randint(reference.num_total, (4, 6), generator=g)])
    st.skills.copy_(torch.nn.functional.normalize(torch.randn(4, 6, SKILL_DIM, generator=g), dim=-1))
    st.step = 4
    return st


def test_metra_takes_phi_steps_gradient_steps_of_phi_and_lambda_per_iteration():
    lib = MotionLib("demo")
    reference = ReferenceData(reference_encoder_inputs(lib).float(), lib.clip_of_frame, lib.starts, lib.num_frames)
    method = build_method("metra", {"hidden": [16], "phi_steps": 7, "minibatch_size": 5},
                          MethodContext(reference, 6, torch.device("cpu"), seed=0))  # fmt: skip
    assert (method.cfg.phi_steps, method.cfg.minibatch_size) == (7, 5)
    before = method.log_lambda.detach().clone()
    method.update(_storage(reference), torch.Generator().manual_seed(1))
    for optimizer in (method.optimizer, method.dual_optimizer):
        steps = {int(s["step"]) for s in optimizer.state.values()}
        assert steps == {7}
    assert not torch.equal(before, method.log_lambda.detach())


def test_metra_defaults_follow_its_code():
    from rgsd_agents.methods.metra import METRAConfig

    cfg = METRAConfig()
    # seohongpark/METRA tests/main.py
    assert cfg.minibatch_size == 256  # :82 trans_minibatch_size
    assert cfg.hidden == (1024, 1024)  # :117 model_master_dim 1024, :118 model_master_num_layers 2
    assert cfg.lr == 1e-4  # :98 common_lr
    assert cfg.dual_lr == 1e-4  # :134 dual_lr None, which :412-414 _finalize_lr turns into common_lr
    assert cfg.dual_lambda_init == 30.0  # :131 dual_lam
    assert cfg.dual_slack == 1e-3  # :132 dual_slack
    assert cfg.max_grad_norm is None  # iod/metra.py and iod/iod.py clip no gradients
    # README.md:26 (ant, state-based) --trans_optimization_epochs 50; :83's default and the pixel runs: 200
    assert cfg.phi_steps == 50
