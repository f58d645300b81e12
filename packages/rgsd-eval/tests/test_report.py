"""The report from fabricated runs: files, the paper-style table, the tracking metrics, the paper's ERR beside ours
and its FID only as a ranking, CSV/JSON agreeing with the tables, runs side by side."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from rgsd_envs.utils.config import load_yaml
from rgsd_eval.config import EvalConfig
from rgsd_eval.paper import FID_NOT_COMPARABLE, PAPER_IMITATION
from rgsd_eval.pipeline import run_evaluation
from rgsd_eval.testing import make_fake_run

CATEGORIES = ("walk", "run", "sidestep", "backward", "punch")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    rgsd = make_fake_run(root / "rgsd", seed=0)
    diayn = make_fake_run(root / "diayn", seed=1, p_imitation=0.0, encoder_init="random")
    cfg = EvalConfig(
        rollouts=3, kappas=(20.0, 1000.0), best_of=4, video_clips=1, video_variants=2,
        video_size=(64, 48), video_frame_step=6, progress=False,
    )  # fmt: skip
    out = root / "report"
    paths = run_evaluation([rgsd, diayn], "demo", out, cfg)
    return {
        "out": out,
        "paths": paths,
        "md": paths["report"].read_text(),
        "json": json.loads(paths["json"].read_text()),
        "csv": list(csv.DictReader(paths["csv"].open())),
        "cfg": cfg,
    }


def _main_table(md: str) -> dict[str, dict[str, str]]:
    """The imitation table as {run: {column: cell}}."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Run | Method | Walk ERR"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def _table_after(md: str, prefix: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the first table whose header line starts with ``prefix``."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(prefix))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return header, rows


def test_table_names_each_run_s_method_and_sets_the_paper_s_err_beside_ours_with_frame_and_rollouts(report):
    table = _main_table(report["md"])
    assert [row["Method"] for row in table.values()] == ["rgsd", "diayn"]
    assert report["json"]["runs"]["diayn"]["method"] == "diayn"
    header, rows = _table_after(report["md"], "| Source | Method | Frame | Rollouts per clip | Walk ERR")
    assert [r[:4] for r in rows] == [
        ["rgsd (ours)", "rgsd", "world", "1"],
        ["diayn (ours)", "diayn", "world", "1"],
        ["paper (quoted)", "RGSD", "not stated", "500"],
        ["paper (quoted)", "DIAYN", "not stated", "500"],
    ]
    assert rows[2][4:] == ["7.4", "7.7", "6.7", "6.7", "7.7"]  # the paper's ERR (rgsd_eval.paper)
    assert float(rows[0][4]) == pytest.approx(
        report["json"]["runs"]["rgsd"]["imitation"]["categories"]["walk"]["err_cm"], abs=0.05
    )
    lines = report["md"].splitlines()
    intro = lines[lines.index("| " + " | ".join(header) + " |") - 2]
    assert "quoted, not measured here" in intro and "no action noise" in intro


def test_the_paper_s_fid_appears_only_as_a_ranking_with_the_reason(report):
    md = report["md"]
    for method in ("rgsd", "diayn"):  # no FID value of the paper, in any category
        for _, fid in PAPER_IMITATION[method].values():
            assert f"| {fid:.1f} |" not in md and f"| {fid:.2f} |" not in md, fid
    assert FID_NOT_COMPARABLE in md
    _, rows = _table_after(md, "| Method | Walk FID rank")
    ranks = {r[0]: r[1:] for r in rows}
    assert set(ranks) == {"rgsd", "diayn"}
    assert all(cell.endswith(" / 1") for cell in ranks["rgsd"])  # the paper's RGSD has the lower FID of the two
    assert all(cell.endswith(" / 2") for cell in ranks["diayn"])
    paper = report["json"]["paper"]
    assert paper["fid_rank"]["rgsd"]["walk"] == 1 and paper["err_cm"]["rgsd"]["walk"] == 7.4
    assert "fid" not in json.dumps(paper["err_cm"])


def test_every_report_carries_how_it_differs_from_the_paper(report):
    md = report["md"]
    box = md[md.index("## How this run differs from the paper") :].split("\n## ", 1)[0]
    for item, paper in (("simulator", "Isaac Gym"), ("clips", "20 ACCAD"), ("training budget", "not stated"),
                        ("rollouts per clip", "500"), ("FID feature", "not defined")):  # fmt: skip
        row = next(line for line in box.splitlines() if line.startswith(f"| {item} |"))
        assert paper in row, item
    assert "| simulator | MuJoCo |" in box and "5 clips from `demo`" in box
    assert "rgsd: not recorded" in box  # fabricated runs record no training samples
    assert "| discovery motions | none (no discovery_kappa) |" in box and '"three out of four motions"' in box
    assert "of 2 to 5 s" in box  # the paper's clip lengths
    row = next(line for line in box.splitlines() if line.startswith("| ERR frame |"))
    assert "whenever the robot fell, the episode was terminated" in row and "ERR to fall" in row
    assert "deviates from the reference motion beyond a specified threshold" in row and "Section 4.2" in row
    assert "ERR to deviation" in row
    assert "evaluation trajectories ended at a fall or on deviation is not stated" in row
    # each method's clip latent from the rule its runs recorded, beside the paper's one latent per motion
    row = next(line for line in box.splitlines() if line.startswith("| clip latent |"))
    assert "rgsd: z_m, its encoder's embedding of the clip; diayn: the best of 4 uniform latents by ERR |" in row
    assert "one per motion (Section 5.1)" in row and "best of 500" in row


def test_the_clip_latent_row_follows_each_run_s_recorded_rule():
    from rgsd_eval.report import clip_latent_text

    runs = [
        ("calm", {"latent": "stored", "clip_latents_rule": "the encoding of the clip's first window"}),
        ("fb_cpr", {"latent": "stored", "clip_latents_rule": "B averaged over the clip"}),
        ("fb_cpr", {"latent": "tracking"}),  # another seed evaluated otherwise: both named
        ("ase", {"latent": "best-of-500"}),
        ("ase", {"latent": "best-of-500"}),
        ("old", {"latent": "stored"}),  # a method.json that does not say what it stored
    ]
    assert clip_latent_text(runs) == (
        "calm: the encoding of the clip's first window; fb_cpr: B averaged over the clip / a latent per step (its "
        "tracking inference), not one per motion; ase: the best of 500 uniform latents by ERR; old: the latent it "
        "stored per clip (clip_latents.json)"
    )


def test_tracking_metrics_per_category_agree_with_the_json(report):
    header, rows = _table_after(report["md"], "| Run | Method | Category | Rollouts | ERR, world (cm) | MPJPE (cm)")
    assert header[-4:] == ["Global MPJPE, successful (cm)", "Success rate", "Fall rate", "Played before a fall"]
    assert len(rows) == 2 * (len(CATEGORIES) + 1)
    for r in rows:
        run, cat = r[0], r[2]
        im = report["json"]["runs"][run]["imitation"]
        v = im["all"] if cat == "all" else im["categories"][cat]
        cells = dict(zip(header, r))
        assert float(cells["ERR, world (cm)"]) == pytest.approx(v["err_cm"], abs=0.05 + 1e-9)
        assert float(cells["MPJPE (cm)"]) == pytest.approx(v["mpjpe_cm"], abs=0.05 + 1e-9)
        assert 0 < v["mpjpe_cm"] < v["err_cm"]  # the random policies drift: the root offset adds to ERR
        assert float(cells["Success rate"]) == pytest.approx(v["success_rate"], abs=0.005 + 1e-9)
        assert float(cells["Fall rate"]) == pytest.approx(v["fall_rate"], abs=0.005 + 1e-9)
        assert float(cells["Played before a fall"]) == pytest.approx(v["played_before_fall"], abs=0.005 + 1e-9)
        assert (v["played_before_fall"] == 1.0) == (v["fall_rate"] == 0.0)  # short of 1 exactly where one fell
        expected = "n/a" if v["global_mpjpe_succ_cm"] is None else f"{v['global_mpjpe_succ_cm']:.1f}"
        assert cells["Global MPJPE, successful (cm)"] == expected
    assert set(report["json"]["metric_definitions"]) >= {
        "err_cm",
        "mpjpe_cm",
        "global_mpjpe_succ_cm",
        "success_rate",
        "fall_rate",
    }


def test_each_run_s_clip_latents_are_written_for_downstream(report):
    diayn = json.loads((report["out"] / "diayn" / "clip_latents.json").read_text())
    assert list(diayn) == ["demo_walk", "demo_run", "demo_sidestep", "demo_backward", "demo_punch"]
    assert all(abs(np.linalg.norm(z) - 1.0) < 1e-6 for z in diayn.values())
    assert diayn == report["json"]["runs"]["diayn"]["clip_latents"]


def test_report_files_exist(report):
    out = report["out"]
    for name in ("report.md", "metrics.json", "metrics.csv", "eval_config.yaml", "spread.png", "comparison.png"):
        assert (out / name).stat().st_size > 0, name
    for run in ("rgsd", "diayn"):
        for fig in ("trajectories.png", "kappa_sweep.png", "embedding.png", "embeddings_cosine.png"):
            assert (out / run / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        videos = sorted(p.name for p in (out / run / "videos").iterdir())
        assert videos == ["demo_walk_imitation.mp4", "demo_walk_replay.html", "demo_walk_variants_k20.mp4"]
        assert all((out / run / "videos" / v).stat().st_size > 1000 for v in videos)
        replay = (out / run / "videos" / "demo_walk_replay.html").read_text()
        assert replay.count('"ghost":true') == 1 and replay.count('"ghost":false') == 1 + report["cfg"].video_variants
    assert not list(out.rglob("*.tmp"))
    assert load_yaml(EvalConfig, out / "eval_config.yaml") == report["cfg"]  # the settings load back
    # everything linked from the report exists
    links = [part.split(")")[0] for part in report["md"].split("](")[1:]]
    assert len(links) >= 12
    assert all((out / link).is_file() for link in links), links


def test_the_report_records_the_code_and_library_versions_that_made_it(report):
    from importlib.metadata import version

    from rgsd_envs.utils.provenance import provenance, provenance_text

    recorded = report["json"]["provenance"]
    assert recorded == provenance()
    assert recorded["packages"]["torch"] == version("torch") and recorded["packages"]["mujoco"] == version("mujoco")
    assert f"- Code: {provenance_text(recorded)} (`provenance` in `metrics.json`)." in report["md"]
    assert provenance_text(recorded).startswith(f"rgsd {version('rgsd-eval')}")
    # the fabricated policies carry no provenance: what wrote them is said to be unknown, not guessed
    assert [report["json"]["runs"][r]["policy_provenance"] for r in ("rgsd", "diayn")] == [None, None]
    assert "- Policy of rgsd written by: not recorded (`policy_provenance`;" in report["md"]


def test_table_has_every_category_and_both_runs_side_by_side(report):
    table = _main_table(report["md"])
    assert list(table) == ["rgsd", "diayn"]
    for cat in CATEGORIES:
        for run in table.values():
            assert float(run[f"{cat.capitalize()} ERR"]) > 0
            assert float(run[f"{cat.capitalize()} FID"]) > 0
    doc = report["json"]
    assert doc["categories"] == list(CATEGORIES)
    assert doc["runs"]["rgsd"]["latent"] == "encoder"
    assert doc["runs"]["diayn"]["latent"] == "best-of-4"


def test_json_numbers_agree_with_the_table(report):
    table = _main_table(report["md"])
    for run, row in table.items():
        im = report["json"]["runs"][run]["imitation"]
        for cat in CATEGORIES:
            v = im["categories"][cat]
            assert float(row[f"{cat.capitalize()} ERR"]) == pytest.approx(v["err_cm"], abs=0.05 + 1e-9)
            assert float(row[f"{cat.capitalize()} FID"]) == pytest.approx(v["fid"], abs=0.005 + 1e-9)
            assert v["rollouts"] == 1 and v["clips"] == 1
        assert float(row["All ERR"]) == pytest.approx(im["all"]["err_cm"], abs=0.05 + 1e-9)
        # ERR to fall beside ERR: the same aggregation, over each rollout's frames up to its first fall
        for cat in CATEGORIES:
            v = im["categories"][cat]
            assert float(row[f"{cat.capitalize()} ERR to fall"]) == pytest.approx(v["err_until_fall_cm"], abs=0.05)
        assert float(row["All ERR to fall"]) == pytest.approx(im["all"]["err_until_fall_cm"], abs=0.05 + 1e-9)
        assert im["all"]["err_until_fall_cm"] == pytest.approx(
            np.mean([c["err_until_fall_cm"] for c in im["clips"].values()])
        )
        for c in im["clips"].values():  # a clip whose rollout never fell scores its whole-clip ERR
            if c["fall_rate"] == 0:
                assert c["err_until_fall_cm"] == pytest.approx(c["err_cm"])
        # ERR to deviation: the same again, up to the first frame past the deviation threshold
        for cat in CATEGORIES:
            v = im["categories"][cat]
            assert float(row[f"{cat.capitalize()} ERR to deviation"]) == pytest.approx(
                v["err_until_deviation_cm"], abs=0.05
            )
        assert im["all"]["err_until_deviation_cm"] == pytest.approx(
            np.mean([c["err_until_deviation_cm"] for c in im["clips"].values()])
        )
        for c in im["clips"].values():  # never past 0.5 m (a success): its whole-clip ERR
            if c["success_rate"] == 1:
                assert c["err_until_deviation_cm"] == pytest.approx(c["err_cm"])
        # a category's ERR is the mean of its clips' ERR; all clips' ERR the mean over clips
        clips = im["clips"]
        assert im["all"]["err_cm"] == pytest.approx(np.mean([c["err_cm"] for c in clips.values()]))
        assert im["all"]["rollouts"] == 5


def test_a_clip_of_one_rollout_has_no_err_spread(report):
    """One imitation rollout per clip (no action noise): its ERR std is None in the JSON and "-" in the table."""
    header, rows = _table_after(report["md"], "| Run | Clip | Category | Rollouts")
    assert rows and all(r[header.index("Rollouts")] == "1" and r[header.index("ERR std")] == "-" for r in rows)
    for m in report["json"]["runs"].values():
        assert all(c["err_cm_std"] is None for c in m["imitation"]["clips"].values())


def test_csv_holds_the_same_numbers_as_the_json(report):
    rows = report["csv"]
    doc = report["json"]["runs"]
    got = {(r["run"], r["section"], r["kappa"], r["scope"], r["name"], r["metric"]): r["value"] for r in rows}
    checked = 0
    for run, m in doc.items():
        for cat, v in m["imitation"]["categories"].items():
            for metric in ("err_cm", "err_until_fall_cm", "fid", "rollouts", "fall_rate", "mpjpe_cm", "success_rate"):
                assert float(got[(run, "imitation", "", "category", cat, metric)]) == pytest.approx(v[metric])
                checked += 1
        for key, d in m["diversity"].items():
            for clip, v in d["clips"].items():
                assert float(got[(run, "diversity", key, "clip", clip, "root_spread_m")]) == pytest.approx(
                    v["root_spread_m"]
                )
                checked += 1
    assert checked == 2 * 5 * 7 + 2 * 2 * 5
    assert {r["section"] for r in rows if r["run"] == "diayn"} == {"run", "imitation", "diversity", "search"}


def test_the_diversity_table_names_each_run_s_skill_dim_beside_its_latent_angle(report):
    header, rows = _table_after(report["md"], "| Run | Skill dim | κ | Role |")
    assert header[header.index("Latent angle (deg)")] and len(rows) == 4
    for r in rows:
        assert r[1] == "16" == str(report["json"]["runs"][r[0]]["skill_dim"])
        angle = report["json"]["runs"][r[0]]["diversity"][r[2]]["mean"]["latent_angle_deg"]
        assert float(r[header.index("Latent angle (deg)")]) == pytest.approx(angle, abs=0.05 + 1e-9)


def test_unstable_rollouts_are_counted_where_any_occurred():
    from types import SimpleNamespace

    from rgsd_eval.report import unstable_text

    def run(label: str, unstable: int) -> SimpleNamespace:
        return SimpleNamespace(label=label, metrics={"imitation": {"all": {"rollouts": 40, "unstable": unstable}}})

    assert unstable_text([run("a", 0)]) == ""
    text = unstable_text([run("a", 0), run("b", 3)])
    assert "b 37/40" in text and "a " not in text.split(":")[1] and "drops out of the means" in text


def test_diversity_numbers(report):
    for run in ("rgsd", "diayn"):
        div = report["json"]["runs"][run]["diversity"]
        assert set(div) == {"20", "1000"}
        assert div["20"]["mean"]["latent_angle_deg"] > 3 * div["1000"]["mean"]["latent_angle_deg"]
        assert div["20"]["mean"]["rollouts"] == 15
        for d in div.values():
            for v in d["clips"].values():
                assert v["rollouts"] == 3 and v["root_spread_m"] >= 0 and v["fid"] > 0


def test_best_of_n_latent_is_the_one_evaluated(report):
    m = report["json"]["runs"]["diayn"]
    for clip, s in m["search"].items():
        assert s["candidates"] == 4 and s["best_err_cm"] <= s["median_err_cm"]
        # the deterministic policy repeats the search rollout of the chosen latent exactly
        assert m["imitation"]["clips"][clip]["err_cm"] == pytest.approx(s["best_err_cm"], rel=1e-6)
    assert "search" not in report["json"]["runs"]["rgsd"]


def test_report_shows_the_clip_cosine_matrix_below_the_embedding_figure(report):
    md = report["md"]
    section = md[md.index("## Embeddings") :]
    for run in ("rgsd", "diayn"):
        pca = section.index(f"]({run}/embedding.png)")
        assert section.index(f"]({run}/embeddings_cosine.png)") > pca


def test_the_protocol_line_counts_the_sweep_clips_the_motions_have():
    from rgsd_eval.report import protocol_line

    line = protocol_line(EvalConfig.for_protocol("paper"), ["walk", "kick"])
    assert "κ sweep 20, 100, 1000 on 2 clips;" in line


def test_clips_without_an_fid_are_named_up_to_a_few_and_counted_past_them():
    """The warning named every short clip with its path on one line (1000 clips: one line of 1000 paths)."""
    from rgsd_eval.report import UNSCORED_EXAMPLES, unscored_fid_text

    clips = [{"name": f"hop{i:03d}", "frames": 10, "file": f"/clips/hop{i:03d}.npz"} for i in range(200)]
    text = unscored_fid_text(clips, 15)
    assert text.startswith("FID not measured on 200 clip(s) shorter than 16 frames")
    named = [c["name"] for c in clips if c["name"] in text]
    assert named == [f"hop{i:03d}" for i in range(UNSCORED_EXAMPLES)]
    assert f"and {200 - UNSCORED_EXAMPLES} more (every one in metrics.json, fid_feature.unscored_clips)" in text
    assert "more (every one" not in unscored_fid_text(clips[:UNSCORED_EXAMPLES], 15)


def test_the_fid_feature_definition_follows_the_window_evaluated():
    """--set fid_window=9 left the definition saying 0.5 s windows of 15 frames."""
    from rgsd_eval.features import FEATURE_BODIES, FEATURE_DIM
    from rgsd_eval.report import ReportInputs, metrics_document

    inputs = ReportInputs(
        motions="demo", clips=[], categories=[], config=EvalConfig(fid_window=9), runs=[], artifacts={}
    )
    feature = metrics_document(inputs)["fid_feature"]
    assert feature["window"] == 9
    text = feature["definition"]
    assert "0.3 s windows (9 frames, stride 1)" in text and "15 frames" not in text
    assert f"{len(FEATURE_BODIES)} bodies'" in text and f"({FEATURE_DIM} numbers;" in text
    assert (
        "0.5 s windows (15 frames, stride 1)"
        in metrics_document(
            ReportInputs(motions="demo", clips=[], categories=[], config=EvalConfig(), runs=[], artifacts={})
        )["fid_feature"]["definition"]
    )
