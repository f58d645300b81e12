"""What the FID's window feature measures on each clip, from the reference alone (no policy, a few seconds).

Per clip: its feature windows, the rank of their covariance (eigenvalues above a millionth of the largest, of
``FEATURE_DIM``), the feature terms that hold the largest shares of the total variance (the trace), and the FID of
a humanoid standing still in the clip's first pose for the clip's length, scored as ``rgsd eval`` scores a rollout
(its windows against the clip's, ``fid_eps`` on both covariances). It writes ``--json``; ``docs/evaluation.md``
quotes it. For the 2-core comparison's 13 clips::

    python benchmarks/fid_feature_variance.py --motions runs/clips --json docs/results/fid_feature_variance.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from rgsd_envs.motion.library import load_motions
from rgsd_envs.utils.files import atomic_path
from rgsd_eval.features import FEATURE_DIM, WINDOW, feature_names, motion_features
from rgsd_eval.fid import DEFAULT_EPS, GaussianStats, fid

RANK_TOLERANCE = 1e-6
"""An eigenvalue counts towards the rank above this fraction of the largest."""
LEADING_TERMS = 3
"""Feature terms listed per clip, largest variance share first."""


def clip_entry(body_pos: np.ndarray, fps: float, names: list[str]) -> dict[str, Any]:
    """One clip's windows, covariance rank, leading variance shares and standing-still FID."""
    windows = motion_features(body_pos, fps, WINDOW)
    if len(windows) < 2:
        return {"windows": len(windows), "rank": None, "leading_terms": {}, "standing_still_fid": None}
    cov = np.cov(windows, rowvar=False)
    eig = np.linalg.eigvalsh(cov)
    share = np.diag(cov) / np.trace(cov)
    top = np.argsort(share)[::-1][:LEADING_TERMS]
    still = motion_features(np.repeat(body_pos[:1], len(body_pos), axis=0), fps, WINDOW)
    return {
        "windows": len(windows),
        "rank": int((eig > RANK_TOLERANCE * eig.max()).sum()),
        "leading_terms": {names[i]: round(float(share[i]), 3) for i in top},
        "standing_still_fid": round(fid(GaussianStats.of(windows), GaussianStats.of(still), DEFAULT_EPS), 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--motions", required=True, help="a clip folder or file, as rgsd eval --motions takes")
    p.add_argument("--json", type=Path, help="write the per-clip figures here")
    args = p.parse_args(argv)
    names = feature_names()
    clips = {c.name: clip_entry(c.body_pos, c.fps, names) for c in load_motions(args.motions)}
    for name, e in clips.items():
        lead = ", ".join(f"{k} {v:.0%}" for k, v in e["leading_terms"].items())
        print(
            f"{name:16s} windows {e['windows']:4d}  rank {e['rank']}/{FEATURE_DIM}  still FID {e['standing_still_fid']}  {lead}"
        )
    doc = {
        "command": f"python benchmarks/fid_feature_variance.py --motions {args.motions}",
        "window": WINDOW,
        "feature_dim": FEATURE_DIM,
        "rank_tolerance": RANK_TOLERANCE,
        "fid_eps": DEFAULT_EPS,
        "clips": clips,
    }
    if args.json:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
