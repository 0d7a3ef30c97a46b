"""``VoxelMap``: a sparse voxel hash of the surfaces the camera has seen.

Each occupied voxel keeps its integer index ``(i, j, k)`` (centre ``(ijk + 0.5) * voxel_size``),
a running mean colour, a hit count (occupancy evidence; free-space carving lowers it, at <= 0 the
voxel counts as free until it is hit again), and the memory's object index that most of its points
belonged to (-1 = no object: walls, floor, unlabelled furniture). The map's size is bounded by the
observed space, not by the number of frames: revisiting a place updates its voxels in place.
"""

from __future__ import annotations

import numpy as np

from . import _kernels as kern
from .topdown import TopDownFrame

# per-voxel fields: name -> (array, column or None, dtype, per-voxel shape)
_FIELDS = {
    "ijk": ("ijk", None, np.int32, (3,)),
    "rgb": ("f", slice(0, 3), np.float32, (3,)),
    "w": ("f", 3, np.float32, ()),
    "hits": ("i", 0, np.int32, ()),
    "label": ("i", 1, np.int32, ()),
    "vote": ("i", 2, np.int32, ()),
}


_NO_INSTANCE = np.zeros((0, 0), dtype=np.int32)
_RECORD = 8  # float32 / int32 slots per voxel record: r, g, b, colour weight | hits, label, vote | padding


