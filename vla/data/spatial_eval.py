"""Held-out accuracy of a trained policy on a spatial question set, and the trivial baseline.

``vla-data spatial-eval checkpoint=DIR data=runs/spatial/test out=OUT``: the policy answers every
question (greedy, ``max_new_tokens``), appended to ``OUT/predictions.jsonl`` as it goes (a rerun
skips what is there), then ``OUT/scores.json``: accuracy per task type (:func:`vla.questions.perception.tasks.score`).
``vla-data spatial-score data=DIR predictions=FILE`` scores any predictions file; with
``baseline=TRAIN_DIR`` instead, the train set's majority / mean answer per task type is scored, and with
``blind=true`` too, per question text (the question-only baseline: what the words alone predict).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vla.data.spatial_generate import load_records
from vla.questions.perception.tasks import baseline_answers, blind_answers, prompt_key, score

from .spatial_qa import SpatialQASource


def read_predictions(path: str | Path) -> dict[str, str]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no predictions file {path}")
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            d = json.loads(line)
            out[str(d["id"])] = str(d["prediction"])
        except (ValueError, KeyError, TypeError):
            if n < len(path.read_text().splitlines()):  # only a torn last line is tolerated
                raise ValueError(f"{path}:{n}: not a {{'id', 'prediction'}} JSON line") from None
    return out


def baseline_predictions(train_dir: str | Path, records: list[dict[str, Any]], blind: bool = False) -> dict[str, str]:
    """The task's train answer for every record; ``blind``: the answer of train questions with the same
    words (:func:`vla.questions.perception.tasks.blind_answers`), else the task's."""
    train = load_records(train_dir)
    answers = baseline_answers(train)
    by_words = blind_answers(train) if blind else {}
    out = {r["id"]: by_words.get(prompt_key(r["prompt"]), answers.get(r["task"])) for r in records}
    return {k: v for k, v in out.items() if v is not None}


def policy_predictions(
    checkpoint: str | Path,
    data: str | Path,
    out: str | Path,
    max_new_tokens: int = 64,
    limit: int = 0,
    progress: bool = True,
) -> dict[str, str]:
    from tqdm import tqdm

    from vla.policy import load_policy

    src = SpatialQASource(data)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pred_path = out / "predictions.jsonl"
    have = read_predictions(pred_path) if pred_path.exists() else {}
    n = len(src) if not limit else min(int(limit), len(src))
    todo = [i for i in range(n) if src.record(i)["id"] not in have]
    if todo:
        policy = load_policy(checkpoint)
        policy.eval()
        with open(pred_path, "a") as fh:
            for i in tqdm(todo, disable=not progress, desc="spatial eval"):
                s = src.sample(i)
                text = policy.answer_batch(
                    [policy.transform.question(s.images, s.prompt)], max_new_tokens=max_new_tokens
                )[0]
                fh.write(json.dumps({"id": src.record(i)["id"], "prediction": text}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                have[src.record(i)["id"]] = text
    return have


def write_scores(out: str | Path, scores: dict[str, Any]) -> Path:
    p = Path(out) / "scores.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(scores, indent=2))
    os.replace(tmp, p)
    return p


def score_set(data: str | Path, predictions: dict[str, str], limit: int = 0) -> dict[str, Any]:
    records = load_records(data)
    if limit:
        src = SpatialQASource(data)
        records = [src.record(i) for i in range(min(int(limit), len(src)))]
    return score(records, predictions)
