"""Tables of measured figures, generated from the committed files that hold them.

A page asks for one with ``<!-- results: NAME -->`` on a line of its own, and ``docs/hooks/reference.py`` fills it
as it fills its reference tables (up to ``<!-- end generated -->``; ``python docs/hooks/reference.py`` rewrites the
pages, ``--check`` and ``tests/test_docs_reference.py`` fail while one is stale, the MkDocs build regenerates them).
Each table is one function below, registered under its name with the files it reads, and each of its cells is
written from values read at named places in them (a JSON key path, a record of a JSONL file, a pattern of a text
file; a range or a ratio computed from such values), so a cell edited by hand, two cells swapped or a table that
outlives the run behind it make the page stale. What a table's cells say (its labels, its rounding, which cells are
bold and why) is written here, once. ``tests/test_docs_reference.py`` checks that each table reads exactly the files
it is registered with.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for _src in sorted((ROOT / "packages").glob("*/src")):  # the checkout's packages, as reference.py imports them
    if str(_src) not in sys.path:
        sys.path.insert(0, str(_src))
from rgsd_envs.motion.demo import DEMO_KINDS  # noqa: E402  the demo clips (demo_<kind>), in the tables' order

RESULTS = "docs/results"
CARD = "packages/rgsd-agents/src/rgsd_agents/pretrained/rgsd_cpu/card.json"
"""The shipped policy's card: the error ``rgsd play`` measured on each of its clips."""


class SourceError(LookupError):
    """A file or a figure a table reads is not there: the message names the file and the key path or pattern."""


Table = Callable[[], list[str]]
TABLES: dict[str, tuple[Table, tuple[str, ...]]] = {}
"""Table name (the marker's argument) -> (the function that writes it, the files it reads)."""


def table(name: str, *files: str) -> Callable[[Table], Table]:
    """Register the decorated function as the table ``name``, made from ``files`` (paths from the repository root)."""

    def register(fn: Table) -> Table:
        TABLES[name] = (fn, files)
        return fn

    return register


def render(name: str) -> list[str]:
    """The lines of the table ``name``."""
    if name not in TABLES:
        raise SourceError(f"no results table {name!r}; the tables are {', '.join(sorted(TABLES))}")
    return TABLES[name][0]()


# -- reading the files ----------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _read(path: Path, mtime_ns: int) -> Any:
    text = path.read_text()
    if path.suffix == ".json":
        return json.loads(text)
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return text


def load(rel: str) -> Any:
    """The content of the committed file ``rel``: JSON parsed, a JSONL file as its list of records, else text."""
    path = ROOT / rel
    if not path.is_file():
        raise SourceError(f"{rel}: not found (a results table reads it)")
    return _read(path, path.stat().st_mtime_ns)


def at(rel: str, *keys: str | int) -> Any:
    """The value at ``keys`` in the JSON (or JSONL) file ``rel``."""
    value = load(rel)
    for i, key in enumerate(keys):
        try:
            value = value[key]
        except (KeyError, IndexError, TypeError):
            raise SourceError(f"{rel}: no {'/'.join(map(str, keys[: i + 1]))}") from None
    return value


def match(rel: str, pattern: str) -> re.Match[str]:
    """The first match of ``pattern`` (multiline) in the text file ``rel``."""
    found = re.search(pattern, load(rel), flags=re.M)
    if found is None:
        raise SourceError(f"{rel}: nothing matches {pattern!r}")
    return found


def number(rel: str, pattern: str) -> float:
    """The number that ``pattern``'s first group matches in the text file ``rel`` (thousands commas allowed)."""
    return float(match(rel, pattern).group(1).replace(",", ""))


def only_run(rel: str) -> str:
    """The name of the one run an evaluation report ``rel`` holds."""
    runs = list(at(rel, "runs"))
    if len(runs) != 1:
        raise SourceError(f"{rel}: runs holds {len(runs)} runs ({', '.join(runs)}), the table shows one")
    return runs[0]


def markdown_row(rel: str, first_cell: str) -> list[str]:
    """The cells of the markdown table row of ``rel`` whose first cell starts with ``first_cell``."""
    row = match(rel, rf"^\| {re.escape(first_cell)}.*\|$").group(0)
    return [cell.strip() for cell in row.strip("|").split("|")]


# -- writing the cells ----------------------------------------------------------------


def fixed(value: float, decimals: int = 1) -> str:
    """``value`` to ``decimals`` places."""
    return f"{value:.{decimals}f}"


def grouped(value: float) -> str:
    """``value`` rounded to a whole number, with thousands commas."""
    return f"{value:,.0f}"


def millions(value: float, decimals: int = 2) -> str:
    """``value`` in millions: 4018176 -> "4.02 M"."""
    return f"{value / 1e6:.{decimals}f} M"


def thousands(value: float, decimals: int = 1) -> str:
    """``value`` in thousands: 15736 -> "15.7 k"."""
    return f"{value / 1e3:.{decimals}f} k"


def percent(fraction: float) -> str:
    """A fraction as a whole percentage: 0.03125 -> "3 %"."""
    return f"{fraction * 100:.0f} %"


def span(low: str, high: str) -> str:
    """A range as the tables write it ("21.7-34.3"), or one figure when both ends agree."""
    return low if low == high else f"{low}-{high}"


def bold(text: str) -> str:
    """A cell's figure in bold."""
    return f"**{text}**"


