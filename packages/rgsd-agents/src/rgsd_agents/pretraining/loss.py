"""The InfoNCE loss of contrastive pretraining (temperature 1/kappa, same-clip candidates masked)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def info_nce_loss(
    anchor: Tensor,
    positive: Tensor,
    clip_ids: Tensor,
    kappa: float,
    symmetric: bool = False,
    hard: Tensor | None = None,
) -> Tensor:
    """InfoNCE (T = 1/kappa) of unit (B, d) anchors vs in-batch positives; same-clip candidates masked.

    ``hard`` (B, K, d): extra negatives of each anchor only (``negatives = "hard"``); the symmetric term
    scores positives against the anchors alone.
    """
    if anchor.shape != positive.shape or anchor.dim() != 2 or clip_ids.shape != anchor.shape[:1]:
        raise ValueError(
            f"info_nce_loss needs anchor and positive (B, d) and clip_ids (B,); got {tuple(anchor.shape)}, "
            f"{tuple(positive.shape)}, {tuple(clip_ids.shape)}"
        )
    b = anchor.shape[0]
    logits = kappa * anchor @ positive.T  # (B, B): anchor i vs positive j
    eye = torch.eye(b, dtype=torch.bool, device=anchor.device)
    other_same_clip = (clip_ids.unsqueeze(0) == clip_ids.unsqueeze(1)) & ~eye
    logits = logits.masked_fill(other_same_clip, float("-inf"))
    target = torch.arange(b, device=anchor.device)
    if hard is not None:
        if hard.dim() != 3 or hard.shape[0] != b or hard.shape[2] != anchor.shape[1]:
            raise ValueError(f"info_nce_loss needs hard negatives (B, K, d); got {tuple(hard.shape)}")
        own = kappa * torch.einsum("bd,bkd->bk", anchor, hard)
        loss = F.cross_entropy(torch.cat((logits, own), dim=1), target)
    else:
        loss = F.cross_entropy(logits, target)
    if symmetric:  # mask is symmetric, so the transpose scores positives against anchors
        loss = 0.5 * (loss + F.cross_entropy(logits.T, target))
    return loss
