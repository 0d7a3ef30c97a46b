"""Headless OpenGL for every MuJoCo renderer in the project.

Two traps (docs/ARCHITECTURE.md §10) are handled here once, so no user code has to know about them:

* ``MUJOCO_GL`` / ``PYOPENGL_PLATFORM`` must say ``egl`` before MuJoCo or PyOpenGL is imported on a
  machine without a display; we set them unless the user already chose something else.
* Mesa's software rasteriser (llvmpipe) and triton each carry an LLVM. If triton is loaded *after*
  the first GL context exists, the process segfaults inside triton. ``before_first_context()``
  imports triton (when it is installed) right before a context is created, which makes every later
  ``import torch / transformers`` safe. It costs ~0.7 s once per process, and only in processes
  that render.
"""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("MUJOCO_GL", "egl")
if os.environ["MUJOCO_GL"] in ("egl", "osmesa"):
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

_prepared = False


def before_first_context() -> None:
    """Call before creating any MuJoCo GL context (idempotent, cheap after the first call)."""
    global _prepared
    if _prepared:
        return
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: F401  (load triton's LLVM before Mesa's; see module docstring)
    _prepared = True
