"""A replay buffer of transitions on the learner's device, for off-policy methods.

A fixed-capacity ring of named fields (each (capacity, *shape) of one dtype),
filled a batch of worlds at a time and sampled uniformly with a
``torch.Generator`` (so a seeded run samples the same minibatches on resume).
Its ``state_dict`` holds the filled rows, so a resumed run continues exactly;
a buffer too large to checkpoint (the paper's 5 M transitions are ~16 GB of
float32) is saved without its contents (``contents=False``) and a resumed run
refills it, which is then not bit-identical to an uninterrupted one.
"""

from __future__ import annotations

from typing import Any

import torch

Tensor = torch.Tensor
FieldSpec = dict[str, tuple[tuple[int, ...], torch.dtype]]
"""Field name -> (per-row shape, dtype)."""


class ReplayBuffer:
    """Ring buffer of transitions; uniform sampling (see the module docstring)."""

    def __init__(self, capacity: int, fields: FieldSpec, device: torch.device | str):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.fields = dict(fields)
        self.device = torch.device(device)
        self.data = {
            k: torch.zeros((self.capacity, *shape), dtype=dt, device=self.device) for k, (shape, dt) in fields.items()
        }
        self.pos = 0
        """Row the next transition goes to."""
        self.size = 0
        """Rows filled (at most ``capacity``)."""

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Bytes of the whole buffer."""
        return sum(t.numel() * t.element_size() for t in self.data.values())

    @torch.no_grad()
    def add(self, **batch: Tensor) -> None:
        """Append a batch of rows (every field, same row count); the oldest rows are overwritten when full."""
        if set(batch) != set(self.data):
            raise ValueError(f"replay add needs exactly the fields {sorted(self.data)}, got {sorted(batch)}")
        n = {int(v.shape[0]) for v in batch.values()}
        if len(n) != 1:
            raise ValueError(f"replay add: fields have different row counts {sorted(n)}")
        rows = n.pop()
        skip = max(0, rows - self.capacity)  # more rows than room: only the newest survive
        idx = (self.pos + skip + torch.arange(rows - skip, device=self.device)) % self.capacity
        for k, v in batch.items():
            self.data[k].index_copy_(
                0, idx, v[skip:].to(self.device, self.data[k].dtype).reshape(-1, *self.fields[k][0])
            )
        self.pos = (self.pos + rows) % self.capacity
        self.size = min(self.size + rows, self.capacity)

    def sample(self, n: int, generator: torch.Generator) -> dict[str, Tensor]:
        """``n`` rows drawn uniformly with replacement (indices on the generator's device)."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = torch.randint(self.size, (n,), generator=generator, device=generator.device).to(self.device)
        return {k: v[idx] for k, v in self.data.items()}

    def state_dict(self, contents: bool = True) -> dict[str, Any]:
        """Position, size and (``contents``) the filled rows on the CPU; without contents a load empties the buffer."""
        return {
            "capacity": self.capacity,
            "pos": self.pos,
            "size": self.size,
            "data": {k: v[: self.size].cpu().clone() for k, v in self.data.items()} if contents else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (an empty buffer when it was saved without contents)."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"replay capacity {self.capacity} differs from the checkpoint's {state['capacity']}")
        if state["data"] is None:
            self.pos = self.size = 0
            return
        self.pos, self.size = int(state["pos"]), int(state["size"])
        for k, v in self.data.items():
            v[: self.size].copy_(state["data"][k].to(self.device))
