"""Offscreen rendering of an apartment: ego RGB + metric depth + instance ids, and the top-down view.

One GL context and one ``MjrContext`` serve both views (different viewports of one offscreen
buffer). They are created on first use, never in ``__init__``, so an env survives a fork into a
worker process; :meth:`HouseRenderer.close` frees them.

An ego observation costs two passes instead of ``mujoco.Renderer``'s three: a normal pass read as
RGB, and a segmentation pass read as ids *and* depth at once (MuJoCo itself computes depth in
segmentation mode, and the depth of that pass is the same z-buffer). Depth is linearised exactly as
``mujoco.Renderer`` 3.9 does (reversed-Z), which a test checks pixel for pixel.

The top-down camera is orthographic: its RGB and segmentation are exact, its depth is not
(docs/ARCHITECTURE.md §10), so it is never read.
"""

from __future__ import annotations

import mujoco
import numpy as np

from envs import _gl
from .mjcf import GROUP_CEILING, GROUP_GROUND, GROUP_ITEMS, GROUP_STRUCTURE, CompiledHouse


class HouseRenderer:
    def __init__(self, house: CompiledHouse, ego_width: int, ego_height: int, topdown_width: int, topdown_height: int):
        self.house = house
        self.model = house.model
        self.ego_size = (ego_width, ego_height)
        self.topdown_size = (topdown_width, topdown_height)
        self._gl = None
        self._con = None
        self._scene = None
        self._lut_cache: dict[int, np.ndarray] = {}
        self._opt_ego = mujoco.MjvOption()
        self._opt_top = mujoco.MjvOption()
        for g in range(6):
            self._opt_ego.geomgroup[g] = int(g in (GROUP_STRUCTURE, GROUP_ITEMS, GROUP_GROUND, GROUP_CEILING))
            self._opt_top.geomgroup[g] = int(g in (GROUP_STRUCTURE, GROUP_ITEMS, GROUP_GROUND))
        self._cam_ego = mujoco.MjvCamera()
        self._cam_ego.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._cam_ego.fixedcamid = house.ego_cam
        self._cam_top = mujoco.MjvCamera()
        self._cam_top.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._cam_top.fixedcamid = house.topdown_cam
        extent = self.model.stat.extent
        near, far = np.float32(self.model.vis.map.znear * extent), np.float32(self.model.vis.map.zfar * extent)
        c = -(far + near) / (far - near)
        d = -(np.float32(2) * far * near) / (far - near)
        self._c_coef = float(np.float32(-0.5) * c - np.float32(0.5))
        self._d_coef = float(np.float32(-0.5) * d)

    # ------------------------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._con is not None:
            return
        _gl.before_first_context()
        w = max(self.ego_size[0], self.topdown_size[0])
        h = max(self.ego_size[1], self.topdown_size[1])
        self._gl = mujoco.GLContext(w, h)
        self._gl.make_current()
        self._con = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_50)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._con)
        self._con.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._scene = mujoco.MjvScene(self.model, maxgeom=self.model.ngeom + 16)

    @property
    def is_open(self) -> bool:
        return self._con is not None

    def close(self) -> None:
        if self._gl is not None:
            self._gl.make_current()
        if self._con is not None:
            self._con.free()
        if self._gl is not None:
            self._gl.free()
        self._gl = self._con = self._scene = None

    def __del__(self) -> None:  # best effort; call close() explicitly
        try:
            self.close()
        except Exception:
            pass

    # ------------------------------------------------------------------------------------------
    def _segid_to_instance(self) -> np.ndarray:
        """Lookup from segmentation id (0 = background, k = scene geom k-1) to instance id.

        The scene is static (the agent carries no geom), so the scene's geom list only depends on
        the view's geom groups; the table is cached per scene size.
        """
        scn = self._scene
        n = scn.ngeom
        cached = self._lut_cache.get(n)
        if cached is not None:
            return cached
        lut = np.zeros(n + 1, dtype=np.int32)
        gi = self.house.geom_instance
        for k in range(n):
            g = scn.geoms[k]
            if g.objtype == mujoco.mjtObj.mjOBJ_GEOM and g.segid >= 0:
                lut[g.segid + 1] = gi[g.objid]
        self._lut_cache[n] = lut
        return lut

    def _segid_to_geom(self) -> np.ndarray:
        scn = self._scene
        lut = np.full(scn.ngeom + 1, -1, dtype=np.int32)
        for k in range(scn.ngeom):
            g = scn.geoms[k]
            if g.objtype == mujoco.mjtObj.mjOBJ_GEOM and g.segid >= 0:
                lut[g.segid + 1] = g.objid
        return lut

    def _render(self, data: mujoco.MjData, opt, cam, size, segment: bool, want_depth: bool):
        w, h = size
        rect = mujoco.MjrRect(0, 0, w, h)
        scn = self._scene
        scn.flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = segment
        scn.flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = segment
        mujoco.mjr_render(rect, scn, self._con)
        rgb = np.empty((h, w, 3), dtype=np.uint8)
        depth = np.empty((h, w), dtype=np.float32) if want_depth else None
        mujoco.mjr_readPixels(rgb, depth, rect, self._con)
        return rgb, depth

    def ego(self, data: mujoco.MjData, want_rgb: bool = True) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """(rgb uint8 HxWx3 or None, depth float32 HxW metres (inf = nothing), instance int32 HxW) of the ego camera."""
        self._ensure()
        self._gl.make_current()
        mujoco.mjv_updateScene(
            self.model, data, self._opt_ego, None, self._cam_ego, mujoco.mjtCatBit.mjCAT_ALL, self._scene
        )
        rgb = None
        if want_rgb:
            rgb, _ = self._render(data, self._opt_ego, self._cam_ego, self.ego_size, segment=False, want_depth=False)
            rgb = np.ascontiguousarray(rgb[::-1])
        seg, zbuf = self._render(data, self._opt_ego, self._cam_ego, self.ego_size, segment=True, want_depth=True)
        segid = seg[::-1].astype(np.int32)
        segid = segid[..., 0] | (segid[..., 1] << 8) | (segid[..., 2] << 16)
        instance = self._segid_to_instance()[segid]
        z = zbuf[::-1].astype(np.float64)
        depth = (self._d_coef / (z + self._c_coef)).astype(np.float32)
        depth[segid == 0] = np.inf  # nothing drawn there (cannot happen inside closed rooms)
        return rgb, depth, np.ascontiguousarray(instance)

    def topdown(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """(rgb uint8, geom id int32 (-1 = none)) of the orthographic top-down camera, ceiling left out."""
        self._ensure()
        self._gl.make_current()
        mujoco.mjv_updateScene(
            self.model, data, self._opt_top, None, self._cam_top, mujoco.mjtCatBit.mjCAT_ALL, self._scene
        )
        rgb, _ = self._render(data, self._opt_top, self._cam_top, self.topdown_size, segment=False, want_depth=False)
        seg, _ = self._render(data, self._opt_top, self._cam_top, self.topdown_size, segment=True, want_depth=False)
        segid = seg[::-1].astype(np.int32)
        segid = segid[..., 0] | (segid[..., 1] << 8) | (segid[..., 2] << 16)
        return np.ascontiguousarray(rgb[::-1]), self._segid_to_geom()[segid]