def bold_best(rows: list[list[str]], values: list[list[float | None]], columns: dict[int, Callable]) -> None:
    """Bold, in each of ``columns`` (index -> ``min`` or ``max``), the figure of the rows whose value is the best
    (the cell up to a parenthesis: "**31.0** (0.47 m)"); ``values[r][c]`` is the value behind ``rows[r][c]``."""
    for c, best in columns.items():
        target = best(v[c] for v in values if v[c] is not None)
        for r, v in enumerate(values):
            if v[c] == target:
                figure, paren, rest = rows[r][c].partition(" (")
                rows[r][c] = bold(figure) + paren + rest


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> list[str]:
    """A markdown table: the header, its rule (``align``: ``---`` or ``---:`` per column), the rows."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    rule = "|" + "|".join(align or ["---"] * len(header)) + "|"
    return [line(header), rule, *(line(r) for r in rows)]


def clip_error(error_cm: float, fell: bool) -> str:
    """A clip's error in cm to 0.1, marked when its rollout fell."""
    return fixed(error_cm) + (" (falls)" if fell else "")


# -- the demo on 2 CPU cores: three seeds of `rgsd demo` --------------------------------

DEMO_SEEDS = f"{RESULTS}/demo_seeds.json"
DEMO_SEEDS_DERIVED_C = f"{RESULTS}/demo_seeds_reward_constant.json"
"""The same three seeds with the reward's C at the paper's derivation (``--set reward_constant=-2.73``)."""


def _demo_seed_cells(path: str = DEMO_SEEDS) -> list[str]:
    """Per demo clip: the range of its error over the seeds, and how many of them fell."""
    seeds = len(at(path, "seeds"))
    cells = []
    for kind in DEMO_KINDS:
        clip = ("range", "clips", f"demo_{kind}")
        cell = span(fixed(at(path, *clip, "err_cm_min")), fixed(at(path, *clip, "err_cm_max")))
        falls = at(path, *clip, "falls")
        cells.append(cell + (f" (falls in {falls} of {seeds})" if falls else ""))
    return cells


def _demo_samples(path: str) -> str:
    """The range of the seeds' training samples, "4.02-4.35 M"."""
    low, high = millions(at(path, "range", "samples_min")), millions(at(path, "range", "samples_max"))
    return span(low.removesuffix(" M"), high)


@table("demo-seeds", DEMO_SEEDS)
def demo_seeds() -> list[str]:
    """The results page's row: time in all, samples, then each clip's range."""
    seeds = len(at(DEMO_SEEDS, "seeds"))
    minutes = span(
        fixed(at(DEMO_SEEDS, "range", "wall_minutes_min")), fixed(at(DEMO_SEEDS, "range", "wall_minutes_max"))
    )
    header = [f"`rgsd demo`, {seeds} seeds", "samples", *DEMO_KINDS]
    return markdown(header, [[f"{minutes} minutes in all", _demo_samples(DEMO_SEEDS), *_demo_seed_cells()]])


@table("demo-seeds-clips", DEMO_SEEDS)
def demo_seeds_clips() -> list[str]:
    """The README's row: each clip's range."""
    return markdown(DEMO_KINDS, [_demo_seed_cells()])


@table("demo-reward-constant", DEMO_SEEDS, DEMO_SEEDS_DERIVED_C)
def demo_reward_constant() -> list[str]:
    """The reward's C in the demo: the presets' C = kappa against the paper's derived C, three seeds each."""
    rows = [
        ["C = kappa = 10 (every preset)", _demo_samples(DEMO_SEEDS), *_demo_seed_cells(DEMO_SEEDS)],
        [
            "C = -2.73 (the paper's derivation)",
            _demo_samples(DEMO_SEEDS_DERIVED_C),
            *_demo_seed_cells(DEMO_SEEDS_DERIVED_C),
        ],
    ]
    return markdown(["`rgsd demo`, 3 seeds each", "samples", *DEMO_KINDS], rows)


# -- the shipped policy's card --------------------------------------------------------

DEEPMIMIC_CLIPS = ("walk", "jog", "run", "stealthy_walk", "zombie_walk", "kick", "spinkick", "punch")
"""The DeepMimic clips of the shipped policy, in the order the tables show them."""


def _card_errors(clips: Sequence[str]) -> list[str]:
    return [clip_error(at(CARD, "clips", c, "error_cm"), at(CARD, "clips", c, "fell")) for c in clips]


@table("card-demo", CARD)
def card_demo() -> list[str]:
    """The results page's row of the demo clips."""
    return markdown(["demo clips", *DEMO_KINDS], [["ERR, cm", *_card_errors([f"demo_{k}" for k in DEMO_KINDS])]])


@table("card-deepmimic", CARD)
def card_deepmimic() -> list[str]:
    """The results page's row of the DeepMimic clips."""
    header = ["DeepMimic clips", *(c.replace("_", " ") for c in DEEPMIMIC_CLIPS)]
    return markdown(header, [["ERR, cm", *_card_errors(DEEPMIMIC_CLIPS)]])


@table("card-demo-clips", CARD)
def card_demo_clips() -> list[str]:
    """The README's row of the demo clips."""
    return markdown(DEMO_KINDS, [_card_errors([f"demo_{k}" for k in DEMO_KINDS])])


