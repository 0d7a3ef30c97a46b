"""``env.render_quality=fast``: the cameras render a copy of the scene whose meshes hold fewer faces.

A rendered LIBERO frame's cost is the software renderer's vertex work on the scene's ~380k mesh faces
(docs/BENCHMARKS.md, "What a LIBERO step costs"); resolution, shadows and culling change nothing. A
workload that reads every frame (recording demonstrations, the memory) therefore cannot be made faster
with identical images. This opt-in mode renders from a second model compiled from the same MJCF, in
which every large mesh is decimated (:func:`decimate`) to :data:`FACE_FRACTION` of its faces, keeping
its texture coordinates. The physics never sees it: the simulator, its states and every number that is
not an image are those of the default, bit for bit. Before each render the copy takes the simulator's
poses as its last forward pass left them (what the default draws) and the visual parameters of its
cameras, lights, materials, geoms and sites (robosuite resizes sites at run time; ``env.perturb``
moves cameras, dims lights, recolours materials). With nothing decimated its frames are the default's,
bit for bit (``tests/test_libero_render_quality.py``).

The images differ from the default's (docs/BENCHMARKS.md measures by how much, per camera, and what a
learned policy trained on one and evaluated on the other gives). The official protocol and every
headline number use the default.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np

from .render_context import dispose

FACE_FRACTION = 0.2  # of a large mesh's faces the fast copy keeps
MIN_FACES = 1000  # meshes with fewer faces are kept whole (they cost nothing measurable)

# the model's arrays the copy takes from the simulator's before each render: everything about the elements
# a scene draws (robosuite resizes and hides sites at run time, env.perturb moves cameras, dims lights,
# recolours materials); the meshes' own arrays are the copy's
_VISUAL = ("cam_", "light_", "mat_", "geom_", "site_", "tendon_")
# what the scene update reads of the simulator's state
_POSES = (
    "qpos", "mocap_pos", "mocap_quat", "xpos", "xquat", "xmat", "xipos", "ximat", "subtree_com",
    "geom_xpos", "geom_xmat", "site_xpos", "site_xmat", "cam_xpos", "cam_xmat", "light_xpos", "light_xdir",
)  # fmt: skip


def _cluster(vert: np.ndarray, face: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex clustering on a grid of ``cell``: the new vertices (cluster means), the kept faces' new
    vertex ids and which of the input faces they are."""
    grid = np.floor((vert - vert.min(0)) / cell).astype(np.int64)
    size = grid.max(0) + 1
    _, cluster = np.unique((grid[:, 0] * size[1] + grid[:, 1]) * size[2] + grid[:, 2], return_inverse=True)
    n = int(cluster.max()) + 1
    counts = np.bincount(cluster, minlength=n).astype(np.float64)
    new_vert = np.stack([np.bincount(cluster, vert[:, k], minlength=n) for k in range(3)], 1) / counts[:, None]
    f = cluster[face]
    kept = np.flatnonzero((f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2]))
    s = np.sort(f[kept], axis=1)
    _, first = np.unique((s[:, 0] * n + s[:, 1]) * n + s[:, 2], return_index=True)  # one of each duplicate
    kept = kept[np.sort(first)]
    return new_vert, f[kept], kept


