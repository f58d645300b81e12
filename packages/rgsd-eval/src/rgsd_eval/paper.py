"""The RGSD paper's own imitation figures (Table 1), printed beside ours in reports, labelled as quoted.

The paper trained in Isaac Gym on 20 ACCAD clips in five categories and rolled
out 500 trajectories per clip; these numbers are quoted from it, not measured
by rgsd. Meta Motivo is in the paper's table but not in rgsd.
"""

from __future__ import annotations

PAPER_CATEGORIES = ("walk", "run", "sidestep", "backward", "punch")
PAPER_SOURCE = "RGSD paper, Table 1 (Isaac Gym, 20 ACCAD clips, 500 rollouts per clip): quoted, not measured here"

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
"""method -> category -> (Cartesian ERR in cm, FID) from the paper's Table 1."""

PAPER_LABELS = {
    "diayn": "DIAYN",
    "metra": "METRA",
    "ase": "ASE",
    "calm": "CALM",
    "meta-motivo": "Meta-Motivo",
    "rgsd": "RGSD",
}


def paper_rows(methods: list[str]) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """(label, per-category figures) of the paper's rows for ``methods`` (in the paper's order, each once)."""
    wanted = set(methods)
    return [(PAPER_LABELS[m], PAPER_IMITATION[m]) for m in PAPER_IMITATION if m in wanted]


PAPER_METHOD_KEYS = {"fb_cpr": "meta-motivo"}
"""rgsd method names that the paper's tables call otherwise (Meta Motivo's algorithm is FB-CPR)."""


def paper_key(method: str) -> str:
    """The key of ``method`` (an rgsd method name) in the paper's tables."""
    return PAPER_METHOD_KEYS.get(method, method)


PAPER_DISCOVERY_KAPPA = 50.0
"""kappa of the paper's discovery evaluation (Section 5.2: z ~ vMF(z_m, 50))."""
PAPER_DISCOVERY_SOURCE = (
    "RGSD paper, Section 5.2 text (z ~ vMF(z_m, 50)): quoted, not measured here; it states these two numbers only"
)
PAPER_DISCOVERY_FID: dict[str, dict[str, float]] = {"calm": {"walk": 15.5, "run": 26.7}}
"""method -> category -> FID under z ~ vMF(z_m, 50), as the paper's text gives them (CALM's rise from its Table 1
FID at z_m: walk 1.4 -> 15.5, run 13.9 -> 26.7); the paper's figure has the others, without numbers."""
