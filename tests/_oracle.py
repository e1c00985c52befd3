"""Independent oracles for the entmax family (test use only).

The sort-based algorithms follow Peters, Niculae and Martins (2019),
Algorithm 2 (entmax-1.5) and Martins and Astudillo (2016), Algorithm 1
(sparsemax): sort each slice, try every support size, keep the largest
consistent one. They share no code with the package's Newton and bisection
kernels, and they run in float128-free plain float64 one slice at a time.
"""

import numpy as np


def _slices(Z, axis):
    Z = np.moveaxis(np.asarray(Z, dtype=np.float64), axis, -1)
    return Z, Z.reshape(-1, Z.shape[-1])


def entmax15_sort(Z, axis=-1):
    """Exact entmax-1.5 by sorting (Peters et al. 2019, Algorithm 2)."""
    moved, rows = _slices(Z, axis)
    out = np.zeros_like(rows)
    for i, z in enumerate(rows):
        u = (z - z.max()) / 2
        srt = np.sort(u)[::-1]
        srt = srt[np.isfinite(srt)]
        s = np.arange(1, srt.size + 1)
        mean = np.cumsum(srt) / s
        mean_sq = np.cumsum(srt**2) / s
        ss = s * (mean_sq - mean**2)
        delta = np.clip((1 - ss) / s, 0, None)
        tau = mean - np.sqrt(delta)
        support = np.count_nonzero(tau <= srt)
        p = np.clip(u - tau[support - 1], 0, None) ** 2
        out[i] = p / p.sum()
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def sparsemax_sort(Z, axis=-1):
    """Exact sparsemax by sorting (Martins & Astudillo 2016, Algorithm 1)."""
    moved, rows = _slices(Z, axis)
    out = np.zeros_like(rows)
    for i, z in enumerate(rows):
        u = z - z.max()
        srt = np.sort(u)[::-1]
        srt = srt[np.isfinite(srt)]
        s = np.arange(1, srt.size + 1)
        cssv = np.cumsum(srt) - 1
        support = np.count_nonzero(srt - cssv / s > 0)
        tau = cssv[support - 1] / support
        out[i] = np.clip(u - tau, 0, None)
    return np.moveaxis(out.reshape(moved.shape), -1, axis)
