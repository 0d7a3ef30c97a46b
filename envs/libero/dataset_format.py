"""The official LIBERO HDF5 conventions, as LIBERO's ``scripts/create_dataset.py`` writes them.

File attributes (on ``data``): ``env_name`` (the problem class, e.g. ``Libero_Tabletop_Manipulation``),
``problem_info`` (JSON: ``problem_name``, ``domain_name``, ``language_instruction``),
``macros_image_convention`` (``"opengl"``: images stored as robosuite renders them, bottom row
first), ``bddl_file_name``, ``bddl_file_content``, ``env_args`` (JSON: ``type`` 1, ``env_name``,
``problem_name``, ``bddl_file``, ``env_kwargs``: the keyword arguments LIBERO's problem class is
built with -- ``TASK_MAPPING[problem_name](**env_kwargs)`` rebuilds the env), ``num_demos``,
``total``. Per demo: ``model_file`` (the MJCF of the episode), ``init_state``, ``num_samples``.

The official images are in robosuite's OpenGL convention; the evaluation protocol (and OpenVLA's
regenerated datasets) rotate them by 180 degrees. :func:`record_frame` takes a frame in the env's
orientation to the stored one; readers take it back (:mod:`vla.data.libero_hdf5`).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..orientation import reorient, reorient_K

IMAGE_CONVENTION = "opengl"  # what the official files store (robosuite.macros.IMAGE_CONVENTION)


def env_kwargs(env) -> dict[str, Any]:
    """``TASK_MAPPING[problem_name](**env_kwargs)`` builds this task as LIBERO does (JSON-ready)."""
    import robosuite

    ce = env._ensure_sim()
    inner = ce.env
    cams = [env.CAMERAS[c] for c in env.cameras]
    return {
        "bddl_file_name": env.bddl_file,
        "robots": ["Panda"],
        "controller_configs": robosuite.load_controller_config(default_controller=env.controller),
        "gripper_types": "default",
        "initialization_noise": None,
        "use_camera_obs": bool(env.render_cameras),
        "has_renderer": False,
        "has_offscreen_renderer": bool(env.render_cameras),
        "render_camera": "frontview",
        "control_freq": int(inner.control_freq),
        "horizon": int(inner.horizon),
        "ignore_done": True,
        "hard_reset": bool(env.hard_reset),
        "camera_names": cams,
        "camera_heights": int(env.resolution),
        "camera_widths": int(env.resolution),
        "camera_depths": bool(env.depth and env.render_cameras),
        "camera_segmentations": "instance" if env.segmentation and env.render_cameras else None,
    }


def dataset_attrs(env) -> dict[str, str]:
    """File-level attributes of an official LIBERO HDF5 file for this task."""
    ce = env._ensure_sim()
    problem_info = {
        "problem_name": ce.problem_name,
        "domain_name": ce.domain_name,
        "language_instruction": ce.language_instruction,
    }
    env_name = type(ce.env).__name__
    env_args = {
        "type": 1,
        "env_name": env_name,
        "problem_name": ce.problem_name,
        "bddl_file": env.bddl_file,
        "env_kwargs": env_kwargs(env),
        # ours, for readers that rebuild the project's env: suite, task, protocol settings
        "vla_spatial": {
            "suite": env.suite,
            "task_id": env.task_id,
            "resolution": env.resolution,
            "cameras": list(env.cameras),
            "controller": env.controller,
            "orientation": env.orientation,
            "settle_steps": env.settle_steps,
            "env_seed": env.env_seed,
        },
    }
    with open(env.bddl_file) as f:
        bddl = f.read()
    return {
        "env_name": env_name,
        "problem_info": json.dumps(problem_info),
        "macros_image_convention": IMAGE_CONVENTION,
        "tag": "libero-v1",  # as the official files
        "bddl_file_name": env.bddl_file,
        "bddl_file_content": bddl,
        "env_args": json.dumps(env_args),
        # where the images and the per-pixel extras are stored (the official convention) and how
        # the env delivered them (a reader turns them back for a policy trained on the protocol)
        "image_orientation": IMAGE_CONVENTION,
        "env_image_orientation": env.orientation,
    }


def record_frame(frame, orientation: str) -> dict[str, np.ndarray]:
    """A :class:`CameraFrame` delivered in ``orientation``, as the official files store it."""
    h, w = frame.rgb.shape[:2]
    out = {
        "rgb": np.ascontiguousarray(reorient(frame.rgb, orientation, IMAGE_CONVENTION)),
        "depth": np.ascontiguousarray(reorient(frame.depth, orientation, IMAGE_CONVENTION)),
        "K": reorient_K(frame.K, (h, w), orientation, IMAGE_CONVENTION),
        "T_world_cam": frame.T_world_cam,
    }
    if frame.instance is not None:
        out["instance"] = np.ascontiguousarray(reorient(frame.instance, orientation, IMAGE_CONVENTION))
    return out