@table("card-deepmimic-clips", CARD)
def card_deepmimic_clips() -> list[str]:
    """The README's row of the DeepMimic clips."""
    header = [f"DeepMimic {DEEPMIMIC_CLIPS[0]}", *(c.replace("_", " ") for c in DEEPMIMIC_CLIPS[1:])]
    return markdown(header, [_card_errors(DEEPMIMIC_CLIPS)])


@table("card-clips", CARD)
def card_clips() -> list[str]:
    """Every clip of the card, as it lists them: frames, error, whether it fell; then the mean over the clips."""
    rows = [
        [name, str(at(CARD, "clips", name, "frames")), fixed(at(CARD, "clips", name, "error_cm")),
         "yes" if at(CARD, "clips", name, "fell") else ""]
        for name in at(CARD, "clips")
    ]  # fmt: skip
    rows.append([bold("mean"), "", bold(fixed(at(CARD, "mean_error_cm"))), ""])
    return markdown(["clip", "frames", "error (cm)", "fell"], rows, align=["---", "---:", "---:", "---"])


# -- one H200 -------------------------------------------------------------------------

H200 = f"{RESULTS}/gpu_h200"
H200_THROUGHPUT = f"{H200}/throughput.json"
H200_REPORT = f"{H200}/gpu_check.md"
H200_SHARING = f"{H200}/sharing.json"
H200_SHARING_MORE = f"{H200}/sharing_4_6.json"
H200_WORLDS = "8192"


def _h200_rate(row: str) -> float:
    """A warp row of the throughput step at 8192 worlds."""
    return at(H200_THROUGHPUT, "figures", H200_WORLDS, row, "warp")


def _h200_alone() -> float:
    """RGSD's paper preset training alone: the median samples/s of the sharing step's one training."""
    return at(H200_SHARING, "groups", "x1", "members", "rgsd", "median_sps")


@table("h200-throughput", H200_THROUGHPUT, H200_SHARING, H200_REPORT)
def h200_throughput() -> list[str]:
    """Physics, env and training rates at 8192 worlds beside the report's goals (its Goals table's targets)."""
    physics, env = _h200_rate("physics"), _h200_rate("env")
    goal_env = markdown_row(H200_REPORT, "env steps/s, warp, 8192 worlds")[2]
    goal_ratio = markdown_row(H200_REPORT, "env steps/s over physics-only")[2]
    goal_train = markdown_row(H200_REPORT, "training samples/s, paper networks")[2]
    rows = [
        ["physics, world-steps/s", grouped(physics), ""],
        ["env steps/s, restarts queued on the device", grouped(env), goal_env],
        ["env steps/s over physics-only", fixed(env / physics, 2), goal_ratio],
        ["env steps/s, restarts by host indices", grouped(_h200_rate("env_host_restarts")), ""],
        ["training samples/s, paper networks (`gpu_throughput.py`'s full loop)", grouped(_h200_rate("train")),
         goal_train],
        ["RGSD's paper preset alone (`rgsd train`, median samples/s)", grouped(_h200_alone()), goal_train],
    ]  # fmt: skip
    return markdown([f"{H200_WORLDS} worlds", "figure", "goal (one H100)"], rows)


@table("h200-throughput-summary", H200_THROUGHPUT)
def h200_throughput_summary() -> list[str]:
    """The README's row: physics, env and training rates at 8192 worlds."""
    header = [f"MuJoCo Warp, {H200_WORLDS} worlds", "physics alone", "env steps/s with the encoder reward",
              "training samples/s, paper networks"]  # fmt: skip
    return markdown(header, [["one H200", *(grouped(_h200_rate(r)) for r in ("physics", "env", "train"))]])


H200_PROFILE = f"{H200}/profile.txt"
PROFILE_PHASES = {
    "actions check": "actions check",
    "physics launch": "physics launch (one CUDA graph)",
    "observations, termination": "observations, termination",
    "encoder reward": "encoder reward",
    "restarts queued on the device": "restarts queued on the device",
    "the one read (host waits for the device)": "the one read (the host waits for the device)",
    "restarts' host side": "restarts' host side, after the read",
    "other host work": "other host work",
}
"""The profile's phases (as ``profile.txt`` names them) -> the page's words for them."""


@table("h200-profile", H200_PROFILE)
def h200_profile() -> list[str]:
    """Host milliseconds per env step by phase, then the whole step in bold."""

    def ms(phase: str) -> str:
        return fixed(number(H200_PROFILE, rf"^{re.escape(phase)}\s+([\d.]+)$"), 3)

    rows = [[label, ms(phase)] for phase, label in PROFILE_PHASES.items()]
    rows.append([bold("step"), bold(ms("step"))])
    return markdown(["phase of `RGSDTorchEnv.step`", "host ms per step"], rows)


H200_METHODS = f"{H200}/methods.json"
METHOD_NAMES = {"rgsd": "RGSD", "ase": "ASE", "calm": "CALM", "diayn": "DIAYN", "metra": "METRA",
                "fb_cpr": "Meta Motivo"}  # fmt: skip
"""rgsd's method names -> the names the pages give them."""


@table("h200-methods", H200_METHODS)
def h200_methods() -> list[str]:
    """Each method's training beside the others and its evaluation time."""
    group = ("groups", "methods")
    rows = []
    for method in at(H200_METHODS, *group, "members"):
        member = (*group, "members", method)
        rows.append([
            METHOD_NAMES[method],
            fixed(at(H200_METHODS, *member, "iterations"), 0),
            grouped(at(H200_METHODS, *member, "median_sps")),
            grouped(at(H200_METHODS, *member, "peak_allocated_mib")),
            fixed(at(H200_METHODS, *group, "eval", method, "seconds")),
        ])  # fmt: skip
    header = ["method", "iterations", "samples/s (median, sharing the GPU)", "peak GPU memory allocated, MiB",
              "evaluation, s"]  # fmt: skip
    return markdown(header, rows)


