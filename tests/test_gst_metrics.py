"""GST metrics against hand-computed cases, the parser, and the chance anchors."""

import numpy as np
import pytest

from vla.questions.answers import format_answer, random_value
from vla.gst.metrics import accuracy, aggregate, angle_error, angle_macc, bootstrap_ci, mra, point_macc
from vla.gst.parse import parse, parse_angle, parse_choice, parse_distance, parse_point


@pytest.mark.parametrize(
    "pred, truth, expected",
    [
        (10, 0, 1.0),  # 10 < 15, 30, 45
        (20, 0, 2 / 3),  # < 30, 45
        (40, 0, 1 / 3),  # < 45
        (45, 0, 0.0),  # strict
        (50, 0, 0.0),
        (170, -170, 2 / 3),  # wraps: error 20
        (-134, 226, 1.0),  # same direction
        (None, 0, 0.0),
    ],
)
def test_angle_macc(pred, truth, expected):
    assert angle_macc(pred, truth) == pytest.approx(expected)


def test_angle_error_is_symmetric_and_wrapped():
    assert angle_error(359, 1) == pytest.approx(2)
    assert angle_error(-90, 90) == pytest.approx(180)


@pytest.mark.parametrize(
    "pred, truth, expected",
    [
        (2.0, 2.0, 1.0),
        (2.1, 2.0, 0.9),  # relative error 0.05: fails only t = 0.95 (strict)
        (2.5, 2.0, 0.5),  # 0.25 < 1 - t for t in 0.50..0.70
        (1.5, 2.0, 0.5),
        (3.0, 2.0, 0.0),  # 0.5 is not < 0.5
        (None, 2.0, 0.0),
    ],
)
def test_mra(pred, truth, expected):
    assert mra(pred, truth) == pytest.approx(expected)


@pytest.mark.parametrize(
    "pred, truth, expected",
    [
        ((500, 500), (500, 500), 1.0),
        ((500, 599), (500, 500), 1.0),  # 99 < 100
        ((500, 620), (500, 500), 0.8),  # 120: < 150, 200, 250, 300
        ((200, 400), (500, 500), 0.0),  # sqrt(300^2 + 100^2) = 316
        ((260, 500), (500, 500), 0.4),  # 240: < 250, 300
        (None, (1, 1), 0.0),
    ],
)
def test_point_macc(pred, truth, expected):
    assert point_macc(pred, truth) == pytest.approx(expected)


def test_accuracy_and_aggregate():
    assert accuracy("B", "B") == 1.0 and accuracy("A", "B") == 0.0 and accuracy(None, "B") == 0.0
    agg = aggregate([("EDs", 1.0), ("EDs", 0.0), ("TDS-E", 1.0), ("Traj", 0.5)], bootstrap=200)
    assert agg["per_subtask"] == {"EDs": 50.0, "TDS-E": 100.0, "Traj": 50.0}
    assert agg["overall"] == pytest.approx((50 + 100 + 50) / 3)  # mean of subtasks, not of questions
    assert agg["count"] == {"EDs": 2, "TDS-E": 1, "Traj": 1}
    lo, hi = agg["ci95"]["EDs"]
    assert 0 <= lo <= 50 <= hi <= 100


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(0)
    small = rng.random(20)
    big = rng.random(2000)
    lo_s, hi_s = bootstrap_ci(small)
    lo_b, hi_b = bootstrap_ci(big)
    assert lo_s <= small.mean() <= hi_s and lo_b <= big.mean() <= hi_b
    assert hi_b - lo_b < (hi_s - lo_s) / 4


