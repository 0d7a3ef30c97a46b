"""scripts/bench_partial_registration.py: its binning and summaries on hand-made rows (known answers), and
one tiny run (one val apartment at 64 px, gt, two route fractions)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import load_script

bench = load_script("bench_partial_registration")


def row(profile: str, level: str, fraction: float, seen: float, err: float, terr: float | None = None, ok=True):
    terr = err if terr is None else terr
    return {
        "scene": 800000,
        "profile": profile,
        "level": level,
        "fraction": fraction,
        "seen_fraction": seen,
        "error_m": err,
        "success": err <= bench.SUCCESS_M,
        "trajectory_error_m": terr,
        "success_trajectory": terr <= bench.SUCCESS_M,
        "memory_drift_m": 0.0,
        "ok": ok,
        "confidence": 0.9,
        "score": 0.8,
        "seconds": 0.5,
    }


def test_seen_bins():
    assert bench.seen_bin(0.0) == "0.0-0.2"
    assert bench.seen_bin(0.2) == "0.2-0.4"  # [lo, hi)
    assert bench.seen_bin(0.79) == "0.6-0.8"
    assert bench.seen_bin(1.0) == "0.8-1.0"  # the last bin is closed
    with pytest.raises(ValueError):
        bench.seen_bin(1.2)


def test_summaries_of_hand_made_rows():
    rows = [
        row("gt", "hard", 0.1, 0.15, 0.05),
        row("gt", "hard", 0.1, 0.25, 0.41, terr=0.11, ok=False),
        row("gt", "hard", 1.0, 0.95, 0.02),
        row("gt", "easy", 0.1, 0.25, 0.30, ok=True),
        row("harsh", "hard", 1.0, 0.9, 0.6, terr=0.05),
    ]
    by_f = bench.summarise(rows, "fraction")
    assert list(by_f) == ["gt", "harsh"] and list(by_f["gt"]) == ["easy", "hard"]  # LEVELS order
    c = by_f["gt"]["hard"]["0.1"]
    assert (c["n"], c["successes"], c["successes_trajectory"]) == (2, 1, 2)
    assert c["error_m_median"] == pytest.approx(0.23) and c["ok_rate"] == 0.5
    assert c["precision_when_ok"] == 1.0
    assert by_f["gt"]["easy"]["0.1"]["precision_when_ok"] == 0.0  # ok but wrong
    assert list(by_f["gt"]["hard"]) == ["0.1", "1"]
    assert by_f["harsh"]["hard"]["1"]["success_rate"] == 0.0
    assert by_f["harsh"]["hard"]["1"]["success_rate_trajectory"] == 1.0
    by_s = bench.summarise(rows, "seen")
    assert list(by_s["gt"]["hard"]) == ["0.0-0.2", "0.2-0.4", "0.8-1.0"]
    assert by_s["gt"]["hard"]["0.2-0.4"]["success_rate"] == 0.0
    assert by_s["gt"]["hard"]["0.0-0.2"]["seen_fraction_median"] == 0.15
    md = bench.table(by_f, "route").splitlines()
    assert md[0] == "| profile | level | route 0.1 | route 1 |"
    assert md[3] == "| gt | hard | 1/2 · 2/2 (23 · 8 cm) | 1/1 · 1/1 (2 · 2 cm) |"
    assert md[2].endswith("| - |")  # gt easy has no full-route row
    with pytest.raises(ValueError):
        bench.summarise(rows, "level")


def test_floor_and_seen_fraction_of_an_empty_memory():
    from types import SimpleNamespace

    from spatial_memory import SpatialMemory

    square = SimpleNamespace(polygon=np.array([[0.0, 0.0], [2.0, 0.0], [2.0, 1.0], [0.0, 1.0]]))
    truth = SimpleNamespace(bounds=(-1.0, -1.0, 3.0, 2.0), rooms=(square,))
    floor = bench.floor_cells(truth)
    assert len(floor) == 20 * 10 and floor.min() > 0 and floor[:, 0].max() < 2  # 0.1 m cells inside the room
    assert bench.seen_fraction(SpatialMemory(0.05), floor, np.eye(4)) == 0.0


def test_tiny_run(tmp_path):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    args = ["--scenes", "1", "--perception", "gt", "--fractions", "0.5,1", "--size", "64", "--no-meshes", "--quiet"]
    bench.main([*args, "--out", str(out), "--plot", str(png)])
    res = json.loads(out.read_text())
    assert res["seeds"] == [800000] and res["profiles"] == ["gt"] and png.stat().st_size > 0
    assert len(res["rows"]) == 2 * 3
    assert set(res["summary_by_fraction"]["gt"]) == {"easy", "medium", "hard"}
    assert set(res["summary_by_fraction"]["gt"]["hard"]) == {"0.5", "1"}
    rows = {(r["fraction"], r["level"]): r for r in res["rows"]}
    assert 0 < rows[(0.5, "hard")]["seen_fraction"] < rows[(1.0, "hard")]["seen_fraction"] <= 1
    assert rows[(1.0, "hard")]["seen_fraction"] > 0.8
    for level in ("medium", "hard"):  # the whole route's gt memory registers
        r = rows[(1.0, level)]
        assert r["success"] and r["ok"] and r["error_m"] <= 0.15, r
    with pytest.raises(SystemExit):  # the test split is not for this benchmark
        bench.main(["--first-seed", "900000", "--scenes", "1", "--quiet"])