@table("h200-sharing", H200_SHARING, H200_SHARING_MORE)
def h200_sharing() -> list[str]:
    """Copies of RGSD at once: the sum of their medians and the range of each one's."""
    rows = []
    for rel in (H200_SHARING, H200_SHARING_MORE):
        for name in at(rel, "groups"):
            group = ("groups", name)
            medians = [at(rel, *group, "members", m, "median_sps") for m in at(rel, *group, "members")]
            rows.append([
                str(at(rel, *group, "trainings")),
                grouped(at(rel, *group, "aggregate_sps")),
                span(grouped(min(medians)), grouped(max(medians))),
            ])  # fmt: skip
    return markdown(["trainings at once", "sum of their medians, samples/s", "each one's median, samples/s"], rows)


H200_PARITY = f"{H200}/backend_parity.json"


@table("h200-parity", H200_PARITY)
def h200_parity() -> list[str]:
    """The gaps between MuJoCo's and MuJoCo Warp's error per clip, and the tolerance they were held to."""
    cm, share = at(H200_PARITY, "tolerance", "abs_cm"), at(H200_PARITY, "tolerance", "rel")
    tolerance = f"{cm:g} cm or {share * 100:g} % of the error"
    row = [str(len(at(H200_PARITY, "clips"))), fixed(at(H200_PARITY, "mean_gap_cm"), 3),
           fixed(at(H200_PARITY, "max_gap_cm"), 3), tolerance]  # fmt: skip
    return markdown(["clips", "mean gap, cm", "largest gap, cm", "tolerance"], [row])


# -- one H100 -------------------------------------------------------------------------

H100 = f"{RESULTS}/gpu_h100"
H100_REPORT = f"{H100}/gpu_check.md"
H100_EVAL = f"{H100}/eval_metrics.json"
H100_THROUGHPUT = f"{H100}/throughput.log"


def _h100_categories() -> list[str]:
    """The H100 run's error per demo category."""
    categories = ("runs", only_run(H100_EVAL), "imitation", "categories")
    return [clip_error(at(H100_EVAL, *categories, k, "err_cm"), at(H100_EVAL, *categories, k, "fall_rate") > 0)
            for k in DEMO_KINDS]  # fmt: skip


@table("h100-eval", H100_REPORT, H100_EVAL)
def h100_eval() -> list[str]:
    """The paper preset's 3-minute run: samples and rate (the report's Training table), then its error."""
    samples = float(markdown_row(H100_REPORT, "env_samples")[1].replace(",", ""))
    rate = markdown_row(H100_REPORT, "median_sps")[1]
    header = ["`paper` preset, 3 minutes", "samples", "samples/s (median)", *DEMO_KINDS]
    return markdown(header, [["`rgsd eval`, cm", millions(samples, 1), rate, *_h100_categories()]])


@table("h100-eval-clips", H100_EVAL)
def h100_eval_clips() -> list[str]:
    """The README's row: the H100 run's error per demo category."""
    return markdown(DEMO_KINDS, [_h100_categories()])


H100_MEASURES = {
    "physics": "physics, world-steps/s (native MuJoCo)",
    "env": "env steps/s with the encoder reward (native)",
    "train": "training samples/s, paper networks (hybrid: native worlds, GPU learner)",
}
"""The throughput log's measures -> the page's words for them."""


@table("h100-throughput", H100_THROUGHPUT)
def h100_throughput() -> list[str]:
    """Warp on the H100 (native MuJoCo on its 16 cores) per measure and world count; "not timed" where the log
    has no line for the measure."""
    text = load(H100_THROUGHPUT)
    sizes = re.findall(r"^N = (\d+)$", text, flags=re.M)
    sections = dict(zip(sizes, re.split(r"^N = \d+$", text, flags=re.M)[1:]))
    rows = []
    for measure, label in H100_MEASURES.items():
        cells = [label]
        for n in sizes:
            line = re.search(rf"^\s+{measure}\s.*$", sections[n], flags=re.M)
            if line is None:
                cells.append("not timed")
                continue
            rates = re.match(rf"^\s+{measure}\s+([\d,]+)\s+([\d,]+)\s", line.group(0))
            if rates is None:
                raise SourceError(
                    f"{H100_THROUGHPUT}: N = {n}, {measure}: no warp and mujoco rates in {line.group(0)!r}"
                )
            cells.append(f"{rates.group(1)} ({rates.group(2)})")
        rows.append(cells)
    return markdown(["measure", *(f"{n} worlds" for n in sizes)], rows)


# -- the methods' learning check on 2 CPU cores ---------------------------------------

