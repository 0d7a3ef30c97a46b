"""One render context for the env's life instead of one per reset.

LIBERO resets hard: every episode robosuite builds a new simulator from the scene's XML, and with it a
new offscreen render context -- a GL context and every mesh and texture uploaded again -- 0.9 s of a
2.0 s reset here (docs/BENCHMARKS.md, "What a LIBERO step costs"). The scene's assets do not change
between resets (only where things are), so :class:`KeepRenderContext` hands the first context to each
new simulator instead, as long as what the context holds -- the meshes, textures, height fields and
skins, and the visual settings it was made with -- is compiled from the same parts of the MJCF
(:func:`assets_key`); when it is not, robosuite builds a new one as before. The frames are those of
a fresh context, bit for bit (``tests/test_libero_frames.py`` compares two envs over resets of
several trials).

With ``env.render_quality=fast`` the context is instead the decimated copy's
(:class:`envs.libero.render_quality.FastScene`), attached to every simulator the env builds.
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

# the model's arrays a render context uploads (mjr_makeContext): meshes, textures, height fields, skins
_PREFIXES = ("mesh_", "tex_", "hfield_", "skin_", "flex_")
# the parts of the scene's MJCF those arrays are compiled from (the rest says where things are)
_ASSET_TAGS = ("compiler", "size", "visual", "statistic", "default", "asset")


def assets_key(model: Any, xml: str) -> str:
    """A digest of what a render context is built from: the MJCF's asset, default, compiler and visual
    parts (the assets' files and parameters; the compiler is deterministic) and the compiled asset
    arrays' shapes. Cheap (~10 ms): the arrays themselves hold ~160 MB of textures here."""
    h = hashlib.sha256()
    root = ET.fromstring(xml)
    for tag in _ASSET_TAGS:
        for element in root.findall(tag):
            h.update(ET.tostring(element))
    for name in sorted(n for n in dir(model) if n.startswith(_PREFIXES)):
        value = getattr(model, name)
        if isinstance(value, np.ndarray):
            h.update(f"{name}{value.shape}{value.dtype}".encode())
    return h.hexdigest()


class _Freed:
    def free(self) -> None:
        pass


def dispose(context: Any) -> None:
    """Frees a robosuite render context now, inside its own GL context. Left to the garbage collector
    (a context and its simulator refer to each other), its ``mjr_freeContext`` would run in whichever
    GL context is current then -- another env's, or the decimated copy's -- and delete that context's
    meshes and textures, which have the same GL names."""
    if context is None or isinstance(context.con, _Freed):
        return
    context.gl_ctx.make_current()
    context.con.free()
    context.gl_ctx.free()  # leaves no context current; renders make theirs current first
    context.con = _Freed()  # its __del__ frees nothing twice


def _compiled_xml(robosuite_env: Any, args: tuple, kwargs: dict) -> str:
    """The MJCF robosuite's ``_initialize_sim`` compiled (its own rule: the argument, or the model's XML,
    through the env's XML processor)."""
    xml = kwargs.get("xml_string", args[0] if args else None) or robosuite_env.model.get_xml()
    processor = getattr(robosuite_env, "_xml_processor", None)
    return processor(xml) if processor is not None else xml


class KeepRenderContext:
    """Installed once per robosuite env (:meth:`install`); every simulator the env builds afterwards is
    given the kept context when its assets match."""

    def __init__(self, fast: Any = None) -> None:
        self.fast = fast  # a FastScene: every simulator renders through it instead
        self.context: Any = None
        self.key: str | None = None
        self.reused = 0  # simulators that got the kept context (for tests and benchmarks)

    def install(self, robosuite_env: Any) -> None:
        if getattr(robosuite_env, "_keep_render_context", None) is self:
            return
        sim = robosuite_env.sim
        build = robosuite_env._initialize_sim
        if self.fast is not None:
            self.fast.attach(sim, _compiled_xml(robosuite_env, (), {}))

            def initialize_fast(*args: Any, **kwargs: Any) -> None:
                build(*args, **kwargs)
                self.fast.attach(robosuite_env.sim, _compiled_xml(robosuite_env, args, kwargs))

            robosuite_env._initialize_sim = initialize_fast
            robosuite_env._keep_render_context = self
            return
        self.context = sim._render_context_offscreen
        self.key = self._built = assets_key(sim.model._model, _compiled_xml(robosuite_env, (), {}))

        def initialize_sim(*args: Any, **kwargs: Any) -> None:
            build(*args, **kwargs)
            self._built = assets_key(robosuite_env.sim.model._model, _compiled_xml(robosuite_env, args, kwargs))
            self._attach(robosuite_env.sim)

        robosuite_env._initialize_sim = initialize_sim
        robosuite_env._keep_render_context = self

    def _attach(self, sim: Any) -> None:
        if self.context is None or self._built != self.key:
            self.context = None  # robosuite builds a new one in _reset_internal; kept from the next reset on
            return
        ctx = self.context
        ctx.gl_ctx.make_current()  # as building a context does
        ctx.sim, ctx.model, ctx.data = sim, sim.model, sim.data
        sim._render_context_offscreen = ctx
        self.reused += 1

    def after_reset(self, sim: Any) -> None:
        """Keeps the context the reset ended with (a new one when the assets changed)."""
        if self.fast is not None:
            return
        if self.context is None and sim._render_context_offscreen is not None:
            self.context, self.key = sim._render_context_offscreen, self._built
