"""robosuite's instance masks by a lookup table: the same ids, bit for bit, without a Python call per pixel.

robosuite's instance-segmentation sensor renders the segmentation pass and then maps every pixel's
geom id to its instance with ``np.fromiter(map(lambda x: mapping.get(x, -1), ...))``: 16-29 ms per
256 px camera here, as much as the pass itself (docs/BENCHMARKS.md, "What a LIBERO step costs").
:func:`install` replaces that sensor with one that renders the same pass and maps the ids through an
array built from the very same dictionary (ids it does not hold -- no geom, another object type --
map to -1, as ``mapping.get`` does), so the masks are identical (``tests/test_libero_frames.py``
compares the two on rendered frames).
"""

from __future__ import annotations

from typing import Any

import numpy as np

SUFFIX = "_segmentation_instance"


def instance_lut(robosuite_env: Any) -> np.ndarray:
    """geom id -> instance index (-1: none), from the mapping robosuite's own sensor builds."""
    model = robosuite_env.model
    name2id = {inst: i for i, inst in enumerate(list(model.instances_to_ids.keys()))}
    mapping = {int(g): name2id[inst] for g, inst in model.geom_ids_to_instances.items()}
    lut = np.full(max(mapping, default=-1) + 1, -1, dtype=np.int32)
    for g, i in mapping.items():
        lut[g] = i
    return lut


def map_ids(ids: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``mapping.get(id, -1) + 1`` for every id, as int32."""
    out = np.full(ids.shape, -1, dtype=np.int32)
    known = (ids >= 0) & (ids < len(lut))
    out[known] = lut[ids[known]]
    return out + np.int32(1)


def install(robosuite_env: Any, width: int, height: int) -> None:
    """Replaces every instance-segmentation sensor of the env (idempotent; after each reset, before the
    frame gate wraps the sensors: a hard reset builds new observables)."""
    from robosuite.utils import macros
    from robosuite.utils.mjcf_utils import IMAGE_CONVENTION_MAPPING

    convention = IMAGE_CONVENTION_MAPPING[macros.IMAGE_CONVENTION]
    lut = None
    for observable in robosuite_env._observables.values():
        sensor = observable._sensor
        if not observable.name.endswith(SUFFIX) or hasattr(sensor, "_frame_gate") or hasattr(sensor, "_lut"):
            continue
        lut = instance_lut(robosuite_env) if lut is None else lut
        observable._sensor = _sensor(robosuite_env, observable.name[: -len(SUFFIX)], width, height, convention, lut)
        observable._sensor._original = sensor  # robosuite's own, for the comparison test


def _sensor(env: Any, camera: str, width: int, height: int, convention: int, lut: np.ndarray) -> Any:
    def camera_segmentation(obs_cache: dict) -> np.ndarray:
        seg = env.sim.render(camera_name=camera, width=width, height=height, depth=False, segmentation=True)
        return map_ids(seg[::convention, :, 1], lut).reshape(height, width, 1)

    camera_segmentation.__modality__ = "image"
    camera_segmentation._lut = lut
    return camera_segmentation