METHODS_CHECK = f"{RESULTS}/methods_check/metrics.json"
METHODS_CHECK_WHOLE_CLIP = f"{RESULTS}/methods_check/fb_cpr_whole_clip_metrics.json"
METHODS_CHECK_ROWS = (
    ("untrained (RGSD's preset)", METHODS_CHECK, "untrained_rgsd"),
    ("RGSD", METHODS_CHECK, "rgsd"),
    ("ASE", METHODS_CHECK, "ase"),
    ("CALM", METHODS_CHECK, "calm"),
    ("DIAYN", METHODS_CHECK, "diayn"),
    ("METRA", METHODS_CHECK, "metra"),
    ("Meta Motivo (FB-CPR), a latent per step", METHODS_CHECK, "fb_cpr"),
    ("Meta Motivo, B averaged over the clip", METHODS_CHECK_WHOLE_CLIP, "fb_cpr"),
)
"""(row label, evaluation report, run name in it)."""


def _clip(rel: str, run: str, clip: str) -> tuple[str, float, bool]:
    """(cell, error, fell) of a clip of an evaluated run (one rollout: it fell or not)."""
    path = ("runs", run, "imitation", "clips", clip)
    error, fell = at(rel, *path, "err_cm"), at(rel, *path, "fall_rate") > 0
    return clip_error(error, fell), error, fell


@table("methods-check", METHODS_CHECK, METHODS_CHECK_WHOLE_CLIP)
def methods_check() -> list[str]:
    """Every method after 45 minutes: samples, error per clip (the sidestep's pelvis travel where it did not fall),
    MPJPE and success over all clips; the best of each figure column in bold."""
    rows, values = [], []
    for label, rel, run in METHODS_CHECK_ROWS:
        samples = at(rel, "runs", run, "training_samples")
        unit = " transitions" if at(rel, "runs", run, "method") == "fb_cpr" else ""
        row, figures = [label, (millions(samples) + unit) if samples else "0"], [None]
        for kind in DEMO_KINDS:
            cell, error, fell = _clip(rel, run, f"demo_{kind}")
            if kind == "sidestep" and not fell:
                cell += f" ({fixed(at(rel, 'runs', run, 'imitation', 'clips', 'demo_sidestep', 'travel_m'), 2)} m)"
            row.append(cell)
            figures.append(error)
        every = ("runs", run, "imitation", "all")
        row += [fixed(at(rel, *every, "mpjpe_cm")), percent(at(rel, *every, "success_rate"))]
        figures += [at(rel, *every, "mpjpe_cm"), at(rel, *every, "success_rate")]
        rows.append(row)
        values.append([None, *figures])
    bold_best(rows, values, {**{c: min for c in range(2, 8)}, 8: max})
    sidestep = fixed(at(METHODS_CHECK, "runs", "rgsd", "imitation", "clips", "demo_sidestep", "ref_travel_m"), 2)
    header = ["method", "samples in 45 min", "walk", "run", f"sidestep (pelvis travel of {sidestep} m)", "backward",
              "punch", "MPJPE, cm", "success"]  # fmt: skip
    return markdown(header, rows)


# -- Meta Motivo's evaluation latent --------------------------------------------------

FB_TRACKING = f"{RESULTS}/fb_cpr_tracking/tracking_metrics.json"
FB_WHOLE_CLIP = f"{RESULTS}/fb_cpr_tracking/whole_clip_metrics.json"


@table("fb-cpr-latents", FB_TRACKING, FB_WHOLE_CLIP)
def fb_cpr_latents() -> list[str]:
    """One run evaluated with a latent per step and with one per clip: error per clip, over all clips, MPJPE."""
    rows = []
    for label, rel in (("per step (tracking inference, the quick protocol's default)", FB_TRACKING),
                       ("whole clip (B averaged over the clip)", FB_WHOLE_CLIP)):  # fmt: skip
        run = only_run(rel)
        every = ("runs", run, "imitation", "all")
        cells = [_clip(rel, run, f"demo_{k}")[0] for k in DEMO_KINDS]
        rows.append([label, *cells, fixed(at(rel, *every, "err_cm")), fixed(at(rel, *every, "mpjpe_cm"))])
    return markdown(["latent", *DEMO_KINDS, "all clips", "MPJPE, all clips"], rows)


# -- the paper's protocol on 2 CPU cores ----------------------------------------------

REPRODUCE_CPU = f"{RESULTS}/reproduce_cpu/report.json"
"""The 2-core run of the paper's protocol: six methods, one report."""
REPRODUCE_NAMES = {**METHOD_NAMES, "fb_cpr": "Meta Motivo (FB-CPR)"}


def _reproduce_code(method: str) -> str:
    """The commit that wrote ``method``'s seed-0 policy ("not recorded" where no git named it)."""
    recorded = at(REPRODUCE_CPU, "provenance", "policies", method, "0", "rgsd", "git")
    return f"`{recorded}`" if recorded else "not recorded"


@table("reproduce-cpu", REPRODUCE_CPU)
def reproduce_cpu() -> list[str]:
    """The six methods, lowest error first: ERR, ERR to fall with the share played before a fall, and FID over all
    clips (the lowest ERR and FID in bold), the discovery's walk FID, freestyle goal reaching's last success rate, the
    training samples of its 25 minutes and the code that trained it."""
    rel = REPRODUCE_CPU
    found = sorted((at(rel, "imitation", method, "all", "err_cm", "mean"), method) for method in at(rel, "methods"))
    rows, values = [], []
    for err, method in found:
        every = ("imitation", method, "all")
        fid = at(rel, *every, "fid", "mean")
        to_fall = fixed(at(rel, *every, "err_until_fall_cm", "mean"))
        played = percent(at(rel, *every, "played_before_fall", "mean"))
        walk = at(rel, "discovery", "fid", method, "walk", "mean")
        success = at(rel, "downstream", "final", "freestyle", method, "eval/success_rate", "mean")
        rows.append([REPRODUCE_NAMES[method], fixed(err), f"{to_fall} ({played})", fixed(fid, 2), fixed(walk, 2),
                     percent(success), millions(at(rel, "training_samples", method, "0")), _reproduce_code(method)])  # fmt: skip
        values.append([None, err, None, fid, None, None, None, None])
    bold_best(rows, values, {1: min, 3: min})
    walk_fid = f"FID under z ~ vMF(z_m, {at(rel, 'discovery', 'kappa'):g}), walk"
    header = ["method", "ERR (cm)", "ERR to fall (cm; share played before a fall)", "FID", walk_fid,
              "goal reaching, freestyle success", "training samples", "trained by (rgsd commit)"]  # fmt: skip
    return markdown(header, rows)


