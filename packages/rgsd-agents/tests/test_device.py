"""Training devices: parsing --device, refusing an unusable one before any folder exists, CPU numbers unchanged."""

from __future__ import annotations

import pytest
import torch

from rgsd_agents.cli import main
from rgsd_agents.testing import reproducible, tiny_encoder_file, tiny_train_config
from rgsd_agents.training.runner import Runner
from rgsd_envs.rewards.encoders import trainable_copy
from rgsd_envs.utils.device import DeviceError, HostBridge, resolve_device


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> str:
    return str(tiny_encoder_file(tmp_path_factory.mktemp("enc") / "encoder.pt"))


@pytest.fixture
def no_cuda(monkeypatch):
    """A machine without a usable GPU, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_resolve_device_parses_the_specs(no_cuda):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")


def test_cuda_without_a_gpu_says_what_to_pass(no_cuda):
    with pytest.raises(DeviceError) as err:
        resolve_device("cuda")
    msg = str(err.value)
    assert "device 'cuda' requested but torch.cuda.is_available() is False" in msg
    assert "pass device='cpu' (--device cpu on the command line)" in msg and "\n" not in msg
    assert isinstance(err.value, ValueError)
    with pytest.raises(DeviceError, match="'cuda:1' requested"):
        resolve_device("cuda:1")


def test_a_missing_gpu_index_and_a_bad_spec_are_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceError, match=r"only 2 CUDA device\(s\).*'cuda:0' to 'cuda:1'"):
        resolve_device("cuda:2")
    with pytest.raises(DeviceError, match="not a device; pass one of auto, cpu, cuda, cuda:N"):
        resolve_device("gpu")


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--config", "demo", "--device", "cuda", "--out", "{out}", "--no-progress"],
        ["train", "--config", "demo", "--set", "device=cuda:0", "--out", "{out}", "--no-progress"],
        ["demo", "--device", "cuda", "--out", "{out}", "--no-progress"],
        ["pretrain", "--motions", "demo", "--device", "cuda", "--out", "{out}", "--no-progress"],
        ["downstream", "--low-level", "{low}", "--device", "cuda", "--out", "{out}", "--no-progress"],
        ["eval", "--run", "{low}", "--device", "cuda", "--out", "{out}", "--no-progress"],
    ],
    ids=["train", "train-set", "demo", "pretrain", "downstream", "eval"],
)
def test_cli_refuses_cuda_without_a_gpu_in_one_line_and_leaves_no_folder(no_cuda, tmp_path, capsys, argv):
    low = tmp_path / "low"  # never read: the device is checked first
    out = tmp_path / "out"
    code = main([a.format(out=out, low=low) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and "torch.cuda.is_available() is False" in err and "--device cpu" in err
    assert not out.exists()


def test_device_cpu_trains_with_the_same_numbers_as_the_default(no_cuda, tmp_path, tiny_encoder):
    runs = {}
    for name, kw in (("default", {}), ("cpu", {"device": "cpu"})):
        runner = Runner(tiny_train_config(tiny_encoder, iterations=2, **kw), tmp_path / name, progress=False)
        assert runner.device == torch.device("cpu")
        assert (
            runner.method.env_encoder is runner.method.trainable
        )  # one device: the env scores with the learner's encoder
        runs[name] = reproducible(runner.learn())
        runner.close()
    assert tiny_train_config(tiny_encoder).device == "auto"
    assert runs["default"] == runs["cpu"]
    assert runs["cpu"][-1]["losses/value_loss"] > 0


def test_a_separate_env_encoder_is_synced_after_every_discovery_update(tmp_path, tiny_encoder):
    """The learner/env encoder split used across devices gives the numbers of the shared encoder."""
    shared = Runner(tiny_train_config(tiny_encoder, iterations=3, device="cpu"), tmp_path / "a", False)
    expected = reproducible(shared.learn())
    shared.close()
    split = Runner(tiny_train_config(tiny_encoder, iterations=3, device="cpu"), tmp_path / "b", False)
    split.method.env_encoder = trainable_copy(split.method.trainable)
    split.env.set_encoder(split.method.env_encoder)
    got = reproducible(split.learn())
    assert got == expected
    for a, b in zip(split.method.env_encoder.parameters(), split.method.trainable.parameters()):
        assert a is not b and torch.equal(a, b)
    split.close()


def test_host_bridge_on_the_cpu_copies_nothing():
    bridge = HostBridge("cpu")
    x = torch.arange(6.0).reshape(2, 3).numpy()
    t = bridge.to_device(x)
    assert t.data_ptr() == x.__array_interface__["data"][0]
    a = torch.ones(2, 3)
    assert bridge.to_host(a).__array_interface__["data"][0] == a.data_ptr()
