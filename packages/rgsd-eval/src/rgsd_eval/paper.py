"""The RGSD paper's own figures and setup, for the reports' side-by-side rows and their differences box.

The paper trained in Isaac Gym on 20 ACCAD clips in five categories and rolled
out 500 trajectories per clip; these numbers are quoted from it, not measured
by rgsd. Its ERR is set beside ours; its FID is not, because the paper does not
define its FID feature (ours is our own 86-D window feature over 9 bodies,
``rgsd_eval.features``), so the two FIDs measure different things. Only the
paper's ordering of methods by FID is shown (``paper_fid_ranks``).
"""

from __future__ import annotations

from collections.abc import Sequence

PAPER_CATEGORIES = ("walk", "run", "sidestep", "backward", "punch")
PAPER_ROLLOUTS = 500
"""Trajectories per motion of the paper's imitation evaluation (Section 5.1)."""
PAPER_SOURCE = (
    f"RGSD paper, Table 1 (Isaac Gym, 20 ACCAD clips, {PAPER_ROLLOUTS} rollouts per clip): quoted, not measured here"
)
PAPER_ERR_FRAME = "not stated"
"""The frame of the paper's Cartesian error: "the average l2 distance between corresponding body-part positions per
frame, averaged over the trajectory" (Section 5.1) names none."""

PAPER_TERMINATION = (
    "To ensure stable training, all methods employed an early termination condition: whenever the robot fell, the "
    "episode was terminated."
)
"""The paper's fall termination, for every method (Section 5, Experimental setup)."""
PAPER_DEVIATION_TERMINATION = (
    "whenever the agent deviates from the reference motion beyond a specified threshold measured by cartesian error, "
    "the episode is terminated."
)
"""The paper's deviation termination of RGSD's imitation (Section 4.2, early termination); the threshold's value is
not stated."""

PAPER_IMITATION: dict[str, dict[str, tuple[float, float]]] = {
    name: dict(zip(PAPER_CATEGORIES, zip(row[::2], row[1::2])))
    for name, row in {
        "diayn": (46.7, 70.1, 52.8, 132.0, 27.4, 23.7, 36.7, 72.8, 50.7, 53.2),
        "metra": (42.0, 67.6, 51.8, 140.3, 44.7, 32.8, 47.4, 75.7, 51.5, 40.9),
        "ase": (8.2, 2.9, 16.4, 11.3, 10.3, 22.2, 11.6, 62.6, 9.0, 4.9),
        "calm": (7.2, 1.4, 15.0, 13.9, 11.8, 3.2, 10.1, 45.8, 9.2, 4.2),
        "meta-motivo": (10.9, 1.7, 15.4, 4.9, 11.8, 1.4, 8.6, 2.1, 8.1, 2.8),
        "rgsd": (7.4, 4.7, 7.7, 9.4, 6.7, 8.0, 6.7, 4.0, 7.7, 8.8),
    }.items()
}
"""method -> category -> (Cartesian ERR in cm, FID) from the paper's Table 1. Reports print the ERR and only the
FID's ranking (``paper_fid_ranks``)."""

PAPER_LABELS = {
    "diayn": "DIAYN",
    "metra": "METRA",
    "ase": "ASE",
    "calm": "CALM",
    "meta-motivo": "Meta-Motivo",
    "rgsd": "RGSD",
}

FID_NOT_COMPARABLE = (
    "The paper's FID values are not printed: the paper does not define its FID feature, and ours is our own "
    "(86 numbers per 0.5 s window from 9 bodies' positions), so the two FIDs are on different scales. Only the "
    "order of methods within a category can be set side by side."
)

PAPER_DISCOVERY_KAPPA = 50.0
"""kappa of the paper's discovery evaluation (Section 5.2: z ~ vMF(z_m, 50))."""

PAPER_SETUP = {
    "simulator": "Isaac Gym",
    "clips": "20 ACCAD clips (AMASS) of 2 to 5 s (appendix), 2 to 6 per category: walk, run, sidestep, backward, punch",
    "training budget": "not stated (PPO, minibatch 32,768, horizon 32; no iteration or world count)",
    "rollouts per clip": f"{PAPER_ROLLOUTS}, action noise not stated",
    "clip latent": "one per motion (Section 5.1): z_m for RGSD, the motion encoders' for CALM and Meta Motivo, the "
    f"best of {PAPER_ROLLOUTS} uniform latents by Cartesian error for the others",
    "ERR frame": f'{PAPER_ERR_FRAME}; training ended episodes at a fall (Section 5: "{PAPER_TERMINATION}") and '
    f'RGSD\'s imitation episodes on deviation (Section 4.2: "{PAPER_DEVIATION_TERMINATION}", threshold not stated); '
    f"whether its {PAPER_ROLLOUTS} evaluation trajectories ended at a fall or on deviation is not stated",
    "FID feature": "not defined",
    "discovery motions": f'FID under z ~ vMF(z_m, {PAPER_DISCOVERY_KAPPA:g}) compared on "three out of four motions" '
    "(Section 5.2), the four not named",
}
"""What the paper states about each item of the reports' "How this run differs from the paper" box."""

PAPER_DOWNSTREAM_SETUP = {
    "goal-reaching arena": '"a randomly spawned goal within a 20 x 20 m arena" (Section 5.3); the start and the '
    "goal's minimum distance not stated",
    "goal-reaching episode": "not stated (episode length, decision rate)",
    "goal-reaching success": "not stated (success rates plotted, no radius or test)",
    "goal-reaching training": "not stated (curves against training steps, three seeds)",
    "goal-reaching evaluation": "not stated (episodes per evaluation)",
}
"""What the paper states about the downstream task's settings: the rows a reproduce report adds to its box."""


PAPER_METHOD_KEYS = {"fb_cpr": "meta-motivo"}
"""rgsd method names that the paper's tables call otherwise (Meta Motivo's algorithm is FB-CPR)."""


def paper_key(method: str) -> str:
    """The key of ``method`` (an rgsd method name) in the paper's tables."""
    return PAPER_METHOD_KEYS.get(method, method)


def paper_err(method: str) -> dict[str, float] | None:
    """The paper's ERR (cm) per category for an rgsd method name, or None if the paper has no row for it."""
    row = PAPER_IMITATION.get(paper_key(method))
    return None if row is None else {c: err for c, (err, _) in row.items()}


def rank(values: dict[str, float | None]) -> dict[str, int]:
    """1 for the lowest value, 2 for the next, ... (ties share the better rank; None values are left out)."""
    known = {k: v for k, v in values.items() if v is not None}
    return {k: 1 + sum(1 for w in known.values() if w < v) for k, v in known.items()}


def paper_fid_ranks(methods: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per paper category, each of ``methods`` (rgsd names; those the paper has, each once) ranked by the paper's
    FID among those methods only (1 = lowest FID): method -> category -> rank."""
    known = [m for m in dict.fromkeys(methods) if paper_key(m) in PAPER_IMITATION]
    out: dict[str, dict[str, int]] = {m: {} for m in known}
    for c in PAPER_CATEGORIES:
        for m, r in rank({m: PAPER_IMITATION[paper_key(m)][c][1] for m in known}).items():
            out[m][c] = r
    return out


PAPER_DISCOVERY_NOTE = (
    "The paper (Section 5.2) reports FID under these latents in words and a figure: RGSD's stays level while "
    "CALM's rises from its Table 1 value (walk, run). Its FID numbers are not printed here, for the reason above."
)