# -- downstream goal reaching ---------------------------------------------------------

DOWNSTREAM_SHIPPED = f"{RESULTS}/downstream_shipped/evaluations.jsonl"
"""The run's evaluations: each records its iteration and samples, not its time, so the table counts iterations."""
DOWNSTREAM_SHIPPED_START = f"{RESULTS}/downstream_shipped/start_distance.json"
"""The start distance of the run's evaluation episodes (``benchmarks/downstream_start_distance.py``): what a humanoid
that stays at the start ends at, measured apart: the run's evaluations.jsonl has no ``eval/start_distance``."""


@table("downstream-shipped", DOWNSTREAM_SHIPPED, DOWNSTREAM_SHIPPED_START)
def downstream_shipped() -> list[str]:
    """The first evaluation (untrained) beside the last, after the run's iterations as its record has them, and the
    final distance of staying at the start (the same episodes in both columns)."""
    last = len(load(DOWNSTREAM_SHIPPED)) - 1
    iterations = grouped(at(DOWNSTREAM_SHIPPED, last, "iteration"))

    def both(key: str, show: Callable[[float], str]) -> list[str]:
        return [show(at(DOWNSTREAM_SHIPPED, i, key)) for i in (0, last)]

    samples = millions(at(DOWNSTREAM_SHIPPED, last, "step"))
    stay = fixed(at(DOWNSTREAM_SHIPPED_START, "start_distance_m", "mean"), 2)
    rows = [
        ["success rate (within 0.5 m of the goal)", *both("eval/success_rate", percent)],
        ["final distance to the goal (m)", *both("eval/final_distance", lambda v: fixed(v, 2))],
        ["staying at the start: final distance (m)", stay, stay],
        ["fall rate", *both("eval/fall_rate", percent)],
    ]
    return markdown(["", "untrained", f"{iterations} iterations ({samples} high-level samples)"], rows)


DOWNSTREAM_STARTS = (
    ("zero", f"{RESULTS}/downstream_init_skill/zero_evaluations.jsonl"),
    ("style", f"{RESULTS}/downstream_init_skill/style_evaluations.jsonl"),
)
"""``init_skill`` -> the evaluations of the run that started from it."""


@table("downstream-init-skill", *(rel for _, rel in DOWNSTREAM_STARTS), DOWNSTREAM_SHIPPED_START)
def downstream_init_skill() -> list[str]:
    """Each start's first evaluation -> its last; the final distance beside staying at the start, whose figure is the
    shipped run's (the runs played its evaluation episodes: seed 0, the demo preset, goals drawn whatever the
    style)."""
    rows = []
    for start, rel in DOWNSTREAM_STARTS:
        last = len(load(rel)) - 1

        def change(key: str, show: Callable[[float], str], rel: str = rel, last: int = last) -> str:
            return f"{show(at(rel, 0, key))} -> {show(at(rel, last, key))}"

        rows.append([
            f"`{start}`",
            change("eval/style_cosine", lambda v: fixed(v, 2)),
            change("eval/style_fid", lambda v: fixed(v, 2)),
            change("eval/fall_rate", percent),
            change("eval/success_rate", percent),
            change("eval/final_distance", lambda v: fixed(v, 2)),
        ])  # fmt: skip
    stay = fixed(at(DOWNSTREAM_SHIPPED_START, "start_distance_m", "mean"), 2)
    header = ["start", "cosine to the style latent, untrained -> trained", "style FID, untrained -> trained",
              "falls, untrained -> trained", "success, untrained -> trained",
              f"final distance (m; staying at the start: {stay}), untrained -> trained"]  # fmt: skip
    return markdown(header, rows)


# -- clip scaling ---------------------------------------------------------------------

CLIP_SCALING = f"{RESULTS}/clip_scaling.json"
CLIP_SCALING_SCRIPT = ROOT / "benchmarks" / "clip_scaling.py"


@table("clip-scaling", CLIP_SCALING)
def clip_scaling() -> list[str]:
    """The table ``benchmarks/clip_scaling.py --reprint FILE --markdown`` prints (its ``markdown_table``)."""
    name = "rgsd_benchmark_clip_scaling"
    if name not in sys.modules:  # a script, not a package: loaded from its file (its dataclasses need the entry)
        spec = importlib.util.spec_from_file_location(name, CLIP_SCALING_SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].markdown_table(load(CLIP_SCALING)).splitlines()


# -- throughput on 2 CPU cores --------------------------------------------------------

