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


# Certificates: they check an output against the conditions that define it
# (a point of the simplex solving the KKT conditions) without computing it.


def assert_on_simplex(P, axis=-1):
    """Assert that every slice of ``P`` is a point of the probability simplex."""
    _, rows = _slices(P, axis)
    assert np.isfinite(rows).all()
    assert (rows >= 0).all()
    # Each entry is rounded once by the final division: k half-ulps at most,
    # plus the rounding of the sum the division used.
    k = rows.shape[1]
    eps = np.finfo(np.asarray(P).dtype).eps
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=0, atol=8 * eps * k)


def kkt_tolerance(P, alpha, dtype, axis=-1):
    """Slice-wise tolerance on the threshold recovered from an output ``P``.

    On the support, ``v_j = u_j - tau`` (with ``u = (alpha - 1) (z - max z)``,
    so ``|u_j| <= 1`` there whatever the scale of ``z``) is rounded to a few
    ulps of 1. Normalising by a sum ``S = 1 + delta`` moves every recovered
    ``v_j`` by ``(alpha - 1) delta``, and ``delta ~ q sum_j v_j ** (q - 1) eps``
    with ``q = 1 / (alpha - 1)``: the condition number is
    ``sum_j p_j ** (2 - alpha)``, at most k for ``alpha <= 2`` and unbounded
    above (``p ** 0.5`` is not Lipschitz at 0). Entries whose ``p_j`` falls
    below the smallest subnormal round to 0 or to a few subnormal ulps, which
    blurs ``v_j`` by up to ``smallest_subnormal ** (alpha - 1)`` (3e-5 for
    float32 at alpha = 1.1). For a large alpha the condition number can
    exceed the float range (``6 ** 998`` for a uniform slice of 6 at alpha =
    1000): the tolerance is then infinite and the conditions say nothing.
    """
    _, P = _slices(P, axis)
    with np.errstate(over="ignore"):
        s = np.power(P, 2.0 - alpha, where=P > 0, out=np.zeros_like(P)).sum(axis=1)
    finfo = np.finfo(dtype)
    return 4 * finfo.eps * (1 + s) + float(finfo.smallest_subnormal) ** (alpha - 1)


def assert_kkt(Z, P, alpha, dtype, axis=-1):
    """Assert the optimality conditions of alpha-entmax, slice by slice.

    ``P`` (computed in ``dtype``) must satisfy ``(alpha - 1) z_j - p_j **
    (alpha - 1) = tau`` on its support and ``(alpha - 1) z_j <= tau`` off it,
    within :func:`kkt_tolerance`.
    """
    (_, Z), (_, P) = _slices(Z, axis), _slices(P, axis)
    # tau is taken relative to the slice maximum, so that
    # (alpha-1) z_j - p_j**(alpha-1) does not cancel a large common offset.
    u = (alpha - 1) * (Z - Z.max(axis=1, keepdims=True))
    support = P > 0
    tau = np.where(support, u - P ** (alpha - 1), np.nan)
    tau_hi, tau_lo = np.nanmax(tau, axis=1), np.nanmin(tau, axis=1)
    off = np.where(support, -np.inf, u).max(axis=1)
    tol = kkt_tolerance(P, alpha, dtype)
    # Stationarity on the support: one threshold per slice.
    assert (tau_hi - tau_lo <= tol).all(), np.max((tau_hi - tau_lo) / tol)
    # Complementary slackness off the support: no entry above the threshold.
    assert (off <= tau_hi + tol).all(), np.max((off - tau_hi) / tol)
