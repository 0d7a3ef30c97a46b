"""LIBERO meshes for the apartments: read, rescale, simplify.

LIBERO's visual meshes are MuJoCo ``.msh`` files (int32 counts ``nvert, nnormal, ntexcoord, nface``,
then float32 vertices, normals, texture coordinates and int32 faces). Rendering here is software
(llvmpipe), where every triangle costs, so a mesh is simplified by vertex clustering on a grid of
``MeshGroup.cell_m`` metres *after* rescaling: vertices in one cell merge into their mean, faces that
collapse are dropped. Merged vertices are convex combinations of originals, so the simplified mesh
stays inside the original bounding box (the item's box in the scene truth).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from .catalog import MESHES, libero_assets_dir


def read_msh(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices Nx3 float64, faces Mx3 int64) of a MuJoCo .msh file."""
    raw = Path(path).read_bytes()
    if len(raw) < 16:
        raise ValueError(f"{path}: not a .msh file (too short)")
    nv, nn, nt, nf = (int(x) for x in np.frombuffer(raw[:16], dtype=np.int32))
    expected = 16 + 12 * nv + 12 * nn + 8 * nt + 12 * nf
    if min(nv, nn, nt, nf) < 0 or len(raw) != expected:
        raise ValueError(
            f"{path}: .msh header ({nv}, {nn}, {nt}, {nf}) does not match its size {len(raw)} (expected {expected})"
        )
    off = 16
    v = np.frombuffer(raw, dtype=np.float32, count=3 * nv, offset=off).reshape(-1, 3).astype(np.float64)
    off += 12 * nv + 12 * nn + 8 * nt
    f = np.frombuffer(raw, dtype=np.int32, count=3 * nf, offset=off).reshape(-1, 3).astype(np.int64)
    if nf and (f.min() < 0 or f.max() >= nv):
        raise ValueError(f"{path}: face indices out of range")
    return v, f


@lru_cache(maxsize=None)
def native_mesh(name: str) -> tuple[np.ndarray, np.ndarray]:
    """All files of a mesh group merged into one (vertices, faces) in the native frame."""
    root = libero_assets_dir()
    if root is None:
        raise FileNotFoundError("LIBERO's mesh assets are not installed (run `make setup`), or set use_meshes=false")
    vs, fs, offset = [], [], 0
    for rel in MESHES[name].files:
        v, f = read_msh(root / rel)
        vs.append(v)
        fs.append(f + offset)
        offset += len(v)
    return np.concatenate(vs), np.concatenate(fs)


def cluster_simplify(v: np.ndarray, f: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertex clustering: merge the vertices of each ``cell``-sized grid cell, drop degenerate and repeated faces."""
    if cell <= 0:
        return v, f
    q = np.floor(v / cell).astype(np.int64)
    q -= q.min(axis=0)
    span = q.max(axis=0) + 1
    _, inv = np.unique((q[:, 0] * span[1] + q[:, 1]) * span[2] + q[:, 2], return_inverse=True)
    inv = inv.ravel()
    n = int(inv.max()) + 1
    sums = np.zeros((n, 3))
    np.add.at(sums, inv, v)
    verts = sums / np.bincount(inv, minlength=n)[:, None]
    faces = inv[f]
    ok = (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    faces = faces[ok]
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    faces = faces[np.sort(first)]
    used, remap = np.unique(faces, return_inverse=True)
    return verts[used], remap.reshape(-1, 3)


@lru_cache(maxsize=256)
def scaled_mesh(name: str, scale: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """The group's mesh scaled per native axis and simplified (cached per process)."""
    v, f = native_mesh(name)
    return cluster_simplify(v * np.asarray(scale), f, MESHES[name].cell_m)


@lru_cache(maxsize=256)
def mesh_xml_arrays(name: str, scale: tuple[float, float, float]) -> tuple[str, str]:
    """``vertex`` and ``face`` attribute strings of :func:`scaled_mesh` for an inline MJCF ``<mesh>``."""
    v, f = scaled_mesh(name, scale)
    return " ".join(map("{:.5f}".format, v.ravel().tolist())), " ".join(map(str, f.ravel().tolist()))