CORES2 = f"{RESULTS}/throughput_2core"
SIM_STEP = f"{CORES2}/sim_step.txt"
ENV_THROUGHPUT = f"{CORES2}/env_throughput.txt"
TRAIN_DEMO = f"{CORES2}/train_throughput_demo.txt"
TRAIN_CPU = f"{CORES2}/train_throughput_cpu.txt"
PRETRAIN = f"{CORES2}/pretrain.txt"
HOST_READS = f"{CORES2}/host_reads.txt"
EVAL_ROLLOUTS = f"{CORES2}/eval_rollouts.json"
NUMBER_WORDS = dict(enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")))
"""Small counts as the table's sentences write them."""
ENV_WORLDS = 64
"""The world count of ``env_throughput.txt`` whose rows the table quotes."""


def _sim_step() -> list[str]:
    model = r"^{}\D*\s(\d+)\s+\d+\s.*\s(\d+)\s+[\d.]+$"  # the model's name, nv, nu ... steps/s, us/step
    ours = match(SIM_STEP, model.format(re.escape("rgsd SMPL humanoid")))
    gym = match(SIM_STEP, model.format(re.escape("Gymnasium Humanoid-v5")))
    ratio = match(SIM_STEP, r"ratio ours / Humanoid-v5 \(steps/s\): ([\d.]+)").group(1)
    seconds = match(SIM_STEP, r"simulated seconds per wall second: ours ([\d.]+), Humanoid-v5 ([\d.]+)")
    dt = match(SIM_STEP, r"at dt = ([\d/]+) s").group(1)
    solver = match(SIM_STEP, r"^\s+constraint solver\s+([\d.]+) %$").group(1)
    position = match(SIM_STEP, r"^\s+position .*?\s([\d.]+) %$").group(1)
    return [
        f"`python benchmarks/sim_step.py`: one `mj_step`, rgsd's humanoid ({ours.group(1)} DoF) against "
        f"Gymnasium's Humanoid-v5 ({gym.group(1)} DoF)",
        f"{thousands(float(ours.group(2)))} against {thousands(float(gym.group(2)))} steps/s ({ratio}x per step; "
        f"{seconds.group(1)} against {seconds.group(2)} simulated seconds per second thanks to the {dt} s step); the "
        f"constraint solver is {solver} % of a step, the position stage {position} %",
    ]


def _env_throughput() -> list[str]:
    def row(threads: int) -> re.Match[str]:
        rates = r"\s*\|\s*(\d+)\s+\d+\s+\d+\s*\|\s*([\d.]+)\s+[\d.]+\s+([\d.]+)\s*\|"
        return match(ENV_THROUGHPUT, rf"^\s*{ENV_WORLDS}\s+{threads}{rates}")

    two, one = row(2), row(1)
    speedup = match(ENV_THROUGHPUT, rf"^\s*N=\s*{ENV_WORLDS}: ([\d.]+)x$").group(1)
    return [
        f"`python benchmarks/env_throughput.py`: env steps/s, N = {ENV_WORLDS} worlds",
        f"2 threads: {grouped(float(two.group(1)))}/s, {two.group(2)} of the physics alone; 1 thread: "
        f"{grouped(float(one.group(1)))}/s, {one.group(2)}; {speedup}x from 1 to 2 threads; physics, state read and "
        f"features alone (`floor`): {two.group(3)} with 2 threads, {one.group(3)} with 1",
    ]


def _train_loop(rel: str) -> tuple[str, str]:
    """(samples/s with thousands commas, the cores kept busy "1.51 of 2") of a ``train_throughput.py`` output."""
    rate = grouped(number(rel, r"^ours \(full loop\)\s+(\d+) samples/s"))
    return rate, match(rel, r"^cores kept busy\s+([\d.]+ of \d+)$").group(1)


def _train_throughput() -> list[list[str]]:
    demo_rate, demo_busy = _train_loop(TRAIN_DEMO)
    cpu_rate, _ = _train_loop(TRAIN_CPU)
    mujoco = match(TRAIN_DEMO, r"of which MuJoCo stepping\s+([\d.]+) %").group(1)
    over_env = match(TRAIN_CPU, r"ours / env = ([\d.]+)").group(1)
    ours = match(TRAIN_CPU, r"^sb3 PPO, our settings\s.*ours / sb3 = ([\d.]+)").group(1)
    defaults = match(TRAIN_CPU, r"^sb3 PPO, SB3's minibatch (\d+) and (\d+) epochs\s.*ours / sb3 = ([\d.]+)")
    return [
        [
            "`python benchmarks/train_throughput.py --config demo --no-sb3`: the demo loop",
            f"{demo_rate} samples/s; {demo_busy} cores busy; MuJoCo {mujoco} % of the loop",
        ],
        [
            "`python benchmarks/train_throughput.py`: the `cpu` preset's loop",
            f"{cpu_rate} samples/s, {over_env} of the env alone; {ours}x stable-baselines3 at equal settings, "
            f"{defaults.group(3)}x at SB3's defaults (minibatch {defaults.group(1)}, {defaults.group(2)} epochs)",
        ],
    ]


def _pretrain() -> list[str]:
    clips = match(PRETRAIN, r"^(\d+) demo \+ (\d+) real clips")
    reached = match(PRETRAIN, r"reached ([\d.]+) in ([\d.]+) s training .*?, (\d+) steps")
    return [
        f"`python benchmarks/pretrain.py`: the paper's encoder on {int(clips.group(1)) + int(clips.group(2))} clips "
        f"to alignment {reached.group(1)}",
        f"{reached.group(2)} s ({reached.group(3)} steps)",
    ]


def _host_reads() -> list[str]:
    def backend(name: str) -> re.Match[str]:
        return match(HOST_READS, rf"^{name}\s+([\d.]+)\s+([\d.]+)\s+\d+\s+([\d.]+)\s")

    warp, mujoco = backend("warp"), backend("mujoco")
    # the reads mujoco adds per step, over the share of steps that restart a world: the conversions per such step
    extra = round((float(mujoco.group(1)) - float(warp.group(1))) / float(mujoco.group(3)))
    return [
        "`python benchmarks/host_reads.py`: host reads per env step of `rgsd train`",
        f"warp {warp.group(1)} (rollout alone {warp.group(2)}); mujoco {mujoco.group(1)}: warp's count plus "
        f"{NUMBER_WORDS.get(extra, str(extra))} numpy conversions of CPU tensors in each step that restarts a world "
        f"({mujoco.group(3)} of the steps)",
    ]


def _eval_rollouts() -> list[str]:
    r = load(EVAL_ROLLOUTS)
    old, new = r["every_world"], r["running_worlds"]
    work = r["batch_step_work"]
    same = "identical rollouts" if r["identical_results"] else "rollouts that differ"

    def each(key: str) -> str:
        return "/".join(f"{w[key]:.1f}" if key != "worlds" else str(w[key]) for w in work)

    return [
        "`python benchmarks/eval_rollouts.py`: `rgsd eval`'s rollouts stepping only the running jobs' worlds, against "
        "every world",
        f"{r['clips']} clips x {r['jobs'] // r['clips']} rollouts: {new['seconds']:g} against {old['seconds']:g} s "
        f"({r['speedup']:g}x), {new['world_steps']:,} against {old['world_steps']:,} world steps, {same}; a batch "
        f"step's own work {each('work')} world steps at {each('worlds')} worlds (the estimate's {each('estimate')})",
    ]


@table("throughput-2core", SIM_STEP, ENV_THROUGHPUT, TRAIN_DEMO, TRAIN_CPU, PRETRAIN, HOST_READS, EVAL_ROLLOUTS)
def throughput_2core() -> list[str]:
    """One row per benchmark: its command and what its committed output says."""
    rows = [_sim_step(), _env_throughput(), *_train_throughput(), _pretrain(), _host_reads(), _eval_rollouts()]
    return markdown(["benchmark", "result"], rows)


# -- the simulator's timestep and armature --------------------------------------------

TIMESTEP_CHOICE = f"{RESULTS}/simulator/timestep_choice.txt"
TIMESTEP_ROWS = (("1/60", 0.0), ("1/60", 1.0), ("1/60", 2.0), ("1/120", 2.0), ("1/240", 2.0))
"""The (timestep, armature factor) settings the design page compares."""
SETTING = re.compile(
    r"^\s*(?P<dt>1/\d+)\s+(?P<factor>[\d.]+) \|\s*(?P<stand>[\d.]+)\s+[\d.]+\s+[\d.]+ \|"
    r"\s*(?P<demo_min>[\d.]+)\s+[\d.]+ \|\s*(?P<real_mean>[\d.]+)\s+[\d.]+ \|\s*\d+\s+[\d.]+ \|"
    r"\s*(?P<blowups>[\d.]+)\s+\d+ \|\s*(?P<us>\d+)$",
    flags=re.M,
)
"""A row of ``timestep_choice.py``'s per-setting table (its columns: see the file's legend)."""


def significant(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures, without an exponent or trailing zeros: 505.3 -> "505"."""
    return f"{float(f'{value:.{digits}g}'):g}"


@table("timestep-choice", TIMESTEP_CHOICE)
def timestep_choice() -> list[str]:
    """Each compared setting in the first of the file's runs, its time per control step over all its runs; the
    setting the file chose in bold."""
    runs = re.split(r"^== run .*$", load(TIMESTEP_CHOICE), flags=re.M)[1:]
    settings = [{(m["dt"], float(m["factor"])): m for m in SETTING.finditer(run)} for run in runs]
    choice = match(TIMESTEP_CHOICE, r"^choice: timestep (1/\d+) s, armature factor ([\d.]+)")
    standing = number(TIMESTEP_CHOICE, r"stand = rest pose ([\d.]+) s")  # held: upright the whole test
    rows = []
    for dt, factor in TIMESTEP_ROWS:
        if any((dt, factor) not in run for run in settings):
            raise SourceError(f"{TIMESTEP_CHOICE}: no row for dt {dt}, factor {factor} in each of its runs")
        first = settings[0][(dt, factor)]
        stand = float(first["stand"])
        times = [int(run[(dt, factor)]["us"]) for run in settings]
        row = [dt, f"{factor:g}", "held" if stand >= standing else f"falls at {stand:.1f} s", first["demo_min"],
               first["real_mean"], significant(float(first["blowups"])), span(str(min(times)), str(max(times)))]  # fmt: skip
        rows.append([bold(c) for c in row] if (dt, factor) == (choice[1], float(choice[2])) else row)
    header = ["dt", "c", f"standing {standing:g} s", "demo replay, shortest upright (s)", "real replay, mean upright (s)",
              "blow-ups / 1000 random steps", f"us / control step, {len(runs)} runs"]  # fmt: skip
    return markdown(header, rows)
