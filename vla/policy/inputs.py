"""Model inputs from samples: one chain of small transforms shared by training, ``act()`` and the server.

A sample is either an observation dict (``Observation.to_dict()`` layout: cameras, state, prompt,
memory/* when the memory transform ran) with the actions to learn, or a visual question (images,
a prompt with ``<image>`` markers, an answer). :class:`InputTransform` turns it into a
:class:`ModelInput` -- the images to show, in order, and the user text with one ``<image>`` marker
per image -- through frozen dataclass transforms, each a pure function of its input and an optional
random generator (augmentation happens only when one is given, i.e. in training):

* :class:`SelectImages` -- the policy's cameras (agentview by default; the wrist camera optional),
  with ``history=K`` K earlier frames of one camera (``memory/frames/*``,
  :mod:`vla.transforms.frame_memory`), and, with ``memory_map``, the memory's top-down map as one more image;
* :class:`Augment` -- random resized crop and colour jitter (OpenVLA / VST), training only;
* :class:`JitterTable` -- Gaussian noise on the object table's directions and distances before it is
  written in words, training only (``memory_text_jitter``): digits are a brittle input, and a policy
  fitted to exact ones changes its action when a pose a centimetre off rounds a degree differently;
* :class:`Resize` -- every image to ``image_size`` squared (what the processor expects);
* :class:`Prompt` -- "What action should the robot take to {instruction}?" (OpenVLA / VST), with the
  memory's object table (``memory_text``) and the proprioception (``proprio``) when switched on.

The same :class:`InputConfig` is saved with a checkpoint, so inference rebuilds the very chain the
policy was trained with.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import cv2
import numpy as np

from vla.transforms.map_inputs import MEMORY_FEATURES  # proprio keys computed from the memory, not read from the data
from vla_common.strict import from_dict

IMAGE = "<image>"
PROMPT = "What action should the robot take to {instruction}?"
PROPRIO = ("none", "text", "token")


@dataclass(frozen=True)
class InputConfig:
    """What the policy sees (saved with every checkpoint)."""

    cameras: tuple[str, ...] = ("agentview",)  # observation cameras shown, in order (house: ego; [] for QA only)
    image_size: int = 0  # 0 = the model's image_size (what its processor expects)
    prompt: str = PROMPT
    proprio: str = "none"  # none | text (the state vector's digits in the prompt) | token (one token, a learned
    #                         projection of the normalised state: OpenVLA-OFT's proprio projector)
    # what "the state vector" is: observation keys concatenated in order (a base's wheel odometry of the
    # last step: ["sensors/motion"]; the arm's pose: ["state"]; the memory's routes and the target's row as
    # numbers: ["memory/routes"], vla.transforms.map_inputs.route_features)
    proprio_keys: tuple[str, ...] = ("state",)
    memory_map: bool = False  # memory/topdown as an extra image
    # a memory of frames: K earlier frames of history_camera (default: the first camera) beside the current
    # ones -- the episode's first frame and K-1 more evenly spaced up to now (vla.transforms.frame_memory)
    history: int = 0
    history_camera: str | None = None
    memory_text: bool = False  # memory/text (the object table) in the prompt
    # std of Gaussian noise on the object table's directions (deg) and distances (m) in training (0: none)
    memory_text_jitter: tuple[float, float] = (0.0, 0.0)
    augment: bool = True  # random resized crop + colour jitter in training
    crop_scale: tuple[float, float] = (0.9, 1.0)  # area fraction of the random crop
    jitter: tuple[float, float, float, float] = (0.2, 0.2, 0.2, 0.05)  # brightness, contrast, saturation, hue

    def __post_init__(self) -> None:
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "proprio_keys", tuple(self.proprio_keys))
        bad = [
            k for k in self.proprio_keys if k != "state" and k not in MEMORY_FEATURES and not k.startswith("sensors/")
        ]
        if not self.proprio_keys or bad:
            raise ValueError(
                f"inputs.proprio_keys must name 'state', 'sensors/<name>' or "
                f"{' / '.join(repr(k) for k in sorted(MEMORY_FEATURES))} keys, "
                f"got {list(self.proprio_keys)}"
            )
        if isinstance(self.proprio, bool) or self.proprio in ("true", "false"):  # checkpoints before "token"
            object.__setattr__(self, "proprio", "text" if self.proprio in (True, "true") else "none")
        if self.proprio not in PROPRIO:
            raise ValueError(f"inputs.proprio must be one of {PROPRIO}, got {self.proprio!r}")
        object.__setattr__(self, "crop_scale", tuple(float(x) for x in self.crop_scale))
        object.__setattr__(self, "jitter", tuple(float(x) for x in self.jitter))
        object.__setattr__(self, "memory_text_jitter", tuple(float(x) for x in self.memory_text_jitter))
        if len(self.memory_text_jitter) != 2 or not all(x >= 0 for x in self.memory_text_jitter):
            raise ValueError(
                f"inputs.memory_text_jitter must be [deg, m], two stds >= 0, got {list(self.memory_text_jitter)}"
            )
        if isinstance(self.history, bool) or int(self.history) < 0:
            raise ValueError(f"inputs.history must be a number of frames >= 0, got {self.history!r}")
        object.__setattr__(self, "history", int(self.history))
        if self.history and not (self.history_camera or self.cameras):
            raise ValueError("inputs.history remembers frames of a camera: name inputs.history_camera or a camera")
        if "{instruction}" not in self.prompt:
            raise ValueError(f"inputs.prompt must contain {{instruction}}, got {self.prompt!r}")
        lo, hi = self.crop_scale
        if not 0 < lo <= hi <= 1:
            raise ValueError(f"inputs.crop_scale must satisfy 0 < lo <= hi <= 1, got {self.crop_scale}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "InputConfig":
        return from_dict(cls, d, "policy input")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("cameras", "proprio_keys", "crop_scale", "jitter", "memory_text_jitter"):
            d[k] = list(d[k])
        return d

    @property
    def uses_memory(self) -> bool:
        """Whether the policy reads the spatial memory: its map image, its table in words, or features the
        memory computes through the proprio token (``proprio_keys`` with ``memory/routes``)."""
        return self.memory_map or self.memory_text or bool(self.memory_features)

    @property
    def frames_camera(self) -> str | None:
        """The camera whose earlier frames the policy sees (``history > 0``), else None."""
        return (self.history_camera or self.cameras[0]) if self.history else None

    @property
    def memory_features(self) -> tuple[str, ...]:
        """The proprio keys the memory computes (``map_inputs.MEMORY_FEATURES``) that this policy reads."""
        return tuple(k for k in self.proprio_keys if k in MEMORY_FEATURES) if self.proprio != "none" else ()


@dataclass
class ModelInput:
    """Images in prompt order and the user text (one ``<image>`` per image); ``target``: what to learn."""

    images: list[np.ndarray]
    text: str
    actions: np.ndarray | None = None  # (K, D) raw actions (action samples)
    state: np.ndarray | None = None  # the raw state vector, for the proprio token (inputs.proprio=token)
    answer: str | None = None  # answer text (qa samples)
    dataset: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------ transforms
@dataclass(frozen=True)
class SelectImages:
    cameras: tuple[str, ...]
    memory_map: bool
    history: int = 0

    def __call__(self, d: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        images = []
        for cam in self.cameras:
            key = f"cameras/{cam}/rgb"
            if key not in d:
                have = sorted({k.split("/")[1] for k in d if k.startswith("cameras/")})
                raise ValueError(f"the policy reads camera {cam!r} but the observation has cameras {have}")
            images.append(np.asarray(d[key]))
        if self.history:
            from vla.transforms.frame_memory import frame_keys

            keys = frame_keys(self.history)
            if any(k not in d for k in keys):
                raise ValueError(
                    f"the policy was trained with {self.history} earlier frames (inputs.history: {keys[0]}, ...) but "
                    "the observation has none: run it with the frame memory (agent=vla keeps one; in training "
                    "DemoSource(frames=...))"
                )
            images.extend(np.asarray(d[k]) for k in keys)
        if self.memory_map:
            if "memory/topdown" not in d:
                raise ValueError(
                    "the policy was trained with the memory map (memory/topdown) but the observation has "
                    "none: run it with the memory transform (MemoryInputs with 'topdown' in inputs)"
                )
            images.append(np.asarray(d["memory/topdown"]))
        return {**d, "_images": images}


@dataclass(frozen=True)
class Augment:
    """Random resized crop (area fraction in ``crop_scale``, aspect kept) straight to ``size`` squared, then
    colour jitter at that size (cheap: the crop is never resized back to the camera's resolution); no-op
    without rng."""

    crop_scale: tuple[float, float]
    jitter: tuple[float, float, float, float]
    n_camera_images: int  # the photos, first (cameras, then earlier frames); the map (if any, last) is a drawing
    size: int

    def __call__(self, d: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        if rng is None:
            return d
        out = [self._one(img, rng) if i < self.n_camera_images else img for i, img in enumerate(d["_images"])]
        return {**d, "_images": out}

    def _one(self, img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        h, w = img.shape[:2]
        s = np.sqrt(rng.uniform(*self.crop_scale))
        ch, cw = max(1, int(round(h * s))), max(1, int(round(w * s)))
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        out = (self.size, self.size) if self.size else (w, h)
        interp = cv2.INTER_AREA if min(ch, cw) > out[0] else cv2.INTER_LINEAR
        crop = cv2.resize(np.ascontiguousarray(img[y0 : y0 + ch, x0 : x0 + cw]), out, interpolation=interp)
        b, c, sat, hue = self.jitter
        x = crop.astype(np.float32)
        x *= rng.uniform(1 - b, 1 + b)
        mean = x.mean()
        x = (x - mean) * rng.uniform(1 - c, 1 + c) + mean
        grey = x.mean(axis=2, keepdims=True)
        x = (x - grey) * rng.uniform(1 - sat, 1 + sat) + grey
        x = np.clip(x, 0, 255).astype(np.uint8)
        if hue > 0:
            hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)
            hsv[..., 0] = ((hsv[..., 0].astype(np.int32) + int(round(rng.uniform(-hue, hue) * 180))) % 180).astype(
                np.uint8
            )
            x = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
        return x


@dataclass(frozen=True)
class JitterTable:
    """The object table (``memory/text``) rewritten from ``memory/objects/*`` with Gaussian noise on each
    row's direction (``deg``) and distance (``m``), and so are the routes after it (``memory/routes/*``:
    direction and length) when the memory gives them; no-op without rng (inference reads the table as
    given)."""

    deg: float
    m: float

    def __call__(self, d: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        if rng is None:
            return d
        if "memory/objects/direction_deg" not in d:
            raise ValueError(
                "inputs.memory_text_jitter rewrites the object table from its rows, but the sample has no "
                "memory/objects/*: build the memory inputs with 'objects' (data.memory.inputs)"
            )
        from spatial_memory.geometry import wrap_deg
        from vla.transforms.map_inputs import object_table_text, routes_text

        table = {k.split("/")[-1]: np.asarray(v) for k, v in d.items() if k.startswith("memory/objects/")}
        n = len(table["direction_deg"])
        table["direction_deg"] = wrap_deg(table["direction_deg"] + rng.normal(0.0, self.deg, n))
        table["distance_m"] = np.maximum(table["distance_m"] + rng.normal(0.0, self.m, n), 0.0)
        text = object_table_text(table)
        # the rows themselves are rewritten too, for what reads them as numbers (proprio_keys: memory/routes)
        out = {**d, **{f"memory/objects/{k}": table[k] for k in ("direction_deg", "distance_m")}}
        if "memory/routes/kind" in d:  # the routes follow the table, jittered alike
            routes = {k.split("/")[-1]: np.asarray(v) for k, v in d.items() if k.startswith("memory/routes/")}
            r = len(routes["direction_deg"])
            routes["direction_deg"] = wrap_deg(routes["direction_deg"] + rng.normal(0.0, self.deg, r))
            routes["length_m"] = np.maximum(routes["length_m"] + rng.normal(0.0, self.m, r), 0.0)
            text = f"{text}; routes: {routes_text(routes)}"
            out.update({f"memory/routes/{k}": routes[k] for k in ("direction_deg", "length_m")})
        out["memory/text"] = text
        return out


@dataclass(frozen=True)
class Resize:
    size: int

    def __call__(self, d: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        s = self.size
        out = []
        for img in d["_images"]:
            img = np.asarray(img)
            if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
                raise ValueError(f"policy images must be uint8 HxWx3, got {img.dtype} {img.shape}")
            if img.shape[:2] != (s, s):
                interp = cv2.INTER_AREA if min(img.shape[:2]) > s else cv2.INTER_LINEAR
                img = cv2.resize(img, (s, s), interpolation=interp)
            out.append(np.ascontiguousarray(img))
        return {**d, "_images": out}


@dataclass(frozen=True)
class Prompt:
    template: str
    proprio: str
    memory_text: bool
    n_camera_images: int
    memory_map: bool
    proprio_keys: tuple[str, ...] = ("state",)
    history: int = 0

    def __call__(self, d: dict[str, Any], rng: np.random.Generator | None = None) -> dict[str, Any]:
        instruction = str(d["prompt"]).strip().rstrip(".").lower() if d.get("prompt") else ""
        parts = [IMAGE * self.n_camera_images, self.template.format(instruction=instruction)]
        if self.history:
            parts.append(f" Earlier views: {IMAGE * self.history}")
        if self.memory_map:
            parts.append(f" Map of what you have seen: {IMAGE}")
        if self.memory_text:
            if "memory/text" not in d:
                raise ValueError(
                    "the policy reads the memory's object table (memory/text) but the observation has none"
                )
            parts.append(f" Objects: {d['memory/text']}.")
        if self.proprio == "text":
            state = proprio_vector(d, self.proprio_keys)
            parts.append(" State: " + " ".join(f"{v:.3f}" for v in state) + ".")
        return {**d, "_text": "".join(parts)}


def proprio_vector(d: dict[str, Any], keys: tuple[str, ...]) -> np.ndarray:
    """The proprio vector of an observation dict: its ``keys`` flattened and concatenated, float64 (a key the
    memory computes, e.g. ``memory/routes``: its :data:`~vla.transforms.map_inputs.MEMORY_FEATURES` function)."""
    missing = [k for k in keys if k not in d and k not in MEMORY_FEATURES]
    if missing:
        raise ValueError(
            f"the policy reads the state (inputs.proprio_keys={list(keys)}) but the observation has none of {missing}"
        )
    parts = []
    for k in keys:
        if k in MEMORY_FEATURES:
            parts.append(np.asarray(MEMORY_FEATURES[k].compute(d), dtype=np.float64).ravel())
        else:
            parts.append(np.asarray(d[k], dtype=np.float64).ravel())
    return np.concatenate(parts)


class InputTransform:
    """The composed chain for an :class:`InputConfig`; ``__call__`` a sample dict, get a :class:`ModelInput`."""

    def __init__(self, config: InputConfig) -> None:
        self.config = c = config
        n = len(c.cameras)
        self.steps = [
            SelectImages(c.cameras, c.memory_map, c.history),
            Augment(c.crop_scale, c.jitter, n + c.history, c.image_size) if c.augment else None,
            JitterTable(*c.memory_text_jitter) if c.memory_text and any(c.memory_text_jitter) else None,
            Resize(c.image_size),
            Prompt(c.prompt, c.proprio, c.memory_text, n, c.memory_map, c.proprio_keys, c.history),
        ]
        self.steps = [s for s in self.steps if s is not None]

    def observation(self, obs: dict[str, Any], rng: np.random.Generator | None = None) -> ModelInput:
        """An observation dict (inference, or an action sample's observation in training)."""
        d = dict(obs)
        for step in self.steps:
            d = step(d, rng)
        state = None
        if self.config.proprio == "token":
            state = proprio_vector(d, self.config.proprio_keys)
        return ModelInput(images=d["_images"], text=d["_text"], state=state)

    def question(self, images: list[np.ndarray], prompt: str) -> ModelInput:
        """A visual question: its images resized, its prompt as given (one ``<image>`` per image)."""
        if prompt.count(IMAGE) != len(images):
            raise ValueError(
                f"a question prompt needs one {IMAGE} per image: {prompt.count(IMAGE)} markers, {len(images)} images"
            )
        d = Resize(self.config.image_size)({"_images": list(images)})
        return ModelInput(images=d["_images"], text=prompt)

    def sample(self, sample: Any, rng: np.random.Generator | None = None) -> ModelInput:
        """A training sample (``vla.data.Sample``): action samples through the chain, QA as questions."""
        if sample.kind == "action":
            mi = self.observation(sample.obs, rng)
            mi.actions = np.asarray(sample.actions, dtype=np.float64)
        elif sample.kind == "qa":
            mi = self.question(sample.images, sample.prompt)
            mi.answer = sample.answer
        else:
            raise ValueError(f"unknown sample kind {sample.kind!r}")
        mi.dataset = sample.dataset
        return mi
