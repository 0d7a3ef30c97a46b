"""A learned detector: a compact fully-convolutional segmentation network and the instances it yields.

The ``learned`` perception profile (:mod:`.profiles`) runs it on every frame in place of the simulator's
instance masks: the network predicts, per pixel, one of the checkpoint's categories or background from
RGB and depth; instances are the connected components of each category's pixels (cut where the depth
jumps, so two touching objects at different ranges stay two), each scored by its mean probability.
Ids are frame-local, as a real detector's are. This is the one module of the package that needs torch;
nothing imports it unless a learned profile runs (or a caller trains one: ``vla.detector``).

A checkpoint (a ``.pt`` file) holds the weights and what they mean: the category list (index ``k + 1``
of the output is ``categories[k]``; 0 is background), the frame size the detector was trained for
(``frame_size``, H x W), the network's input size (``input_size``; frames are resized to it), the
architecture's widths and the detection settings. :func:`load_detector` refuses a checkpoint whose
category set or frame size is not what the caller expects, naming the difference.

    det = load_detector("runs/detector/best.pt", categories=cats, frame_size=(256, 256))
    found = det.detect(frame.rgb, frame.depth)          # Detections: instance (int32 ids), labels, scores
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage
from torch import nn

FORMAT = "spatial_memory.detector/1"
MAX_DEPTH_M = 10.0  # depth is fed as z / MAX_DEPTH_M, clipped to [0, 1] (0 = no reading)


@dataclass(frozen=True)
class DetectorSpec:
    """What a checkpoint's weights mean. categories: the output classes after background (order matters).
    frame_size: (H, W) of the frames it detects in. input_size: (H, W) the network runs at. widths: the
    encoder's channels per stage (each halves the resolution). use_depth: depth is a fourth input channel.
    score_threshold: a component whose mean probability is lower is dropped; min_pixels: smaller ones too
    (at frame size). depth_edge_rel: a depth jump larger than this fraction of the range cuts a component."""

    categories: tuple[str, ...]
    frame_size: tuple[int, int] = (256, 256)
    input_size: tuple[int, int] = (96, 96)
    widths: tuple[int, ...] = (16, 24, 40, 64)
    use_depth: bool = True
    score_threshold: float = 0.5
    min_pixels: int = 40
    depth_edge_rel: float = 0.08

    def __post_init__(self) -> None:
        if not self.categories or len(set(self.categories)) != len(self.categories):
            raise ValueError(f"detector categories must be a non-empty list without repeats, got {self.categories}")
        for name in ("frame_size", "input_size"):
            v = getattr(self, name)
            if len(v) != 2 or min(v) <= 0:
                raise ValueError(f"detector {name} must be (H, W) > 0, got {v}")
        f = 2 ** len(self.widths)
        if self.input_size[0] % f or self.input_size[1] % f:
            raise ValueError(f"detector input_size {self.input_size} must be a multiple of {f} (2^stages)")

    @property
    def num_classes(self) -> int:
        return len(self.categories) + 1

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DetectorSpec":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"detector checkpoint: unknown spec keys {sorted(unknown)}; expected {sorted(known)}")
        d = dict(d)
        for k in ("categories", "frame_size", "input_size", "widths"):
            if k in d:
                d[k] = tuple(d[k])
        return cls(**d)


def _block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )


class SegNet(nn.Module):
    """A small encoder-decoder (U-Net-like): each stage halves the resolution; the decoder climbs back to a
    quarter of the input with skip connections and predicts class logits there (upsampled by the caller)."""

    def __init__(self, spec: DetectorSpec) -> None:
        super().__init__()
        cin = 4 if spec.use_depth else 3
        w = spec.widths
        self.down = nn.ModuleList()
        for c in w:
            self.down.append(nn.Sequential(_block(cin, c, stride=2), _block(c, c)))
            cin = c
        self.context = nn.Sequential(
            nn.Conv2d(cin, cin, 3, padding=2, dilation=2, bias=False), nn.BatchNorm2d(cin), nn.ReLU(inplace=True)
        )
        self.up = nn.ModuleList()
        for i in range(len(w) - 1, 1, -1):  # up to stage 1 (a quarter of the input)
            self.up.append(_block(w[i] + w[i - 1], w[i - 1]))
        self.head = nn.Conv2d(w[1], spec.num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for stage in self.down:
            x = stage(x)
            skips.append(x)
        x = self.context(x)
        for k, block in enumerate(self.up):
            skip = skips[-2 - k]
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = block(torch.cat([x, skip], dim=1))
        return self.head(x)


def frame_tensor(rgb: np.ndarray, depth: np.ndarray | None, spec: DetectorSpec) -> torch.Tensor:
    """Network input (B x C x h x w float32) from uint8 RGB (H x W x 3 or B x H x W x 3) and depth in metres."""
    rgb = np.asarray(rgb)
    batched = rgb.ndim == 4
    if not batched:
        rgb = rgb[None]
        depth = None if depth is None else np.asarray(depth)[None]
    if rgb.dtype != np.uint8 or rgb.shape[-1] != 3:
        raise ValueError(f"detector input rgb must be uint8 (..., H, W, 3), got {rgb.dtype} {rgb.shape}")
    x = torch.from_numpy(np.ascontiguousarray(rgb)).permute(0, 3, 1, 2).float().div_(255.0)
    if spec.use_depth:
        if depth is None:
            raise ValueError("this detector reads depth; none was given")
        d = np.nan_to_num(np.asarray(depth, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        d = torch.from_numpy(np.clip(d / MAX_DEPTH_M, 0.0, 1.0))[:, None]
        x = torch.cat([x, d], dim=1)
    if tuple(x.shape[-2:]) != tuple(spec.input_size):
        x = F.interpolate(x, size=tuple(spec.input_size), mode="bilinear", align_corners=False)
    return x


@dataclass
class Detections:
    """One frame's detections: ``instance`` int32 H x W (0 = nothing), ``labels`` id -> category,
    ``scores`` id -> mean class probability over the instance's pixels."""

    instance: np.ndarray
    labels: dict[int, str] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)