def _records(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(records, colour view, count view) for ``n`` voxels. A voxel's fields live in one 32-byte record
    (half a cache line): fusing a voxel touches one line instead of one per array, and the voxel
    pass is bound by those memory accesses (voxels are visited in no particular order)."""
    rec = np.zeros((n, _RECORD), dtype=np.float32)
    return rec, rec[:, 0:4], rec.view(np.int32)[:, 4:7]


class VoxelMap:
    def __init__(self, voxel_size: float, colour_weight_max: float = 64.0):
        if not (np.isfinite(voxel_size) and voxel_size > 0):
            raise ValueError(f"voxel_size must be a positive number of metres, got {voxel_size!r}")
        self.voxel_size = float(voxel_size)
        self.colour_weight_max = float(colour_weight_max)
        self._n = np.zeros(1, dtype=np.int64)
        self._ijk = np.zeros((4096, 3), dtype=np.int32)
        # _f: r, g, b, colour weight (float32); _i: hits, label, vote (int32); views of one record per voxel
        self._rec, self._f, self._i = _records(4096)
        self._n_blk = np.zeros(1, dtype=np.int64)
        self._blk_vox = np.full((1024, kern.BLOCK**3), -1, dtype=np.int32)
        self._blk_ijk = np.zeros((1024, 3), dtype=np.int32)
        self._bits = 11
        self._table = np.full((1 << self._bits, 2), kern.EMPTY, dtype=np.int64)
        self._forget_blocks()

    # ------------------------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return int(self._n[0])

    @property
    def n_blocks(self) -> int:
        return int(self._n_blk[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by the voxel arrays and the block index (capacity, not just the used part)."""
        return sum(a.nbytes for a in (self._ijk, self._rec, self._blk_vox, self._blk_ijk, self._table))

    def _grow(self) -> None:
        """Double whatever is full: voxel arrays, block rows, or the block hash table (kept at most half full)."""
        n, nb = len(self), self.n_blocks
        if n >= len(self._ijk):
            self._ijk = _grown(self._ijk, n)
            rec = self._rec
            self._rec, self._f, self._i = _records(2 * len(rec))
            self._rec[:n] = rec[:n]
        if nb >= len(self._blk_vox):
            grown = np.full((2 * len(self._blk_vox), kern.BLOCK**3), -1, dtype=np.int32)
            grown[:nb] = self._blk_vox[:nb]
            self._blk_vox = grown
            self._blk_ijk = _grown(self._blk_ijk, nb)
        if 2 * (nb + 1) > len(self._table):  # the same blocks in a table twice the size
            self._bits += 1
            self._table = np.full((1 << self._bits, 2), kern.EMPTY, dtype=np.int64)
            kern.rehash_blocks(self._table, self._bits, self._blk_ijk, nb)

    def _forget_blocks(self) -> None:
        """Empty the cache of recently used blocks (block key -> block index), for a rebuilt block index."""
        self._cache_key = np.full(kern.BLOCK_CACHE, -2, dtype=np.int64)
        self._cache_blk = np.zeros(kern.BLOCK_CACHE, dtype=np.int64)

    def _reindex(self, bits: int) -> None:
        """Rebuild the block index from the voxels (block order is the order voxels first appear)."""
        self._forget_blocks()
        self._bits = bits
        self._table = np.full((1 << bits, 2), kern.EMPTY, dtype=np.int64)
        self._n_blk[0] = 0
        self._blk_vox[:] = -1
        kern.index_voxels(self._table, bits, self._n_blk, self._blk_vox, self._blk_ijk, self._ijk, 0, len(self))

    # ------------------------------------------------------------------------------------ fusion
    def integrate(
        self,
        depth: np.ndarray,
        rgb: np.ndarray,
        instance: np.ndarray | None,
        slot_of_id: np.ndarray,
        obj_of_slot: np.ndarray,
        T_world_cam: np.ndarray,
        K: np.ndarray,
        min_depth: float,
        max_depth: float,
        stride: int = 1,
    ) -> None:
        """Fuse a frame: the world point of every valid pixel (``min_depth <= z <= max_depth``, every
        ``stride``-th row and column, raster order) with the pixel's colour and object index
        ``obj_of_slot[slot_of_id[instance[v, u]]]`` (-1 where there is none or no ``instance``). Runs of
        neighbouring pixels in one voxel with one object index are summed first and fused as one
        (:func:`._kernels.integrate_frame`)."""
        inst = instance if instance is not None else _NO_INSTANCE
        done, n_pix = 0, depth.size
        while done < n_pix:
            done = kern.integrate_frame(
                done,
                depth,
                rgb,
                inst,
                slot_of_id,
                obj_of_slot,
                T_world_cam,
                K[0, 0],
                K[1, 1],
                K[0, 2],
                K[1, 2],
                min_depth,
                max_depth,
                int(stride),
                1.0 / self.voxel_size,
                self._table,
                self._bits,
                self._n_blk,
                self._blk_vox,
                self._blk_ijk,
                self._cache_key,
                self._cache_blk,
                self._n,
                self._ijk,
                self._f,
                self._i,
                self.colour_weight_max,
            )
            if done < n_pix:
                self._grow()

    def carve(
        self, T_cam_world: np.ndarray, K: np.ndarray, depth: np.ndarray, margin_abs: float, margin_rel: float
    ) -> int:
        """Lower the evidence of voxels the depth image sees through; returns how many became free."""
        return int(
            kern.carve_voxels(
                self._blk_ijk,
                self._blk_vox,
                self.n_blocks,
                self._i,
                self.voxel_size,
                T_cam_world,
                K[0, 0],
                K[1, 1],
                K[0, 2],
                K[1, 2],
                depth,
                margin_abs,
                margin_rel,
            )
        )

    # ------------------------------------------------------------------------------------ reading
    def field(self, name: str) -> np.ndarray:
        """Read-only view of one per-voxel field over the used voxels
        (``ijk``, ``rgb``, ``w``, ``hits``, ``label``, ``vote``)."""
        if name not in _FIELDS:
            raise KeyError(f"no voxel field {name!r}; fields: {list(_FIELDS)}")
        array, col, _, _ = _FIELDS[name]
        a = getattr(self, "_" + array)[: len(self)]
        view = (a if col is None else a[:, col]).view()
        view.flags.writeable = False
        return view

    def occupied(self) -> np.ndarray:
        return self.field("hits") > 0

    def centres(self, which: np.ndarray | None = None) -> np.ndarray:
        """World centres (Nx3) of all voxels, or of the mask/indices ``which``."""
        ijk = self.field("ijk") if which is None else self.field("ijk")[which]
        return (ijk.astype(np.float64) + 0.5) * self.voxel_size

    def lookup(self, p_world: np.ndarray) -> np.ndarray:
        """Voxel index holding each of the Nx3 world points (-1 where there is none)."""
        ijk = np.floor(np.asarray(p_world, dtype=np.float64).reshape(-1, 3) / self.voxel_size).astype(np.int64)
        return kern.lookup_voxels(self._table, self._bits, self._blk_vox, ijk)

    def bounds_xy(self, z_max: float = np.inf) -> tuple[float, float, float, float] | None:
        """(xmin, ymin, xmax, ymax) of the occupied voxels below ``z_max`` (None when there are none)."""
        occ = self.occupied() & (self.centres()[:, 2] < z_max) if len(self) else np.zeros(0, dtype=bool)
        if not occ.any():
            return None
        ijk = self.field("ijk")[occ]
        lo, hi = ijk[:, :2].min(axis=0) * self.voxel_size, (ijk[:, :2].max(axis=0) + 1) * self.voxel_size
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])

    def rasterize(
        self, frame: TopDownFrame, z_max: float, wall_band: tuple[float, float], min_hits: int = 1
    ) -> dict[str, np.ndarray]:
        """Top-down layers on ``frame`` of the voxels with at least ``min_hits`` hits: ``top_z`` (-inf
        where nothing), ``top_rgb``, ``wall_count``, ``object_count`` (:func:`._kernels.rasterize_columns`)."""
        H, W = frame.height, frame.width
        layers = {
            "top_z": np.full((H, W), -np.inf, dtype=np.float64),
            "top_rgb": np.full((H, W, 3), 255, dtype=np.uint8),
            "wall_count": np.zeros((H, W), dtype=np.int32),
            "object_count": np.zeros((H, W), dtype=np.int32),
        }
        x0, _, _, y1 = frame.bounds
        kern.rasterize_columns(
            self._ijk,
            self._f,
            self._i,
            len(self),
            self.voxel_size,
            x0,
            y1,
            frame.metres_per_pixel,
            float(z_max),
            float(wall_band[0]),
            float(wall_band[1]),
            layers["top_z"],
            layers["top_rgb"],
            layers["wall_count"],
            layers["object_count"],
            int(min_hits),
        )
        return layers

    # ------------------------------------------------------------------------------------ state
    def copy(self) -> "VoxelMap":
        """An independent copy (arrays copied as they are: no re-indexing)."""
        vm = VoxelMap.__new__(VoxelMap)
        vm.voxel_size, vm.colour_weight_max, vm._bits = self.voxel_size, self.colour_weight_max, self._bits
        n, nb = len(self), self.n_blocks
        vm._n, vm._n_blk = self._n.copy(), self._n_blk.copy()
        vm._ijk = self._ijk[: max(n, 1)].copy()
        vm._rec, vm._f, vm._i = _records(max(n, 1))
        vm._rec[:n] = self._rec[:n]
        vm._blk_vox = self._blk_vox[: max(nb, 1)].copy()
        vm._blk_ijk = self._blk_ijk[: max(nb, 1)].copy()
        vm._table = self._table.copy()
        vm._cache_key, vm._cache_blk = self._cache_key.copy(), self._cache_blk.copy()
        return vm

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the used part of every field (what ``save`` writes)."""
        return {name: np.array(self.field(name)) for name in _FIELDS}

    @classmethod
    def from_state(cls, voxel_size: float, colour_weight_max: float, state: dict[str, np.ndarray]) -> "VoxelMap":
        vm = cls(voxel_size, colour_weight_max)
        n = None
        for name, (_, _, dt, shape) in _FIELDS.items():
            if name not in state:
                raise ValueError(f"voxel state is missing the field {name!r}")
            a = np.asarray(state[name])
            if a.dtype != dt or a.shape[1:] != shape or a.ndim != 1 + len(shape) or (n is not None and len(a) != n):
                raise ValueError(
                    f"voxel field {name!r} has dtype {a.dtype} and shape {a.shape}; "
                    f"expected {np.dtype(dt)} (N,{','.join(map(str, shape))})"
                )
            n = len(a)
        ijk = np.asarray(state["ijk"])
        if n and (ijk.min() < -kern.KEY_OFFSET or ijk.max() >= kern.KEY_OFFSET):
            raise ValueError("voxel indices out of range")
        if n and len(np.unique(_packed(ijk))) != n:
            raise ValueError("voxel state lists the same voxel twice")
        vm._ijk = np.zeros((max(n, 4096), 3), dtype=np.int32)
        vm._rec, vm._f, vm._i = _records(max(n, 4096))
        for name, (array, col, _, _) in _FIELDS.items():
            target = getattr(vm, "_" + array)
            if col is None:
                target[:n] = state[name]
            else:
                target[:n, col] = state[name]
        vm._n[0] = n
        n_blocks = len(np.unique(_packed(ijk >> kern.BLOCK_SHIFT))) if n else 0
        bits = 11
        while 2 * (n_blocks + 1) > (1 << bits):
            bits += 1
        vm._blk_vox = np.full((max(n_blocks, 1024), kern.BLOCK**3), -1, dtype=np.int32)
        vm._blk_ijk = np.zeros((max(n_blocks, 1024), 3), dtype=np.int32)
        vm._reindex(bits)
        return vm


def _packed(ijk: np.ndarray) -> np.ndarray:
    """One int64 per row of Nx3 indices (in range), for fast uniqueness tests."""
    i = ijk.astype(np.int64) + kern.KEY_OFFSET
    return (i[:, 0] << (2 * kern.KEY_BITS)) | (i[:, 1] << kern.KEY_BITS) | i[:, 2]


def _grown(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((2 * len(a),) + a.shape[1:], dtype=a.dtype)
    out[:n] = a[:n]
    return out
