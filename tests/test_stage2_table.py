"""analyses/stage2_table.py: the counts it reads from a proof's directories and its intervals."""

import json

import pytest

from tests.conftest import load_script


def _summary(path, k, n, complete=True):
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps({"successes": k, "episodes": n, "complete": complete}))


def test_wilson_intervals_match_the_textbook_values():
    w = load_script("stage2_table").wilson
    assert w(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)  # the "rule of three"-like upper bound at n=10
    assert w(9, 10) == pytest.approx((0.5958, 0.9821), abs=1e-4)
    assert w(44, 50) == pytest.approx((0.7619, 0.9438), abs=1e-4)
    lo, hi = w(25, 50)
    assert lo + hi == pytest.approx(1.0)  # symmetric about 0.5


def test_arms_from_directories_and_from_recorded_counts(tmp_path, capsys):
    s = load_script("stage2_table")
    root = tmp_path / "arm"
    _summary(root / "val" / "step_500-chunk", 1, 10)
    _summary(root / "val" / "step_1000-chunk", 3, 10, complete=False)  # still running: not a result
    _summary(root / "test", 40, 50)
    name, val, test, _ = s.read_arm(f"tuned={root}")
    assert (name, val, test) == ("tuned", {500: (1, 10)}, (40, 50))
    name, val, test, src = s.read_arm("scratch=500:4/10,1000:6/10;test=44/50")
    assert (val, test, src) == ({500: (4, 10), 1000: (6, 10)}, (44, 50), "as recorded")
    with pytest.raises(ValueError):
        s.read_arm("scratch=500:4")
    assert s.main(["--arm", f"tuned={root}", "--arm", "scratch=500:4/10,1000:6/10;test=44/50"]) == 0
    out = capsys.readouterr().out
    assert "| tuned | 1/10 [2, 40] | - | 40/50 [" in out and "| scratch | 4/10 [17, 69] | 6/10 [31, 83] |" in out
    assert s.main(["--arm", "nothing=here"]) == 2
