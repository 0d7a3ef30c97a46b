"""``env.perturb``: the robustness factors of LIBERO-Plus as seeded, composable options of a LIBERO env.

A perturbation is a set of ``factor:level`` pairs (``env.perturb=camera:2`` or ``camera:2+light:1``;
level 0 or an empty string is the nominal scene). Everything else of the official protocol stays as
it is: the init state (official or sampled), the settle steps, the step limit and success. Each
factor draws from its own generator seeded by (trial, factor), so trial ``k`` of a perturbed run is
the same scene on every worker, resume and rerun, and adding a second factor does not change the
first one's draw.

Level L (1-3) of each factor changes:

* ``camera``: the agentview camera moves ``3 L`` cm in a random direction and turns ``5 L`` deg
  about a random axis (the wrist camera stays on the hand);
* ``robot``: the arm's 7 joints start off by a Gaussian of ``0.05 L`` rad each (official states too);
* ``language``: the instruction is paraphrased: L=1 verb synonyms, L=2 also a polite frame, L=3 also
  an irrelevant sentence;
* ``light``: every light's diffuse and ambient scaled by ``U[1 - 0.2 L, 1 + 0.2 L]``, its direction
  turned up to ``10 L`` deg;
* ``texture``: the table, floor and wall materials' colour mixed ``0.25 L`` of the way to a random one;
* ``noise``: Gaussian sensor noise: RGB ``4 L`` of 255, depth ``L`` % (multiplicative),
  proprioceptive state ``0.002 L``;
* ``layout``: every movable object shifted ``1.5 L`` cm in a random horizontal direction (before
  the settle steps).

The scene truth an expert reads follows the simulator (a moved object is where it is), so the
scripted expert measures what a factor does to the task, and a learned policy what it does to the
policy. These are LIBERO-Plus's factors with magnitudes chosen here (documented above), not its
released perturbed scenes; distractor objects (a change of the scene's MJCF) are not offered.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

FACTORS = ("camera", "robot", "language", "light", "texture", "noise", "layout")
MAX_LEVEL = 3
PERTURBED_CAMERA = "agentview"  # robosuite's name of the camera that moves
MATERIALS = ("table", "floor", "wall")  # materials whose name contains one of these are re-coloured


def allowed() -> str:
    """What ``env.perturb`` takes (every parse error names it)."""
    return f"factors: {', '.join(FACTORS)}; levels 0-{MAX_LEVEL} (e.g. env.perturb=camera:2+light:1)"


def parse(spec: str | None) -> dict[str, int]:
    """``"camera:2+light:1"`` -> ``{"camera": 2, "light": 1}`` (levels 0 dropped); otherwise a clear error
    that names the factors and the level range."""
    out: dict[str, int] = {}
    for part in [p.strip() for p in str(spec or "").replace(",", "+").split("+") if p.strip()]:
        name, sep, level = part.partition(":")
        name = name.strip()
        if name not in FACTORS:
            raise ValueError(f"env.perturb: unknown factor {name!r} in {spec!r}; {allowed()}")
        if name in out:
            raise ValueError(f"env.perturb: factor {name!r} given twice in {spec!r}; {allowed()}")
        try:
            lv = int(level) if sep else 1
        except ValueError:
            raise ValueError(
                f"env.perturb: level of {name!r} must be an integer 0-{MAX_LEVEL}, got {level!r}; {allowed()}"
            ) from None
        if not 0 <= lv <= MAX_LEVEL:
            raise ValueError(f"env.perturb: level of {name!r} must be 0-{MAX_LEVEL}, got {lv}; {allowed()}")
        if lv:
            out[name] = lv
    return out


def canonical(spec: str | None) -> str:
    """The spec in a fixed order (what a run's identity and its summary record)."""
    p = parse(spec)
    return "+".join(f"{f}:{p[f]}" for f in FACTORS if f in p)


def rng(trial: int, factor: str) -> np.random.Generator:
    return np.random.default_rng([int(trial), zlib.crc32(factor.encode())])


def _random_rotation(g: np.random.Generator, max_deg: float) -> np.ndarray:
    axis = g.normal(size=3)
    axis /= np.linalg.norm(axis)
    angle = np.deg2rad(max_deg)
    x, y, z = axis
    c, s, t = np.cos(angle), np.sin(angle), 1 - np.cos(angle)
    return np.array(
        [
            [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
            [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
            [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
        ]
    )


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # MuJoCo's (w, x, y, z)
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def _mat_to_quat(R: np.ndarray) -> np.ndarray:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).ravel())
    return q


@dataclass
class Perturber:
    """Applies one parsed perturbation to a LIBERO env at each reset and to each observation."""

    factors: dict[str, int]

    def __post_init__(self) -> None:
        self._pristine: tuple[int, dict[str, np.ndarray]] | None = None
        self._noise: np.random.Generator | None = None

    def __bool__(self) -> bool:
        return bool(self.factors)

    # ------------------------------------------------------------------ at reset (before settling)
    def apply_scene(self, sim: Any, inner: Any, trial: int) -> None:
        """Model (camera, light, texture) and state (robot, layout) changes for ``trial``; the model's
        nominal values are restored first, so an env that keeps its model across resets
        (``hard_reset=false``) never accumulates them."""
        model, data = sim.model._model, sim.data._data
        self._restore(model)
        f = self.factors
        if "camera" in f:
            g, L = rng(trial, "camera"), f["camera"]
            cid = model.camera(PERTURBED_CAMERA).id
            d = g.normal(size=3)
            model.cam_pos[cid] = model.cam_pos[cid] + 0.03 * L * d / np.linalg.norm(d)
            model.cam_quat[cid] = _quat_mul(_mat_to_quat(_random_rotation(g, 5.0 * L)), model.cam_quat[cid])
        if "light" in f:
            g, L = rng(trial, "light"), f["light"]
            for i in range(model.nlight):
                model.light_diffuse[i] = np.clip(model.light_diffuse[i] * g.uniform(1 - 0.2 * L, 1 + 0.2 * L), 0, 1)
                model.light_ambient[i] = np.clip(model.light_ambient[i] * g.uniform(1 - 0.2 * L, 1 + 0.2 * L), 0, 1)
                direction = _random_rotation(g, g.uniform(0, 10.0 * L)) @ model.light_dir[i]
                model.light_dir[i] = direction / np.linalg.norm(direction)
        if "texture" in f:
            g, L = rng(trial, "texture"), f["texture"]
            for i in _material_ids(model):
                colour = np.append(g.uniform(0, 1, size=3), model.mat_rgba[i][3])
                model.mat_rgba[i] = (1 - 0.25 * L) * model.mat_rgba[i] + 0.25 * L * colour
        if "robot" in f:
            g, L = rng(trial, "robot"), f["robot"]
            idx = np.asarray(inner.robots[0]._ref_joint_pos_indexes)
            data.qpos[idx] = data.qpos[idx] + g.normal(0.0, 0.05 * L, size=len(idx))
        if "layout" in f:
            g, L = rng(trial, "layout"), f["layout"]
            for name in sorted(inner.objects_dict):
                for joint in inner.objects_dict[name].joints[:1]:
                    j = model.joint(joint)
                    if int(j.type[0]) != 0:  # a free joint only (mjJNT_FREE): fixtures do not move
                        continue
                    a = int(j.qposadr[0])
                    theta = g.uniform(0, 2 * np.pi)
                    data.qpos[a : a + 2] = data.qpos[a : a + 2] + 0.015 * L * np.array([np.cos(theta), np.sin(theta)])
        import mujoco

        mujoco.mj_forward(model, data)
        self._noise = rng(trial, "noise") if "noise" in f else None

    def _restore(self, model: Any) -> None:
        keys = ("cam_pos", "cam_quat", "light_diffuse", "light_ambient", "light_dir", "mat_rgba")
        if self._pristine is not None and self._pristine[0] == id(model):
            for k, v in self._pristine[1].items():
                getattr(model, k)[:] = v
        else:
            self._pristine = (id(model), {k: getattr(model, k).copy() for k in keys})

    # ------------------------------------------------------------------ per observation
    def instruction(self, text: str, trial: int) -> str:
        if "language" not in self.factors:
            return text
        return paraphrase(text, self.factors["language"], rng(trial, "language"))

    def noisy_image(self, rgb: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sensor noise on one camera's RGB and depth (the inputs unchanged without ``noise``)."""
        if self._noise is None:
            return rgb, depth
        g, L = self._noise, self.factors["noise"]
        noisy = np.clip(np.rint(rgb.astype(np.float32) + g.normal(0.0, 4.0 * L, size=rgb.shape)), 0, 255)
        return noisy.astype(np.uint8), (depth * (1.0 + g.normal(0.0, 0.01 * L, size=depth.shape))).astype(np.float32)

    def noisy_state(self, x: np.ndarray) -> np.ndarray:
        """Sensor noise on a proprioceptive vector."""
        if self._noise is None:
            return x
        return (x + self._noise.normal(0.0, 0.002 * self.factors["noise"], size=x.shape)).astype(x.dtype)


def _material_ids(model: Any) -> list[int]:
    return [i for i in range(model.nmat) if any(k in model.material(i).name.lower() for k in MATERIALS)]


# ---------------------------------------------------------------------- language
VERBS = {
    "pick up": ("grab", "lift", "take"),
    "place": ("put", "set", "drop"),
    "put": ("place", "set", "move"),
    "open": ("pull open", "swing open"),
    "close": ("shut", "push closed"),
    "turn on": ("switch on", "power on"),
    "turn off": ("switch off", "power off"),
    "push": ("shove", "slide"),
    "stack": ("pile", "set"),
}
FRAMES = ("please {}", "{}, please", "could you {}?", "your task: {}", "now {}")
ASIDES = (
    "take your time.",
    "be careful not to knock anything over.",
    "the table may look a little different today.",
    "ignore everything else on the table.",
)
_VERB = re.compile(r"\b(" + "|".join(sorted(map(re.escape, VERBS), key=len, reverse=True)) + r")\b")


def paraphrase(text: str, level: int, g: np.random.Generator) -> str:
    """The instruction reworded, every object name kept (the task stays the same): L=1 verb synonyms,
    L=2 also a polite frame, L=3 also an irrelevant sentence after it."""
    out = _VERB.sub(lambda m: VERBS[m.group(1)][int(g.integers(len(VERBS[m.group(1)])))], text)
    if level >= 2:
        out = FRAMES[int(g.integers(len(FRAMES)))].format(out)
    if level >= 3:
        out = f"{out}{'' if out.endswith('?') else '.'} {ASIDES[int(g.integers(len(ASIDES)))]}"
    return out