def depth_edges(depth: np.ndarray, rel: float) -> np.ndarray:
    """Pixels on either side of a depth jump larger than ``rel`` of the nearer range (or next to no reading)."""
    d = np.asarray(depth, dtype=np.float32)
    valid = np.isfinite(d) & (d > 0)
    z = np.where(valid, d, 0.0)
    edge = np.zeros(d.shape, dtype=bool)
    for axis in (0, 1):
        a, b = np.delete(z, -1, axis=axis), np.delete(z, 0, axis=axis)
        jump = np.abs(a - b) > rel * np.maximum(np.minimum(a, b), 1e-3)
        if axis == 0:
            edge[:-1] |= jump
            edge[1:] |= jump
        else:
            edge[:, :-1] |= jump
            edge[:, 1:] |= jump
    return edge & valid


def instances_from_probs(
    probs: np.ndarray,
    categories: tuple[str, ...],
    depth: np.ndarray | None = None,
    score_threshold: float = 0.5,
    min_pixels: int = 40,
    depth_edge_rel: float = 0.08,
    ids: np.ndarray | None = None,
) -> Detections:
    """Instances from per-pixel class probabilities (K+1 x H x W, class 0 background): see
    :func:`instances_from_labels` (the argmax class and its probability per pixel)."""
    return instances_from_labels(
        probs.argmax(axis=0), probs.max(axis=0), categories, depth, score_threshold, min_pixels, depth_edge_rel, ids
    )