def test_uniform_random_answers_hit_the_chance_anchors():
    """docs/GST.md: uniform answers score about 16.7 on angles and 25 on choices. On points the chance
    level depends on where the true points lie (the paper's ~14 reflects its maps); for uniformly
    distributed truths it is the mean over d of F(d / 1000), with F(s) = pi s^2 - 8 s^3 / 3 + s^4 / 2
    the distance distribution of two uniform points in a unit square."""
    rng = np.random.default_rng(1)
    n = 20000
    truth_angles = rng.uniform(-180, 180, n)
    angles = np.mean([angle_macc(random_value("angle", rng), t) for t in truth_angles]) * 100
    assert angles == pytest.approx(100 * (15 + 30 + 45) / 3 / 180, abs=1.0)  # 16.7
    truth_pts = rng.integers(0, 1000, (n, 2))
    points = np.mean([point_macc(random_value("point", rng), tuple(t)) for t in truth_pts]) * 100
    F = lambda s: np.pi * s**2 - 8 * s**3 / 3 + s**4 / 2  # noqa: E731
    assert points == pytest.approx(100 * np.mean([F(d / 1000) for d in (100, 150, 200, 250, 300)]), abs=0.8)  # 11.3
    choices = np.mean([accuracy(random_value("choice", rng), "C") for _ in range(n)]) * 100
    assert choices == pytest.approx(25, abs=1.5)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("-134°", -134.0),
        ("-134", -134.0),
        ("turn right 45 degrees", -45.0),
        ("45 degrees to the left", 45.0),
        ("+12", 12.0),
        ("straight ahead", 0.0),
        ("it is behind me", 180.0),
        ("no idea", None),
        ("", None),
    ],
)
def test_parse_angle(text, expected):
    assert parse_angle(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("about 1.3 m", 1.3),
        ("1.3", 1.3),
        ("130 cm", 1.3),
        ("2 metres away", 2.0),
        ("far", None),
        ("-2 m", None),
    ],
)
def test_parse_distance(text, expected):
    assert parse_distance(text) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<point>391 698</point>", (391.0, 698.0)),
        ("<point>391, 698</point>", (391.0, 698.0)),
        ("(391, 698)", (391.0, 698.0)),
        ("at 12 34", (12.0, 34.0)),
        ("<point>1200 5</point>", None),
        ("top left", None),
    ],
)
def test_parse_point(text, expected):
    assert parse_point(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("(B) because the walls match", "B"),
        ("The answer is C.", "C"),
        ("A map like this... answer: D", "D"),
        ("B", "B"),
        ("Option d", "D"),
        ("A nice layout", None),
        ("none of them", None),
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice(text) == expected


@pytest.mark.parametrize(
    "junk, angle, distance",
    [
        (None, None, None),
        (42, None, None),  # not text
        ("∞", None, None),
        ("1e999", None, None),  # overflows to infinity: no answer (not 1 degree, not 999 m)
        ("1.5e2", 150.0, 150.0),  # scientific notation is one number
        ("2e-1 m", 0.2, 0.2),
        ("<point></point>", None, None),
        ("(((", None, None),
        ("-" * 1000, None, None),
    ],
)
def test_odd_input_parses_to_exactly_what_it_says(junk, angle, distance):
    assert parse("angle", junk) == (pytest.approx(angle) if angle is not None else None)
    assert parse("distance", junk) == (pytest.approx(distance) if distance is not None else None)
    assert parse("point", junk) is None and parse("choice", junk) is None


@pytest.mark.parametrize(
    "kind, value, text",
    [
        ("angle", -134.4, "-134"),
        ("angle", 0.4, "0"),
        ("angle", 89.6, "90"),
        ("distance", 1.26, "1.3"),  # one decimal, as docs/ARCHITECTURE.md §4 asks
        ("distance", 12.0, "12.0"),
        ("point", (12.6, 998.4), "<point>13 998</point>"),
        ("point", (0, 0), "<point>0 0</point>"),
        ("choice", "C", "(C)"),
    ],
)
def test_canonical_answer_text(kind, value, text):
    """The answer texts of our agents, written out by hand in the paper's formats."""
    assert format_answer(kind, value) == text


def test_unknown_answer_type_is_named():
    with pytest.raises(ValueError, match="unknown answer type 'colour'"):
        format_answer("colour", 1)
    with pytest.raises(ValueError, match="unknown answer type 'colour'"):
        parse("colour", "1")


def test_random_answers_to_the_same_questions_are_the_charts_baseline(tmp_path):
    """scores.png's baseline is the random agent's answers to the very questions scored (their expected
    score), beside the analytic chance -- never another question set's published rows."""
    from vla.gst.score import load_reference, plot_scores, random_scores

    rng = np.random.default_rng(0)
    questions = [{"id": f"e{i}", "subtask": "EDs", "answer": float(rng.uniform(-180, 180))} for i in range(300)]
    questions += [{"id": f"t{i}", "subtask": "TDS-E", "answer": "ABCD"[i % 4]} for i in range(100)]
    rand = random_scores(questions, draws=20, seed=1)
    assert rand["per_subtask"]["EDs"] == pytest.approx(16.67, abs=2.0)
    assert rand["per_subtask"]["TDS-E"] == pytest.approx(25.0, abs=3.0)
    assert rand["count"] == {"EDs": 300, "TDS-E": 100}
    assert random_scores(questions, draws=20, seed=1) == rand  # seeded
    assert set(load_reference()) == {"chance"}  # no published rows of other question sets to draw
    plot_scores(rand, tmp_path / "scores.png", "random", {"random answers": rand})
    assert (tmp_path / "scores.png").stat().st_size > 10_000
