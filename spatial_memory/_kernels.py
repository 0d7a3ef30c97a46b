"""The compiled inner loops of the memory (numba, ``cache=True``), one function per pass over pixels,
points or voxels. Everything here works on plain arrays; the classes that own the arrays
(:mod:`.voxels`, :mod:`.objects`, :mod:`.memory`) hold the meaning.

Conventions: pixel centres sit at integer coordinates (``u = fx x / z + cx`` is a column index), the
same as :func:`.geometry.pixel_rays`. ``fx`` may be negative (a mirrored image). Voxel ``(i, j, k)``
covers ``[i s, (i+1) s) x [j s, (j+1) s) x [k s, (k+1) s)`` for voxel size ``s``; its key packs the
three indices (each offset by 2**20, 21 bits) into one non-negative int64. Voxels are found through
4x4x4 blocks: a hash table (open addressing, linear probing, ``-1`` = empty slot) maps a block's key
to a block index, and a dense 64-entry row per block holds its voxels' indices (-1 = none), so
neighbouring pixels, which fall in the same block, cost one hash probe between them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

KEY_OFFSET = 1 << 20  # voxel indices must lie in [-2**20, 2**20): +-52 km at 5 cm
KEY_BITS = 21
EMPTY = -1
HITS_MAX = 1 << 20
VOTE_MAX = 1 << 10
_HASH_MUL = -7046029254386353131  # 0x9E3779B97F4A7C15 (Fibonacci hashing) as a signed int64
BLOCK_SHIFT = 2
BLOCK = 1 << BLOCK_SHIFT  # voxels are indexed in blocks of 4x4x4: hash the block, then a dense table
BLOCK_CACHE_BITS = 12
BLOCK_CACHE = 1 << BLOCK_CACHE_BITS  # recently used blocks (kept by the map between frames)
TILE = 16  # carving: the image's farthest depth per TILE x TILE pixels bounds what a block may be seen through


@njit(cache=True, inline="always")
def _pack(i, j, k):
    return ((i + KEY_OFFSET) << (2 * KEY_BITS)) | ((j + KEY_OFFSET) << KEY_BITS) | (k + KEY_OFFSET)


@njit(cache=True, inline="always")
def _home_slot(key, bits):
    return ((key * _HASH_MUL) >> (64 - bits)) & ((1 << bits) - 1)


@njit(cache=True, inline="always")
def _block_key(i, j, k):
    return _pack(i >> BLOCK_SHIFT, j >> BLOCK_SHIFT, k >> BLOCK_SHIFT)


@njit(cache=True, inline="always")
def _local(i, j, k):
    m = BLOCK - 1
    return ((i & m) * BLOCK + (j & m)) * BLOCK + (k & m)


@njit(cache=True)
def _find_block(table, bits, key, n_blk, blk_vox, blk_ijk, bi, bj, bk, insert):
    """Block index of the block (bi, bj, bk) with key ``key`` (inserting an empty block when
    ``insert``), -1 if absent."""
    mask = (1 << bits) - 1
    s = _home_slot(key, bits)
    while True:
        kk = table[s, 0]
        if kk == key:
            return table[s, 1]
        if kk == EMPTY:
            if not insert:
                return -1
            b = n_blk[0]
            n_blk[0] = b + 1
            table[s, 0] = key
            table[s, 1] = b
            blk_vox[b, :] = -1
            blk_ijk[b, 0] = bi
            blk_ijk[b, 1] = bj
            blk_ijk[b, 2] = bk
            return b
        s = (s + 1) & mask


@njit(cache=True)
def index_voxels(table, bits, n_blk, blk_vox, blk_ijk, vox_ijk, start, n):
    """Enter voxels ``start..n-1`` (by their ``ijk``) into the block index (building blocks as needed;
    the caller guarantees room)."""
    for v in range(start, n):
        i, j, k = np.int64(vox_ijk[v, 0]), np.int64(vox_ijk[v, 1]), np.int64(vox_ijk[v, 2])
        b = _find_block(
            table,
            bits,
            _block_key(i, j, k),
            n_blk,
            blk_vox,
            blk_ijk,
            i >> BLOCK_SHIFT,
            j >> BLOCK_SHIFT,
            k >> BLOCK_SHIFT,
            True,
        )
        blk_vox[b, _local(i, j, k)] = v


@njit(cache=True)
def rehash_blocks(table, bits, blk_ijk, n_blk):
    """Enter blocks ``0..n_blk-1`` (by their ``blk_ijk``) into an empty hash table ``table`` of
    ``2**bits`` slots: a larger table for the same blocks, in the same order."""
    mask = (1 << bits) - 1
    for b in range(n_blk):
        key = _pack(np.int64(blk_ijk[b, 0]), np.int64(blk_ijk[b, 1]), np.int64(blk_ijk[b, 2]))
        s = _home_slot(key, bits)
        while table[s, 0] != EMPTY:
            s = (s + 1) & mask
        table[s, 0] = key
        table[s, 1] = b


@njit(cache=True)
def lookup_voxels(table, bits, blk_vox, ijk):
    """Voxel index of each row of Mx3 ``ijk`` (-1 where the voxel is not in the map)."""
    out = np.full(ijk.shape[0], -1, dtype=np.int64)
    dummy = np.zeros(1, dtype=np.int64)
    dummy_ijk = np.zeros((1, 3), dtype=np.int32)
    for m in range(ijk.shape[0]):
        i, j, k = np.int64(ijk[m, 0]), np.int64(ijk[m, 1]), np.int64(ijk[m, 2])
        b = _find_block(table, bits, _block_key(i, j, k), dummy, blk_vox, dummy_ijk, 0, 0, 0, False)
        if b >= 0:
            out[m] = blk_vox[b, _local(i, j, k)]
    return out


@njit(cache=True)
def backproject_labelled(
    depth, instance, slot_of_id, T_world_cam, fx, fy, cx, cy, min_depth, max_depth, stride, pts, pix, slot
):
    """World points of the valid pixels of a z-depth image (every ``stride``-th row and column) that
    belong to an instance slot: what the object passes read (the voxel pass reads the image itself,
    :func:`integrate_frame`).

    Writes ``pts[n] = T_world_cam (z (u - cx)/fx, z (v - cy)/fy, z)`` (the same arithmetic as
    :func:`integrate_frame`), ``pix[n] = v W + u`` and ``slot[n] = slot_of_id[instance[v, u]] >= 0``, in
    raster order; returns n. Valid: finite, ``min_depth <= z <= max_depth``.
    """
    H, W = depth.shape
    n_ids = slot_of_id.shape[0]
    r00, r01, r02, t0 = T_world_cam[0, 0], T_world_cam[0, 1], T_world_cam[0, 2], T_world_cam[0, 3]
    r10, r11, r12, t1 = T_world_cam[1, 0], T_world_cam[1, 1], T_world_cam[1, 2], T_world_cam[1, 3]
    r20, r21, r22, t2 = T_world_cam[2, 0], T_world_cam[2, 1], T_world_cam[2, 2], T_world_cam[2, 3]
    n = 0
    if instance.shape[0] != H:
        return n
    for v in range(0, H, stride):
        yr = (v - cy) / fy
        for u in range(0, W, stride):
            iid = instance[v, u]
            if iid < 0 or iid >= n_ids or slot_of_id[iid] < 0:
                continue
            z = np.float64(depth[v, u])
            if not (z >= min_depth and z <= max_depth):  # also rejects NaN
                continue
            x = (u - cx) / fx * z
            y = yr * z
            pts[n, 0] = r00 * x + r01 * y + r02 * z + t0
            pts[n, 1] = r10 * x + r11 * y + r12 * z + t1
            pts[n, 2] = r20 * x + r21 * y + r22 * z + t2
            pix[n] = v * W + u
            slot[n] = slot_of_id[iid]
            n += 1
    return n


@njit(cache=True, inline="always")
def _fuse_run(idx, k, sr, sg, sb, lab, vox_f, vox_i, w_max):
    """Fuse a run of ``k`` consecutive points that fell in voxel ``idx`` with one object label:
    colour sums ``sr, sg, sb``."""
    w = vox_f[idx, 3]
    inv = 1.0 / (w + k)
    vox_f[idx, 0] = (vox_f[idx, 0] * w + sr) * inv
    vox_f[idx, 1] = (vox_f[idx, 1] * w + sg) * inv
    vox_f[idx, 2] = (vox_f[idx, 2] * w + sb) * inv
    vox_f[idx, 3] = min(w + k, w_max)
    h = vox_i[idx, 0]
    vox_i[idx, 0] = k if h <= 0 else min(h + k, HITS_MAX)
    vote = vox_i[idx, 2]
    if vote == 0 or vox_i[idx, 1] == lab:
        vox_i[idx, 1] = lab
        vox_i[idx, 2] = min(vote + k, VOTE_MAX)
    elif vote >= k:
        vox_i[idx, 2] = vote - k
    else:  # the new label wins the vote
        vox_i[idx, 1] = lab
        vox_i[idx, 2] = k - vote


@njit(cache=True)
def integrate_frame(
    start,
    depth,
    rgb,
    instance,
    slot_of_id,
    obj_of_slot,
    T_world_cam,
    fx,
    fy,
    cx,
    cy,
    min_depth,
    max_depth,
    stride,
    inv_voxel,
    table,
    bits,
    n_blk,
    blk_vox,
    blk_ijk,
    cache_key,
    cache_blk,
    n_vox,
    vox_ijk,
    vox_f,
    vox_i,
    w_max,
):
    """Fuse a frame's valid pixels (every ``stride``-th row and column, raster order, from flat pixel
    index ``start`` on) into the voxels. A pixel's world point is ``T_world_cam (z (u - cx)/fx,
    z (v - cy)/fy, z)`` rounded to float32 (valid: ``min_depth <= z <= max_depth``, finite), its voxel
    ``floor(p / voxel)``, its object index ``obj_of_slot[slot_of_id[instance[v, u]]]`` (-1 = none: no
    slot, or no instance image). Per voxel: colour running mean (weight capped at ``w_max``), hit
    count, and a weighted majority vote (Boyer-Moore) of the object index (-1 = not an object).
    Consecutive valid pixels in the same voxel with the same object index are summed first and fused
    as one run (:func:`_fuse_run`).

    Blocks are found through ``cache_key``/``cache_blk`` (:data:`BLOCK_CACHE` recently used blocks,
    direct-mapped by key, kept by the caller between frames: consecutive frames see mostly the same
    blocks, and a probe of the hash table, large and visited anywhere, costs a cache miss) before the
    hash table. ``vox_f[v] = (r, g, b, colour weight)``, ``vox_i[v] = (hits, label, vote)``. Stops early, returning
    the flat index of the first pixel not fused, when the voxel or block arrays are full or the block
    table would pass half full; the caller grows them and calls again. Returns ``H * W`` when done.
    The points are computed here, not read from an array: the pass is bound by its voxel accesses,
    and the arithmetic runs in their shadow.
    """
    H, W = depth.shape
    have_inst = instance.shape[0] == H
    n_ids = slot_of_id.shape[0]
    r00, r01, r02, t0 = T_world_cam[0, 0], T_world_cam[0, 1], T_world_cam[0, 2], T_world_cam[0, 3]
    r10, r11, r12, t1 = T_world_cam[1, 0], T_world_cam[1, 1], T_world_cam[1, 2], T_world_cam[1, 3]
    r20, r21, r22, t2 = T_world_cam[2, 0], T_world_cam[2, 1], T_world_cam[2, 2], T_world_cam[2, 3]
    xr = np.empty(W)
    for u in range(W):
        xr[u] = (u - cx) / fx
    cap_vox = vox_ijk.shape[0]
    cap_blk = blk_vox.shape[0]
    cap_table = table.shape[0]
    last_vkey = np.int64(-2)
    last_bkey = np.int64(-2)
    b = 0
    idx = -1
    k = 0
    sr, sg, sb = 0.0, 0.0, 0.0
    run_lab = np.int64(-1)
    v0 = start // W
    for v in range(v0, H, stride):
        yr = (v - cy) / fy
        for u in range(start - v0 * W if v == v0 else 0, W, stride):
            z = np.float64(depth[v, u])
            if not (z >= min_depth and z <= max_depth):  # also rejects NaN
                continue
            x = xr[u] * z
            y = yr * z
            i = np.int64(np.floor(np.float64(np.float32(r00 * x + r01 * y + r02 * z + t0)) * inv_voxel))
            j = np.int64(np.floor(np.float64(np.float32(r10 * x + r11 * y + r12 * z + t1)) * inv_voxel))
            kz = np.int64(np.floor(np.float64(np.float32(r20 * x + r21 * y + r22 * z + t2)) * inv_voxel))
            vkey = _pack(i, j, kz)
            lab = np.int64(-1)
            if have_inst:
                iid = instance[v, u]
                if iid >= 0 and iid < n_ids:
                    s = slot_of_id[iid]
                    if s >= 0:
                        lab = np.int64(obj_of_slot[s])
            if vkey == last_vkey and lab == run_lab:
                k += 1
                sr += rgb[v, u, 0]
                sg += rgb[v, u, 1]
                sb += rgb[v, u, 2]
                continue
            if k > 0:
                _fuse_run(idx, k, sr, sg, sb, run_lab, vox_f, vox_i, w_max)
                k = 0
            if vkey != last_vkey:
                bkey = _block_key(i, j, kz)
                if bkey != last_bkey:
                    if n_blk[0] >= cap_blk or 2 * (n_blk[0] + 1) > cap_table:
                        return v * W + u
                    cs = _home_slot(bkey, BLOCK_CACHE_BITS)
                    if cache_key[cs] == bkey:
                        b = cache_blk[cs]
                    else:
                        b = _find_block(
                            table,
                            bits,
                            bkey,
                            n_blk,
                            blk_vox,
                            blk_ijk,
                            i >> BLOCK_SHIFT,
                            j >> BLOCK_SHIFT,
                            kz >> BLOCK_SHIFT,
                            True,
                        )
                        cache_key[cs] = bkey
                        cache_blk[cs] = b
                    last_bkey = bkey
                loc = _local(i, j, kz)
                idx = blk_vox[b, loc]
                if idx < 0:
                    if n_vox[0] >= cap_vox:
                        return v * W + u
                    idx = n_vox[0]
                    n_vox[0] = idx + 1
                    blk_vox[b, loc] = idx
                    vox_ijk[idx, 0] = i
                    vox_ijk[idx, 1] = j
                    vox_ijk[idx, 2] = kz
                    vox_f[idx, 0] = 0.0
                    vox_f[idx, 1] = 0.0
                    vox_f[idx, 2] = 0.0
                    vox_f[idx, 3] = 0.0
                    vox_i[idx, 0] = 0
                    vox_i[idx, 1] = -1
                    vox_i[idx, 2] = 0
                last_vkey = vkey
            k = 1
            sr, sg, sb = np.float64(rgb[v, u, 0]), np.float64(rgb[v, u, 1]), np.float64(rgb[v, u, 2])
            run_lab = lab
    if k > 0:
        _fuse_run(idx, k, sr, sg, sb, run_lab, vox_f, vox_i, w_max)
    return H * W


@njit(cache=True, inline="always")
def _to_pixel(x, y, z, T_cam_world, fx, fy, cx, cy):
    """(column, row, z_cam) of a world point; column -1 when it is not in front of the camera."""
    zc = T_cam_world[2, 0] * x + T_cam_world[2, 1] * y + T_cam_world[2, 2] * z + T_cam_world[2, 3]
    if zc <= 1e-6:
        return np.int64(-1), np.int64(-1), zc
    xc = T_cam_world[0, 0] * x + T_cam_world[0, 1] * y + T_cam_world[0, 2] * z + T_cam_world[0, 3]
    yc = T_cam_world[1, 0] * x + T_cam_world[1, 1] * y + T_cam_world[1, 2] * z + T_cam_world[1, 3]
    return np.int64(np.floor(fx * xc / zc + cx + 0.5)), np.int64(np.floor(fy * yc / zc + cy + 0.5)), zc


@njit(cache=True, inline="always")
def _measured(depth, u, v):
    """Depth at pixel (u, v), or -1 when outside the image or invalid (0, inf, NaN say nothing);
    callers test ``d > 0`` first, so a point behind the camera (u = -1) never counts."""
    H, W = depth.shape
    if u < 0 or u >= W or v < 0 or v >= H:
        return -1.0
    d = np.float64(depth[v, u])
    return d if (d > 0.0 and d < np.inf) else -1.0


@njit(cache=True)
def _tile_max_depth(depth):
    """The largest valid depth per TILE x TILE pixels (-1 where a tile has none)."""
    H, W = depth.shape
    out = np.full(((H + TILE - 1) // TILE, (W + TILE - 1) // TILE), -1.0)
    for v in range(H):
        for u in range(W):
            d = np.float64(depth[v, u])
            if d > 0.0 and d < np.inf and d > out[v // TILE, u // TILE]:
                out[v // TILE, u // TILE] = d
    return out


@njit(cache=True)
def carve_voxels(blk_ijk, blk_vox, n_blk, vox_i, voxel, T_cam_world, fx, fy, cx, cy, depth, margin_abs, margin_rel):
    """Free-space evidence: every occupied voxel whose centre the depth image sees through (the
    measured depth at its pixel lies beyond it by more than ``margin_abs + margin_rel * z``) loses
    half its hits plus one (at <= 0 it no longer counts as occupied; a new hit revives it).
    Blocks wholly outside the camera's view are skipped. Returns the number of voxels freed."""
    H, W = depth.shape
    radius = 0.5 * np.sqrt(3.0) * BLOCK * voxel
    afx, afy = abs(fx), abs(fy)
    far = _tile_max_depth(depth)
    freed = 0
    for b in range(n_blk):
        bx = (blk_ijk[b, 0] * BLOCK + 0.5 * BLOCK) * voxel
        by = (blk_ijk[b, 1] * BLOCK + 0.5 * BLOCK) * voxel
        bz = (blk_ijk[b, 2] * BLOCK + 0.5 * BLOCK) * voxel
        zc = T_cam_world[2, 0] * bx + T_cam_world[2, 1] * by + T_cam_world[2, 2] * bz + T_cam_world[2, 3]
        if zc < -radius:
            continue
        if zc > radius:  # wholly in front: test the block's circle against the image
            xc = T_cam_world[0, 0] * bx + T_cam_world[0, 1] * by + T_cam_world[0, 2] * bz + T_cam_world[0, 3]
            yc = T_cam_world[1, 0] * bx + T_cam_world[1, 1] * by + T_cam_world[1, 2] * bz + T_cam_world[1, 3]
            u = fx * xc / zc + cx
            v = fy * yc / zc + cy
            ru = afx * radius / (zc - radius) + 1.0
            rv = afy * radius / (zc - radius) + 1.0
            if u + ru < -0.5 or u - ru > W - 0.5 or v + rv < -0.5 or v - rv > H - 0.5:
                continue
            # nothing the block holds can be seen through when no pixel it may project to measures
            # beyond its nearest point (plus the margin): the test below would fail for every voxel
            # (a point within ``radius`` of the centre projects within afx r |(xc, zc)| / (zc (zc - r)) of it)
            tu = afx * radius * np.sqrt(xc * xc + zc * zc) / (zc * (zc - radius)) + 1.0
            tv = afy * radius * np.sqrt(yc * yc + zc * zc) / (zc * (zc - radius)) + 1.0
            t0 = max(np.int64(np.floor((u - tu + 0.5) / TILE)), 0)
            t1 = min(np.int64(np.floor((u + tu + 0.5) / TILE)), far.shape[1] - 1)
            s0 = max(np.int64(np.floor((v - tv + 0.5) / TILE)), 0)
            s1 = min(np.int64(np.floor((v + tv + 0.5) / TILE)), far.shape[0] - 1)
            near = zc - radius
            beyond = near + margin_abs + margin_rel * near
            hit = False
            for s in range(s0, s1 + 1):
                for t in range(t0, t1 + 1):
                    if far[s, t] > beyond:
                        hit = True
            if not hit:
                continue
        # a voxel's index from its block and place in it (its record, anywhere in memory, is read only
        # for the few voxels the depth sees through)
        bi, bj, bk = blk_ijk[b, 0] * BLOCK, blk_ijk[b, 1] * BLOCK, blk_ijk[b, 2] * BLOCK
        for loc in range(BLOCK * BLOCK * BLOCK):
            vx = blk_vox[b, loc]
            if vx < 0:
                continue
            x = (bi + loc // (BLOCK * BLOCK) + 0.5) * voxel
            y = (bj + (loc // BLOCK) % BLOCK + 0.5) * voxel
            z = (bk + loc % BLOCK + 0.5) * voxel
            pu, pv, pz = _to_pixel(x, y, z, T_cam_world, fx, fy, cx, cy)
            d = _measured(depth, pu, pv)
            if d > 0.0 and d > pz + margin_abs + margin_rel * pz:  # free space where the voxel was
                h = vox_i[vx, 0]
                if h > 0:
                    h = h // 2 - 1
                    vox_i[vx, 0] = h
                    if h <= 0:
                        freed += 1
    return freed


@njit(cache=True)
def rasterize_columns(
    vox_ijk,
    vox_f,
    vox_i,
    n,
    voxel,
    x0,
    y1,
    mpp,
    z_max,
    wall_lo,
    wall_hi,
    top_z,
    top_rgb,
    wall_count,
    object_count,
    min_hits,
):
    """Splat occupied voxels (at least ``min_hits`` hits) below ``z_max`` into top-down pixel layers.

    Pixel (row, col) has its centre at world ``(x0 + (col + 0.5) mpp, y1 - (row + 0.5) mpp)``. A
    voxel covers the pixels whose centres fall in its xy cell (at least the pixel holding the
    cell's centre). Per pixel: height and colour of the top-most voxel, the number of non-object
    voxels with centre height in ``[wall_lo, wall_hi)``, and the number of object voxels.
    """
    H, W = top_z.shape
    for v in range(n):
        if vox_i[v, 0] <= 0 or vox_i[v, 0] < min_hits:
            continue
        zc = (vox_ijk[v, 2] + 0.5) * voxel
        if zc >= z_max:
            continue
        ua = (vox_ijk[v, 0] * voxel - x0) / mpp
        ub = ua + voxel / mpp
        va = (y1 - (vox_ijk[v, 1] + 1) * voxel) / mpp
        vb = va + voxel / mpp
        c0 = np.int64(np.ceil(ua - 0.5))
        c1 = np.int64(np.ceil(ub - 0.5))
        r0 = np.int64(np.ceil(va - 0.5))
        r1 = np.int64(np.ceil(vb - 0.5))
        if c1 <= c0:
            c0 = np.int64(np.floor(0.5 * (ua + ub)))
            c1 = c0 + 1
        if r1 <= r0:
            r0 = np.int64(np.floor(0.5 * (va + vb)))
            r1 = r0 + 1
        c0, c1 = max(c0, 0), min(c1, W)
        r0, r1 = max(r0, 0), min(r1, H)
        lab = vox_i[v, 1]
        is_wall = lab < 0 and zc >= wall_lo and zc < wall_hi
        for r in range(r0, r1):
            for c in range(c0, c1):
                if zc > top_z[r, c]:
                    top_z[r, c] = zc
                    top_rgb[r, c, 0] = np.uint8(min(max(vox_f[v, 0] + 0.5, 0.0), 255.0))
                    top_rgb[r, c, 1] = np.uint8(min(max(vox_f[v, 1] + 0.5, 0.0), 255.0))
                    top_rgb[r, c, 2] = np.uint8(min(max(vox_f[v, 2] + 0.5, 0.0), 255.0))
                if is_wall:
                    wall_count[r, c] += 1
                if lab >= 0:
                    object_count[r, c] += 1
