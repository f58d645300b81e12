"""rgsd's torch files hold plain data: saving anything else fails, loading a file with pickled objects is refused."""

from __future__ import annotations

import collections
import os
import re

import numpy as np
import pytest
import torch

from rgsd_envs.rewards.encoders import MLPEncoder, load_encoder
from rgsd_envs.runs.policy import PolicyMLP, load_policy
from rgsd_envs.utils.files import PickledObjectsError, load_plain, non_plain_entries, save_plain


class _RunsCode:
    """An object whose unpickling calls ``os.mkdir(marker)``: what a hostile file could do."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _plain_payload() -> dict:
    return {
        "format": "x",
        "n": 3,
        "lr": 1e-3,
        "ok": True,
        "none": None,
        "shape": torch.Size([2, 3]),
        "dtype": torch.float64,
        "layers": [32, (16, 8)],
        "state_dict": collections.OrderedDict(w=torch.ones(2, 3), p=torch.nn.Parameter(torch.zeros(1))),
    }


def test_plain_data_round_trips_through_weights_only_load(tmp_path):
    payload = _plain_payload()
    assert non_plain_entries(payload) == []
    back = load_plain(save_plain(payload, tmp_path / "plain.pt"))
    assert back["layers"] == [32, (16, 8)] and back["shape"] == torch.Size([2, 3]) and back["dtype"] is torch.float64
    assert torch.equal(back["state_dict"]["w"], torch.ones(2, 3)) and back["n"] == 3 and back["none"] is None


def test_saving_numpy_values_or_other_objects_names_each_entry_and_writes_nothing(tmp_path):
    payload = {
        "env": {"random": {"keys": np.zeros(4, dtype=np.uint64)}},
        "metrics": [1.0, np.float64(2.0)],  # a float subclass: pickled as a numpy scalar
        "cfg": collections.namedtuple("Cfg", "a")(1),
    }
    entries = non_plain_entries(payload)
    assert entries[:2] == ["env.random.keys (numpy.ndarray)", "metrics[1] (numpy.float64)"]
    assert len(entries) == 3 and re.fullmatch(r"cfg \(.*\.Cfg\)", entries[2]), entries
    with pytest.raises(TypeError, match=r"refusing to save env\.random\.keys \(numpy\.ndarray\) and 2 more"):
        save_plain(payload, tmp_path / "bad.pt")
    assert not list(tmp_path.iterdir())


def test_a_file_with_a_pickled_object_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "code_ran"
    path = tmp_path / "hostile.pt"
    torch.save({"format": "rgsd-policy", "state_dict": {}, "meta": _RunsCode(str(marker))}, path)
    with pytest.raises(PickledObjectsError) as err:
        load_plain(path)
    assert not marker.exists()
    message = str(err.value)
    assert message.startswith(f"{path}: holds objects that are not plain data (posix.mkdir)")
    assert "will not unpickle them" in message
    # torch.load without weights_only would have run it: the refusal is what keeps the marker away
    torch.load(path, weights_only=False)
    assert marker.is_dir()


def test_policy_and_encoder_files_with_numpy_arrays_are_refused_by_name(tmp_path):
    pol = tmp_path / "policy.pt"
    payload = load_plain(PolicyMLP(375, 69, (8,)).save(pol))
    payload["meta"] = {"obs_mean": np.zeros(3)}
    torch.save(payload, pol)
    with pytest.raises(PickledObjectsError, match=r"policy\.pt: holds objects that are not plain data \(numpy\."):
        load_policy(pol)
    enc = tmp_path / "encoder.pt"
    payload = load_plain(MLPEncoder(hidden=(8,)).save(enc))
    payload["kappa"] = np.float64(10.0)
    torch.save(payload, enc)
    with pytest.raises(PickledObjectsError, match=r"encoder\.pt: holds objects that are not plain data \(numpy\."):
        load_encoder(enc)


def test_saving_a_policy_with_non_plain_metadata_fails_before_writing(tmp_path):
    with pytest.raises(TypeError, match=r"refusing to save meta\.step \(numpy\.int64\)"):
        PolicyMLP(375, 69, (8,)).save(tmp_path / "policy.pt", step=np.int64(3))
    assert not (tmp_path / "policy.pt").exists()


def test_a_corrupt_file_is_not_mistaken_for_one_with_pickled_objects(tmp_path):
    path = tmp_path / "garbage.pt"
    path.write_bytes(b"not a torch file")
    with pytest.raises(Exception) as err:
        load_plain(path)
    assert not isinstance(err.value, PickledObjectsError)
