"""Can the tiny backbone's text stack copy an egocentric answer out of the memory's object table?

A diagnostic for the GST experiment (docs/experiments/gst_qa.md): the four egocentric
subtasks (EDv, EDs, EDistv, EDists) are answered by one row of the object table that the memory arm
reads (``[target] sofa: 42 deg left, 11.5 m``), so a model that reads the table scores far above chance.
This trains the tiny Qwen2.5-VL's language model alone (a ``Qwen2ForCausalLM`` of the same size, text
only: tens of samples per second) on ``<question prompt> Memory: <table> Answer: `` -> the answer of the
train questions of those subtasks, and scores greedy answers on the val questions as the benchmark does
(``vla.gst.score.score_one``) every ``--eval-every`` steps. It says how many samples copying needs at this
size before a full arm pays for them with images. The table is the one training and the learned agent
read (:class:`~vla.policy.question_map.StreamMemoryCache`, the GST proof's memory config and cache).

    OMP_NUM_THREADS=1 .venv/bin/python analyses/probe_gst_copy.py --root runs/proof/gst5 --steps 1000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from vla.experiment.gst import EGO, MEMORY  # the GST experiments' subtasks and memory inputs


def items(root: Path, split: str, cache) -> list[tuple[str, str, dict]]:
    """(prompt, answer, question row) of a split's egocentric questions, the table read from the cache."""
    from vla.questions.answers import format_answer
    from vla.questions.question import load_questions

    out = []
    for q in load_questions(root / "questions" / split):
        if q.subtask not in EGO:
            continue
        text = cache.question_entries(q)["text"]
        out.append((f"{q.prompt}\nMemory: {text}\nAnswer: ", format_answer(q.answer["type"], q.answer["value"]), q))
    if not out:
        raise SystemExit(f"{root / 'questions' / split} holds no {'/'.join(EGO)} questions")
    return out


def table_answer(prompt: str, subtask: str) -> str | None:
    """The answer read off the table's ``[target]`` row by rule (the copy the model has to learn)."""
    m = re.search(r"\[target\] [^:;]+: (\d+) deg (left|right), ([\d.]+) m", prompt)
    if m is None:
        return None
    if subtask in ("EDv", "EDs"):
        return str(int(m.group(1)) * (1 if m.group(2) == "left" else -1))
    return m.group(3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="a GST proof root (questions/<split>, stream_cache)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--freeze-embeddings", action="store_true", help="as the VLA policy trains (its default)")
    ap.add_argument("--out", default=None, help="results JSON (default: <root>/probe_copy.json)")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1 or a.eval_every < 1:
        raise SystemExit("--steps, --batch and --eval-every must be >= 1")
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from vla.config import CONFIG_DIR
    from vla.gst.score import score_one
    from vla.policy.backbone import shipped_tokenizer_dir
    from vla.policy.question_map import StreamMemoryCache

    torch.set_num_threads(a.threads)
    root = Path(a.root)
    cache = StreamMemoryCache(MEMORY, root / "stream_cache")
    train, val = items(root, "train", cache), items(root, "val", cache)
    tok = AutoTokenizer.from_pretrained(str(shipped_tokenizer_dir()))
    eos = tok.eos_token_id if tok.eos_token_id is not None else tok.pad_token_id
    # the tiny Qwen2.5-VL's text stack, 1-D RoPE (no images, so no multimodal RoPE)
    text = yaml.safe_load((CONFIG_DIR / "model" / "tiny_qwen2_5_vl.yaml").read_text())["text"]
    config = Qwen2Config(vocab_size=len(tok), **{k: v for k, v in text.items() if k != "rope_scaling"})
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    if a.freeze_embeddings:
        model.model.embed_tokens.weight.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr)

    def batch(rows):
        seqs = []
        for prompt, answer, _ in rows:
            p = tok(prompt)["input_ids"]
            seqs.append((p + tok(answer)["input_ids"] + [eos], len(p)))
        n = max(len(s) for s, _ in seqs)
        ids = torch.full((len(seqs), n), eos)
        mask = torch.zeros((len(seqs), n), dtype=torch.long)
        where = []  # (row, position) predicting each answer token and the end
        for i, (s, k) in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
            where += [(i, j) for j in range(k - 1, len(s) - 1)]
        return ids, mask, torch.tensor(where)

    @torch.no_grad()
    def evaluate() -> dict[str, float]:
        model.eval()
        scores: dict[str, list[float]] = {s: [] for s in EGO}
        for prompt, _, q in val:
            ids = torch.tensor([tok(prompt)["input_ids"]])
            out = model.generate(ids, max_new_tokens=6, do_sample=False, eos_token_id=eos, pad_token_id=eos)
            pred = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=True).strip()
            scores[q.subtask].append(score_one({"subtask": q.subtask, "answer": q.answer}, pred)[1])
        model.train()
        return {s: round(100 * float(np.mean(v)), 1) for s, v in scores.items() if v}

    rng = random.Random(0)
    ceiling: dict[str, list[float]] = {s: [] for s in EGO}
    for prompt, _, q in val:
        row = {"subtask": q.subtask, "answer": q.answer}
        ceiling[q.subtask].append(score_one(row, table_answer(prompt, q.subtask))[1])
    copy = {s: round(100 * float(np.mean(v)), 1) for s, v in ceiling.items() if v}
    print(f"{len(train)} train, {len(val)} val questions; val copied off the table by rule: {copy}", flush=True)
    log: dict = {
        "args": vars(a),
        "train": len(train),
        "val": len(val),
        "table_rule": copy,
        "curve": [],
        "val_scores": {},
    }
    t0 = time.time()
    for step in range(1, a.steps + 1):
        warm = min(1.0, step / 60)
        lr = a.lr * warm * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, mask, where = batch(rng.sample(train, min(a.batch, len(train))))
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        logits = model.lm_head(hidden[where[:, 0], where[:, 1]])
        target = ids[where[:, 0], where[:, 1] + 1]
        loss = torch.nn.functional.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == a.steps:
            acc = float((logits.argmax(-1) == target).float().mean())
            rate = step * a.batch / (time.time() - t0)
            log["curve"].append({"step": step, "loss": round(loss.item(), 4), "token_acc": round(acc, 3)})
            print(f"step {step}: loss {loss.item():.3f}, token acc {acc:.3f}, {rate:.1f} samples/s", flush=True)
        if step % a.eval_every == 0 or step == a.steps:
            log["val_scores"][step] = evaluate()
            print(f"val at step {step}: {log['val_scores'][step]}", flush=True)
    out = Path(a.out) if a.out else root / "probe_copy.json"
    out.write_text(json.dumps(log, indent=2, default=str))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