def instances_from_labels(
    cls: np.ndarray,
    conf: np.ndarray,
    categories: tuple[str, ...],
    depth: np.ndarray | None = None,
    score_threshold: float = 0.5,
    min_pixels: int = 40,
    depth_edge_rel: float = 0.08,
    ids: np.ndarray | None = None,
) -> Detections:
    """Instances from a per-pixel class map (0 background, ``k`` = ``categories[k - 1]``) and each pixel's
    class probability: the connected components of each category's pixels, cut at depth jumps, kept when
    at least ``min_pixels`` large and scored (mean probability) at least ``score_threshold``. ``ids``: the
    id to give the n-th kept instance (default 1, 2, ...)."""
    cut = depth_edges(depth, depth_edge_rel) if depth is not None and depth_edge_rel > 0 else None
    out = np.zeros(cls.shape, dtype=np.int32)
    found: list[tuple[str, float, tuple, np.ndarray]] = []
    for k in np.unique(cls).tolist():
        if k == 0:
            continue
        mask = cls == k
        if cut is not None:
            mask &= ~cut
        comp, n = ndimage.label(mask)
        if n == 0:
            continue
        sizes = np.bincount(comp.ravel(), minlength=n + 1)
        keep = np.flatnonzero(sizes[1:] >= min_pixels) + 1
        if keep.size == 0:
            continue
        means = np.atleast_1d(ndimage.mean(conf, comp, index=keep))
        boxes = ndimage.find_objects(comp)
        for j, m in zip(keep.tolist(), means.tolist()):
            if m >= score_threshold:
                found.append((categories[k - 1], float(m), boxes[j - 1], comp[boxes[j - 1]] == j))
    labels, scores = {}, {}
    for i, (cat, score, sl, m) in enumerate(found):
        new = int(ids[i]) if ids is not None else i + 1
        out[sl][m] = new
        labels[new], scores[new] = cat, score
    return Detections(out, labels, scores)


def label_maps(
    logits: torch.Tensor, size: tuple[int, int], candidate_prob: float = 0.2
) -> tuple[np.ndarray, np.ndarray]:
    """(class map int64 B x H x W, its probability float32 B x H x W) at ``size`` from low-resolution logits
    (B x K x h x w). Only the candidate classes are upsampled (background, every class that is the argmax
    of some low-resolution cell or reaches ``candidate_prob`` there) with the log-partition beside them.
    The class is the one upsampling all K logits gives wherever no class outside the candidates would
    win (every pixel of 8 val frames in a check), the probability within a few hundredths of the exact
    one, at a thirtieth of the cost (4 vs 123 ms per 256x256 frame)."""
    B = logits.shape[0]
    lse = torch.logsumexp(logits, dim=1, keepdim=True)
    low = (logits - lse).exp()
    cls_out = np.zeros((B, *size), dtype=np.int64)
    conf_out = np.zeros((B, *size), dtype=np.float32)
    for b in range(B):
        seen = low[b].amax(dim=(1, 2))
        cand = torch.unique(torch.cat([torch.zeros(1, dtype=torch.long), low[b].argmax(0).flatten()]))
        cand = torch.unique(torch.cat([cand, torch.nonzero(seen >= candidate_prob).flatten()]))
        sub = torch.cat([logits[b, cand], lse[b]], dim=0)[None]
        up = F.interpolate(sub, size=size, mode="bilinear", align_corners=False)[0]
        best, arg = up[:-1].max(dim=0)
        cls_out[b] = cand[arg].numpy()
        conf_out[b] = (best - up[-1]).exp().clamp(max=1.0).numpy()
    return cls_out, conf_out


