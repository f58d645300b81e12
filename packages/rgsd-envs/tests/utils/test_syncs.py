"""``find_syncs``: the calls that would make a GPU's host thread wait, found by a run on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rgsd_envs.utils.syncs import find_syncs

DEVICE = torch.device("cpu")  # a torch.device: the configured device, a GPU on a GPU machine
x = torch.arange(10.0)
ids = torch.arange(3, device=DEVICE)

SYNCING = {
    "boolean-mask read": lambda: x[x > 4],
    "boolean-mask write of a device value": lambda: x.clone().__setitem__(x > 4, x.sum()),
    "a host scalar written by index": lambda: x.clone().__setitem__(ids, 0.0),
    "nonzero": lambda: x.nonzero(),
    "item": lambda: x.sum().item(),
    "float()": lambda: float(x.sum()),
    "truth value": lambda: bool((x > 4).any()),
    "tolist": lambda: x.tolist(),
    "unique": lambda: x.unique(),
    "equal": lambda: torch.equal(x, x),
    "tensor from Python data on the device": lambda: torch.tensor([1, 2], device=DEVICE),
    "blocking upload": lambda: torch.from_numpy(np.ones(3)).to(DEVICE),
    "copy_ from the host": lambda: x.clone().copy_(torch.ones(10)),
    "index by a Python list": lambda: x[[0, 2]],
    "cpu": lambda: x.cpu(),
}
NOT_SYNCING = {
    "boolean-mask fill of a Python scalar": lambda: x.clone().__setitem__(x > 4, 0.0),
    "index_fill_": lambda: x.clone().index_fill_(0, ids, 0.0),
    "a device scalar written by index": lambda: x.clone().__setitem__(ids, x.sum()),
    "nonzero_static": lambda: torch.nonzero_static(x, size=3),
    "where": lambda: torch.where(x > 4, x, 0.0),
    "non-blocking upload": lambda: torch.from_numpy(np.ones(3)).to(DEVICE, non_blocking=True),
    "host-only work, read": lambda: (torch.tensor([1.0, 2.0]) * 2).tolist(),
    "a host scalar in a device op": lambda: x * torch.tensor(2.0),
}


@pytest.mark.parametrize("name", SYNCING)
def test_each_kind_of_synchronising_call_is_found_once(name):
    with find_syncs() as found:
        SYNCING[name]()
    assert len(found) == 1, found


@pytest.mark.parametrize("name", NOT_SYNCING)
def test_calls_that_keep_the_gpu_queue_running_are_not_reported(name):
    with find_syncs() as found:
        NOT_SYNCING[name]()
    assert found == []


def test_a_finding_names_its_rgsd_source_line_and_torch_is_restored():
    from rgsd_envs.utils.host_reads import read_host_flags

    flags = torch.zeros(2, 3, dtype=torch.bool)  # made before the block: a device tensor
    to, tolist = torch.Tensor.to, torch.Tensor.tolist
    with find_syncs() as found:
        read_host_flags(flags)
    assert [op for op, _ in found] == ["Tensor.tolist"]
    assert found[0].site.startswith("rgsd_envs/utils/host_reads.py:")
    assert (torch.Tensor.to, torch.Tensor.tolist) == (to, tolist)