def decimate(
    vert: np.ndarray, face: np.ndarray, fraction: float = FACE_FRACTION, min_faces: int = MIN_FACES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A mesh with about ``fraction`` of its faces, by vertex clustering on a grid whose cell is found by
    bisection. Returns the new vertices, faces and, for each new face, the input face it comes from (so
    a face keeps its texture coordinates: MuJoCo indexes them per face corner, apart from the
    positions). Vertices that share a cell share one position, so seams stay closed. Deterministic."""
    vert, face = np.asarray(vert, np.float64), np.asarray(face, np.int64)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0 or len(face) < min_faces:
        return vert, face, np.arange(len(face))
    target = fraction * len(face)
    extent = float(np.max(vert.max(0) - vert.min(0)))
    lo, hi = extent * 1e-6, extent  # faces kept fall as the cell grows
    best = None
    for _ in range(24):
        cell = (lo * hi) ** 0.5
        out = _cluster(vert, face, cell)
        if best is None or abs(len(out[1]) - target) < abs(len(best[1]) - target):
            best = out
        if abs(len(out[1]) - target) <= 0.02 * target:
            break
        lo, hi = (cell, hi) if len(out[1]) > target else (lo, cell)
    new_vert, new_face, origin = best
    used = np.unique(new_face)  # drop the clusters no kept face uses
    remap = np.full(len(new_vert), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return new_vert[used], remap[new_face], origin


def _mat(quat: np.ndarray) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, quat)
    return mat.reshape(3, 3)


def render_model(physics: mujoco.MjModel, xml: str, fraction: float = FACE_FRACTION) -> mujoco.MjModel:
    """The MJCF ``xml`` compiled again with every mesh of at least :data:`MIN_FACES` faces decimated to
    ``fraction`` (faces, texture coordinates and normals taken from the compiled ``physics`` model).
    Each decimated mesh is put back in the frame the simulator's copy of it has (MuJoCo re-centres a
    mesh when it compiles it), so every geom keeps the simulator's pose: the copy renders from the
    simulator's own geom positions (:meth:`FastScene.sync`)."""
    spec = mujoco.MjSpec.from_string(xml)
    moved = []
    for i, mesh in enumerate(spec.meshes):
        fadr, fnum = physics.mesh_faceadr[i], physics.mesh_facenum[i]
        if fnum < MIN_FACES:
            continue
        adr, num = physics.mesh_vertadr[i], physics.mesh_vertnum[i]
        new_vert, new_face, origin = decimate(
            physics.mesh_vert[adr : adr + num], physics.mesh_face[fadr : fadr + fnum], fraction
        )
        # a vertex per (position, normal, texture coordinate) of the kept corners: MuJoCo reads a mesh given
        # by arrays with one normal and one texture coordinate per vertex
        nadr, tadr, tnum = physics.mesh_normaladr[i], physics.mesh_texcoordadr[i], physics.mesh_texcoordnum[i]
        corners = [new_face, physics.mesh_facenormal[fadr : fadr + fnum][origin]]
        if tnum:
            corners.append(physics.mesh_facetexcoord[fadr : fadr + fnum][origin])
        corners = np.stack([c.reshape(-1) for c in corners], 1)
        unique, vertex = np.unique(corners, axis=0, return_inverse=True)
        mesh.file, mesh.content_type = "", ""
        mesh.scale, mesh.refpos, mesh.refquat = [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL  # the copy's masses are never used
        mesh.uservert = new_vert[unique[:, 0]].reshape(-1).tolist()
        mesh.userface = vertex.reshape(-1).tolist()
        mesh.usernormal = physics.mesh_normal[nadr + unique[:, 1]].reshape(-1).tolist()
        mesh.usertexcoord = physics.mesh_texcoord[tadr + unique[:, 2]].reshape(-1).tolist() if tnum else []
        moved.append(i)
    model = spec.compile()
    for i in moved:  # undo the compiler's re-centring: the vertices given were in the simulator's frame
        rot, pos = _mat(model.mesh_quat[i]), model.mesh_pos[i]
        adr, num = model.mesh_vertadr[i], model.mesh_vertnum[i]
        model.mesh_vert[adr : adr + num] = model.mesh_vert[adr : adr + num] @ rot.T + pos
        nadr, nnum = model.mesh_normaladr[i], model.mesh_normalnum[i]
        model.mesh_normal[nadr : nadr + nnum] = model.mesh_normal[nadr : nadr + nnum] @ rot.T
    model.mesh_pos[:], model.mesh_quat[:] = physics.mesh_pos, physics.mesh_quat  # the frame they are in now
    # (every geom_* array, poses included, is the simulator's: FastScene.sync copies them before each render)
    model.stat.extent, model.stat.center[:] = physics.stat.extent, physics.stat.center  # depth's near/far
    model.stat.meansize = physics.stat.meansize
    return model


class FastScene:
    """The decimated copy of one env's scene: its model (rebuilt only when the MJCF changes), its data,
    and a render context drawing from them for whichever simulator is attached."""

    def __init__(self, fraction: float = FACE_FRACTION) -> None:
        self.fraction = float(fraction)
        self.key: str | None = None
        self.model: mujoco.MjModel | None = None
        self.data: mujoco.MjData | None = None
        self.context: Any = None
        self.sim: Any = None
        self.builds = 0  # models compiled (for tests and benchmarks)

    def attach(self, sim: Any, xml: str) -> Any:
        """Gives the simulator ``sim`` (robosuite's ``MjSim``) the copy's render context; builds the copy
        when ``xml`` is not the one it was built from."""
        key = hashlib.sha256(xml.encode()).hexdigest()
        if key != self.key:
            self.model = render_model(sim.model._model, xml, self.fraction)
            self.data = mujoco.MjData(self.model)
            self._visual = [
                n for n in dir(self.model) if n.startswith(_VISUAL) and isinstance(getattr(self.model, n), np.ndarray)
            ]
            self.key, self.builds = key, self.builds + 1
            dispose(self.context)
            self.context = None
        self.sim = sim
        if self.context is None:
            self.context = _context(self)
        previous = sim._render_context_offscreen
        if previous is not None and previous is not self.context:  # robosuite's own, built with the env
            dispose(previous)  # (every reset sets the context's geom groups: collision meshes hidden)
        self.context.gl_ctx.make_current()
        sim._render_context_offscreen = self.context
        return self.context

    def sync(self) -> None:
        """The simulator's poses (as its last forward pass left them: what the default renders) and
        visual parameters into the copy."""
        src_m, src_d = self.sim.model._model, self.sim.data._data
        for name in self._visual:
            getattr(self.model, name)[...] = getattr(src_m, name)
        for name in _POSES:
            getattr(self.data, name)[:] = getattr(src_d, name)

    def close(self) -> None:
        dispose(self.context)
        self.context = self.sim = None


def _context(scene: FastScene) -> Any:
    """A robosuite offscreen render context over the copy that syncs it before every render."""
    from robosuite.utils.binding_utils import MjRenderContextOffscreen

    class FastContext(MjRenderContextOffscreen):
        def render(self, width, height, camera_id=None, segmentation=False):  # noqa: ANN001
            scene.sync()
            super().render(width, height, camera_id=camera_id, segmentation=segmentation)

    shim = SimpleNamespace(
        model=SimpleNamespace(_model=scene.model, vis=scene.model.vis),
        data=SimpleNamespace(_data=scene.data),
        forward=scene.sync,
        add_render_context=lambda ctx: None,
    )
    return FastContext(shim, device_id=-1)