class LearnedDetector:
    """A loaded checkpoint, ready to detect (CPU, eval mode). See the module doc."""

    def __init__(self, spec: DetectorSpec, net: SegNet, path: str | None = None) -> None:
        self.spec, self.net, self.path = spec, net.eval(), path

    def probs(self, rgb: np.ndarray, depth: np.ndarray | None) -> np.ndarray:
        """Class probabilities (K+1 x H x W float32) at the frame's size."""
        H, W = np.asarray(rgb).shape[:2]
        self.check_frame((H, W))
        with torch.inference_mode():
            logits = self.net(frame_tensor(rgb, depth, self.spec))
            logits = F.interpolate(logits, size=(H, W), mode="bilinear", align_corners=False)
            return torch.softmax(logits, dim=1)[0].numpy()

    def labels(self, rgb: np.ndarray, depth: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(class map, its probability) at the frames' size (:func:`label_maps`); one frame or a batch."""
        rgb = np.asarray(rgb)
        H, W = rgb.shape[-3:-1]
        self.check_frame((H, W))
        with torch.inference_mode():
            cls, conf = label_maps(self.net(frame_tensor(rgb, depth, self.spec)), (H, W))
        return (cls, conf) if rgb.ndim == 4 else (cls[0], conf[0])

    def detect(self, rgb: np.ndarray, depth: np.ndarray | None, ids: np.ndarray | None = None) -> Detections:
        s = self.spec
        cls, conf = self.labels(rgb, depth)
        return instances_from_labels(
            cls, conf, s.categories, depth, s.score_threshold, s.min_pixels, s.depth_edge_rel, ids
        )

    def check(self, categories: tuple[str, ...] | None = None, frame_size: tuple[int, int] | None = None) -> None:
        """ValueError naming the difference when ``categories`` (as a set) or ``frame_size`` (H, W) are not
        the checkpoint's."""
        spec, where = self.spec, repr(self.path or "detector")
        if categories is not None and set(categories) != set(spec.categories):
            missing = sorted(set(categories) - set(spec.categories))
            extra = sorted(set(spec.categories) - set(categories))
            raise ValueError(
                f"detector checkpoint {where} has another category set: {len(spec.categories)} categories, "
                f"expected {len(set(categories))}; not in the checkpoint: {missing}; only in the checkpoint: {extra}"
            )
        if frame_size is not None:
            self.check_frame(tuple(frame_size))

    def check_frame(self, size: tuple[int, int]) -> None:
        if tuple(size) != tuple(self.spec.frame_size):
            raise ValueError(
                f"detector checkpoint {self.path or ''!r}: frames are {size[0]}x{size[1]} but the checkpoint was "
                f"trained for {self.spec.frame_size[0]}x{self.spec.frame_size[1]} frames"
            )


def save_checkpoint(path: str | Path, spec: DetectorSpec, net: SegNet, extra: dict[str, Any] | None = None) -> None:
    """Weights and spec (and ``extra``: training state, metrics) to ``path``, written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"format": FORMAT, "spec": spec.to_dict(), "state_dict": net.state_dict(), **(extra or {})}, tmp)
    tmp.replace(path)


def read_checkpoint(path: str | Path) -> dict:
    """The raw checkpoint dict (weights, spec, extras), its format checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"detector checkpoint {str(path)!r} does not exist")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file
        raise ValueError(f"detector checkpoint {str(path)!r} cannot be read: {e}") from e
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        got = ck.get("format") if isinstance(ck, dict) else type(ck).__name__
        raise ValueError(f"{str(path)!r} is not a detector checkpoint (format {got!r}, expected {FORMAT!r})")
    return ck


def load_detector(
    path: str | Path, categories: tuple[str, ...] | None = None, frame_size: tuple[int, int] | None = None
) -> LearnedDetector:
    """A checkpoint as a :class:`LearnedDetector`. ``categories`` (the caller's category set; order is the
    checkpoint's) and ``frame_size`` (H, W), when given, must match the checkpoint's, else ValueError naming
    the difference."""
    ck = read_checkpoint(path)
    spec = DetectorSpec.from_dict(ck["spec"])
    net = SegNet(spec)
    det = LearnedDetector(spec, net, str(path))
    det.check(categories, frame_size)
    try:
        net.load_state_dict(ck["state_dict"])
    except RuntimeError as e:
        raise ValueError(f"detector checkpoint {str(path)!r}: weights do not fit its spec: {e}") from e
    return det


_CACHE: dict[tuple[str, float], LearnedDetector] = {}
_LOCK = threading.Lock()


def cached_detector(path: str | Path) -> LearnedDetector:
    """One loaded detector per checkpoint file (and modification time) per process."""
    p = Path(path)
    key = (str(p.resolve()), p.stat().st_mtime if p.exists() else 0.0)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = load_detector(p)
        return _CACHE[key]
