"""One render context for the env's life instead of one per reset.

LIBERO resets hard: every episode robosuite builds a new simulator from the scene's XML, and with it a
new offscreen render context -- a GL context and every mesh and texture uploaded again -- 0.9 s of a
2.0 s reset here (docs/BENCHMARKS.md, "What a LIBERO step costs"). The scene's assets do not change
between resets (only where things are), so :class:`KeepRenderContext` hands the first context to each
new simulator instead, as long as what the context holds -- the meshes, textures, height fields and
skins, and the visual settings it was made with -- is the same, byte for byte (:func:`assets_key`); when
it is not, robosuite builds a new one as before. The frames are those of a fresh context, bit for bit
(``tests/test_libero_frames.py`` compares two envs over resets of several trials).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

# the model's arrays a render context uploads (mjr_makeContext): meshes, textures, height fields, skins
_PREFIXES = ("mesh_", "tex_", "hfield_", "skin_", "flex_")


def assets_key(model: Any) -> str:
    """A digest of everything of an ``MjModel`` that a render context is built from."""
    h = hashlib.sha256()
    for name in sorted(n for n in dir(model) if n.startswith(_PREFIXES)):
        value = getattr(model, name)
        if isinstance(value, np.ndarray):
            h.update(name.encode())
            h.update(str(value.shape).encode())
            h.update(np.ascontiguousarray(value).tobytes())
    for struct in ("global_", "quality", "map", "scale", "rgba", "headlight"):
        h.update(repr(getattr(model.vis, struct)).encode())
    h.update(repr(model.stat).encode())
    return h.hexdigest()


class KeepRenderContext:
    """Installed once per robosuite env (:meth:`install`); every simulator the env builds afterwards is
    given the kept context when its assets match."""

    def __init__(self) -> None:
        self.context: Any = None
        self.key: str | None = None
        self.reused = 0  # simulators that got the kept context (for tests and benchmarks)

    def install(self, robosuite_env: Any) -> None:
        if getattr(robosuite_env, "_keep_render_context", None) is self:
            return
        sim = robosuite_env.sim
        self.context, self.key = sim._render_context_offscreen, assets_key(sim.model._model)
        build = robosuite_env._initialize_sim

        def initialize_sim(*args: Any, **kwargs: Any) -> None:
            build(*args, **kwargs)
            self._attach(robosuite_env.sim)

        robosuite_env._initialize_sim = initialize_sim
        robosuite_env._keep_render_context = self

    def _attach(self, sim: Any) -> None:
        if self.context is None or assets_key(sim.model._model) != self.key:
            self.context = None  # robosuite builds a new one in _reset_internal; kept from the next reset on
            return
        ctx = self.context
        ctx.gl_ctx.make_current()  # as building a context does
        ctx.sim, ctx.model, ctx.data = sim, sim.model, sim.data
        sim._render_context_offscreen = ctx
        self.reused += 1

    def after_reset(self, sim: Any) -> None:
        """Keeps the context the reset ended with (a new one when the assets changed)."""
        if self.context is None and sim._render_context_offscreen is not None:
            self.context, self.key = sim._render_context_offscreen, assets_key(sim.model._model)
