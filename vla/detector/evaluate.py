"""Evaluating the learned detector on rendered apartments: per category recall, precision and AP.

A detection is a true positive when it matches a not-yet-matched true instance of its category with mask
IoU >= 0.5 (detections taken in decreasing score). True instances smaller than the detector's
``min_pixels`` are not counted; a detection matching one is neither true nor false. AP: area under the
precision-recall curve of the category's detections over all scores (all-point interpolation); mAP: the
mean over the categories present. Recall and precision are reported at the checkpoint's score threshold.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from spatial_memory.detector import DetectorSpec, SegNet, frame_tensor, instances_from_labels, label_maps, load_detector

IOU = 0.5


def match_frame(
    pred, gt_instance: np.ndarray, gt_labels: dict[int, str], min_pixels: int
) -> tuple[list, dict[str, int]]:
    """(category, score, outcome) per detection (outcome 1 = true positive, 0 = false, -1 = ignored) and
    the number of counted true instances per category, for one frame."""
    g = np.maximum(gt_instance, 0).astype(np.int64).ravel()
    p = pred.instance.astype(np.int64).ravel()
    gsize = np.bincount(g)
    counted = {i: c for i, c in gt_labels.items() if 0 < i < gsize.size and gsize[i] >= min_pixels}
    small = {i for i, c in gt_labels.items() if 0 < i < gsize.size and 0 < gsize[i] < min_pixels}
    n_gt: dict[str, int] = defaultdict(int)
    for c in counted.values():
        n_gt[c] += 1
    out = []
    if not pred.labels:
        return out, n_gt
    pids = np.array(sorted(pred.labels))
    psize = {int(i): int(n) for i, n in zip(*np.unique(p, return_counts=True))}
    both = (p > 0) & (g > 0)
    pairs, inter = np.unique(np.stack([p[both], g[both]]), axis=1, return_counts=True)
    overlaps: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (pi, gi), n in zip(pairs.T.tolist(), inter.tolist()):
        overlaps[pi].append((gi, n))
    taken: set[int] = set()
    for pi in sorted(pids.tolist(), key=lambda i: -pred.scores[i]):
        cat, best, best_iou = pred.labels[pi], None, 0.0
        for gi, n in overlaps.get(pi, ()):
            if gi in taken or gt_labels.get(gi) != cat:
                continue
            iou = n / (psize[pi] + gsize[gi] - n)
            if iou >= IOU and iou > best_iou:
                best, best_iou = gi, iou
        if best is not None and best in counted:
            taken.add(best)
            out.append((cat, pred.scores[pi], 1))
        elif best is not None and best in small:
            out.append((cat, pred.scores[pi], -1))
        else:
            out.append((cat, pred.scores[pi], 0))
    return out, n_gt


def label_batches(net: SegNet, spec: DetectorSpec, rgb: np.ndarray, depth: np.ndarray, batch: int = 16):
    """(class map, probability) of each frame, as the detector makes them (:func:`label_maps`)."""
    H, W = rgb.shape[1:3]
    with torch.inference_mode():
        for i in range(0, len(rgb), batch):
            cls, conf = label_maps(net(frame_tensor(rgb[i : i + batch], depth[i : i + batch], spec)), (H, W))
            yield from zip(cls, conf)


def evaluate_frames(
    net: SegNet, spec: DetectorSpec, apartments: list[dict], thresholds=(None,), progress: bool = False
) -> dict[str, Any]:
    """Detections of every frame, matched: ``{"detections": [(category, score, outcome)], "n_gt": {cat: n},
    "thresholds": [...]}`` (``None`` in thresholds: the spec's)."""
    net.eval()
    dets: list[tuple[str, float, int]] = []
    n_gt: dict[str, int] = defaultdict(int)
    n = sum(len(d["rgb"]) for d in apartments)
    bar = tqdm(total=n, desc="eval", disable=not progress, file=sys.stderr)
    for d in apartments:
        depth = d["depth"].astype(np.float32)
        for k, (cls, conf) in enumerate(label_batches(net, spec, d["rgb"], depth)):
            pred = instances_from_labels(
                cls, conf, spec.categories, depth[k], 0.0, spec.min_pixels, spec.depth_edge_rel
            )
            got, counts = match_frame(pred, d["instance"][k], d["labels"][k], spec.min_pixels)
            dets += got
            for c, m in counts.items():
                n_gt[c] += m
            bar.update(1)
    bar.close()
    ths = [spec.score_threshold if t is None else t for t in thresholds]
    return {"detections": dets, "n_gt": dict(n_gt), "thresholds": ths, "frames": n}


def average_precision(scores: list[float], tp: list[int], n_gt: int) -> float:
    if n_gt == 0:
        return float("nan")
    if not scores:
        return 0.0
    order = np.argsort(-np.asarray(scores), kind="stable")
    t = np.asarray(tp)[order]
    ctp, cfp = np.cumsum(t == 1), np.cumsum(t == 0)
    rec = ctp / n_gt
    prec = ctp / np.maximum(ctp + cfp, 1)
    prec = np.maximum.accumulate(prec[::-1])[::-1]  # the precision envelope
    r_prev = np.concatenate([[0.0], rec[:-1]])
    return float(np.sum((rec - r_prev) * prec))


def summarise(ev: dict, threshold: float) -> dict[str, Any]:
    """Per category and overall recall / precision at ``threshold``, AP per category and mAP."""
    per: dict[str, dict] = {}
    cats = sorted(set(ev["n_gt"]) | {c for c, _, _ in ev["detections"]})
    for c in cats:
        ds = [(s, o) for cc, s, o in ev["detections"] if cc == c and o >= 0]
        ngt = ev["n_gt"].get(c, 0)
        tp = sum(1 for s, o in ds if s >= threshold and o == 1)
        fp = sum(1 for s, o in ds if s >= threshold and o == 0)
        per[c] = {
            "gt": ngt,
            "tp": tp,
            "fp": fp,
            "recall": tp / ngt if ngt else float("nan"),
            "precision": tp / (tp + fp) if tp + fp else float("nan"),
            "ap": average_precision([s for s, _ in ds], [o for _, o in ds], ngt),
        }
    TP = sum(v["tp"] for v in per.values())
    FP = sum(v["fp"] for v in per.values())
    GT = sum(v["gt"] for v in per.values())
    rec, prec = TP / max(GT, 1), TP / max(TP + FP, 1)
    aps = [v["ap"] for v in per.values() if v["gt"] > 0]
    recs = [v["recall"] for v in per.values() if v["gt"] > 0]
    return {
        "threshold": threshold,
        "recall": rec,
        "precision": prec,
        "f1": 2 * rec * prec / max(rec + prec, 1e-12),
        "mean_recall": float(np.mean(recs)) if recs else 0.0,
        "mAP": float(np.mean(aps)) if aps else 0.0,
        "per_category": per,
    }


def pick_threshold(ev: dict) -> tuple[float, dict]:
    """The threshold of ``ev["thresholds"]`` with the best overall F1, and its summary (without the
    per-category table)."""
    best = max((summarise(ev, t) for t in ev["thresholds"]), key=lambda s: s["f1"])
    return best["threshold"], {k: v for k, v in best.items() if k not in ("per_category", "threshold")}


def evaluate_split(checkpoint: str, frames: str, split: str) -> dict[str, Any]:
    """The report of ``checkpoint`` on a rendered split (see the module doc)."""
    from .data import load_split

    det = load_detector(checkpoint)
    aps = list(load_split(frames, split, det.spec.categories))
    ev = evaluate_frames(det.net, det.spec, aps, progress=True)
    rep = summarise(ev, det.spec.score_threshold)
    return {"checkpoint": checkpoint, "split": split, "apartments": len(aps), "frames": ev["frames"], **rep}


def format_report(rep: dict) -> str:
    lines = [
        f"{rep['checkpoint']} on {rep['split']}: {rep['apartments']} apartments, {rep['frames']} frames, "
        f"score threshold {rep['threshold']:.2f}",
        f"recall {rep['recall']:.3f}  precision {rep['precision']:.3f}  F1 {rep['f1']:.3f}  "
        f"mean per-category recall {rep['mean_recall']:.3f}  mAP {rep['mAP']:.3f}  (mask IoU >= {IOU})",
        f"{'category':<18}{'gt':>6}{'tp':>6}{'fp':>6}{'recall':>8}{'prec':>8}{'AP':>8}",
    ]
    for c, v in sorted(rep["per_category"].items(), key=lambda kv: -kv[1]["gt"]):
        lines.append(
            f"{c:<18}{v['gt']:>6}{v['tp']:>6}{v['fp']:>6}{v['recall']:>8.3f}{v['precision']:>8.3f}{v['ap']:>8.3f}"
        )
    return "\n".join(lines)
