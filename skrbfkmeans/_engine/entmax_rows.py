"""Row kernels of the entmax family: shifted scores in, probabilities out.

Every function here works on a C-contiguous 2-D block whose rows are slices
already shifted by their maximum (validation and reshaping live in
``_entmax``). Scratch memory comes from a ``_Workspace`` so that a block's
many passes allocate nothing.
"""

import math

import numpy as np

from .blas import matmul
from .partition import block_rows, row_blocks

# Rows per block: a block of scores and its temporaries (five arrays of 1 MiB
# in float64) stay in the last-level cache while the multi-pass threshold
# search runs over it, and the per-call cost of its small row-vector steps is
# spread over enough rows. Measured (benchmarks/bench_entmax.py): 128K
# elements beat 32K by 1.3x (float64) to 1.9x (float32, low temperature).
_BLOCK_ELEMENTS = 1 << 17


class _Workspace:
    """Scratch buffers for one block of rows, reused across blocks.

    Fresh temporaries of a few hundred KiB can cost page faults on every call;
    the kernels below write every intermediate into these instead.
    """

    def __init__(self, n_rows, k, dtype, empty=None):
        # ``empty(name, shape, dtype)`` lets a caller lend long-lived memory.
        if empty is None:

            def empty(name, shape, dtype):
                return np.empty(shape, dtype=dtype)

        self.dense, self.active, self.spare, self.V, self.W = (
            empty(f"entmax_{name}", (n_rows, k), dtype)
            for name in ("dense", "active", "spare", "V", "W")
        )
        # Row sums as a matrix-vector product: BLAS beats ufunc reductions on
        # short rows by a factor of two or more.
        self.ones = np.ones(k, dtype=dtype)


def _blocks(m, k, dtype):
    """Return a workspace and the row slices of ``m`` rows of ``k`` scores.

    Blocks of ``_BLOCK_ELEMENTS`` scores (``partition``'s rule), so that the
    workspace stays in cache.
    """
    step = block_rows(m, k, _BLOCK_ELEMENTS)
    return _Workspace(step, k, dtype), list(row_blocks(m, step))


def _split_one_hot(U, imax, alpha, workspace):
    """Write the exact one-hot rows of ``U`` in place; gather the others.

    ``U`` holds shifted scores (row maximum 0). A row with a single candidate
    (``(alpha - 1) u_j > -1``) is exactly one-hot: 1 at its maximum, 0
    elsewhere. The other rows are gathered into ``workspace.dense`` and scaled by
    ``alpha - 1``; ``U`` is left one-hot on them too, for the caller to
    overwrite. Returns their indices, their
    scaled scores and their numbers of candidates.
    """
    m = U.shape[0]
    # alpha - 1 beyond the dtype's range (float32) would turn the maximum (0)
    # into 0 * inf = NaN: multiply in float64 then, and round the product.
    scale = alpha - 1.0
    if scale <= float(np.finfo(U.dtype).max):
        scale = U.dtype.type(scale)
    else:
        scale = np.float64(scale)
    # Scaling may overflow to -inf (far below the maximum: the exact limit)
    # or underflow subnormal scores (their value at working precision).
    with np.errstate(over="ignore", under="ignore"):
        if alpha in (1.5, 2.0):
            # Scaling by 1/2 or 1 is exact for normal numbers, so the unscaled
            # test at -1 / (alpha - 1) decides as the scaled one does.
            cand = np.greater(U, -1.0 / (alpha - 1.0), out=workspace.V[:m])
        else:
            np.multiply(U, scale, out=workspace.V[:m])
            cand = np.greater(workspace.V[:m], -1.0, out=workspace.V[:m])
        n_cand = matmul(cand, workspace.ones)
        dense = np.flatnonzero(n_cand > 1.0)
        Ud = np.take(U, dense, axis=0, out=workspace.dense[: dense.size])
        if alpha != 2.0:
            np.multiply(Ud, scale, out=Ud)
    U.fill(0.0)
    U[np.arange(m), imax] = 1.0
    return dense, Ud, n_cand[dense]


def _newton_threshold(U, alpha, n_cand, workspace):
    """Exact threshold of entmax-1.5 (``alpha=1.5``) or sparsemax (``alpha=2``).

    ``U`` holds shifted, scaled rows (maximum 0) with at least two
    candidates; it is not modified. With ``q = 1 / (alpha - 1)`` in
    ``{1, 2}``, ``g(tau) = (sum_j [u_j - tau]_+ ** q) ** (1 / q) - 1`` is
    convex and decreasing (a norm of a convex, non-negative function), so
    Newton's method on ``g`` from the lower bound ``tau = -1`` increases
    monotonically to the root; on a fixed support ``g`` is nearly linear, so
    few steps are needed. The support ``S = {u_j > tau}`` of every iterate
    contains the true support, and once ``S`` is known the threshold has a
    closed form (sparsemax: a mean; entmax-1.5: the smaller root of a
    quadratic). The closed form is exact when it is consistent, i.e. every
    entry of ``S`` lies above it: then it is a root, and the root is unique.
    For sparsemax the Newton step *is* the closed form (Michelot's algorithm).

    Cost: per iteration about eight cheap passes over the rows still active
    (rows leave as soon as they are exact); one to four iterations in
    practice. The support shrinks strictly until it is exact, so the count is
    bounded by the number of candidates; a stalled step (no progress at
    working precision) ends a row with its closed form.
    """
    m, k = U.shape
    out = np.empty(m, dtype=U.dtype)
    tau = np.full(m, -1.0, dtype=U.dtype)
    rows = np.arange(m)
    buffers = [workspace.active, workspace.spare]
    s = n_cand
    for _ in range(k + 1):
        V, W = workspace.V[:m], workspace.W[:m]
        np.subtract(U, tau[:, None], out=V)
        np.maximum(V, 0.0, out=V)
        A = matmul(V, workspace.ones)
        if s is None:
            # At tau = -1 the support is the candidates, already counted.
            s = matmul(np.greater(V, 0.0, out=W), workspace.ones)
        if alpha == 2.0:
            step = (A - 1.0) / s
            newton = step
            ok = True
        else:
            B = matmul(np.multiply(V, V, out=W), workspace.ones)
            # Closed form on S, relative to tau: sum_S (v - t)^2 = 1 gives
            # t = mean - sqrt((1 - ss) / s), ss the spread of v over S.
            mean = A / s
            ss = np.maximum(B - A * mean, 0.0)
            delta = (1.0 - ss) / s
            # delta < 0: no real root, S is still too large.
            ok = delta >= 0.0
            step = mean - np.sqrt(np.maximum(delta, 0.0))
            # Newton on sqrt(sum v^2) - 1, whose slope is -A / sqrt(B).
            newton = (B - np.sqrt(B)) / A
        # Consistent iff every entry of S lies strictly above the closed form.
        above = matmul(np.greater(V, step[:, None], out=W), workspace.ones)
        done = (above == s) & ok
        # No progress at working precision: S is right up to entries within
        # rounding of the threshold, which carry no mass there.
        stalled = ~(tau + newton > tau) & ~done
        out[rows[done]] = (tau + step)[done]
        out[rows[stalled]] = np.where(ok, tau + step, tau)[stalled]
        keep = ~(done | stalled)
        m = np.count_nonzero(keep)
        if m == 0:
            return out
        if m < keep.size:
            # Compact the active rows, alternating between two buffers.
            U = np.compress(keep, U, axis=0, out=buffers[0][:m])
            buffers.reverse()
            rows, tau, newton = rows[keep], tau[keep], newton[keep]
        tau = tau + newton
        s = None
    out[rows] = tau
    return out


def _clipped_power(U, tau, alpha, out):
    """``out <- [U - tau]_+ ** (1 / (alpha - 1))`` row-wise; exact for 1.5 and 2."""
    np.subtract(U, tau[:, None], out=out)
    np.maximum(out, 0.0, out=out)
    if alpha != 2.0:
        # Entries at the edge of the support may underflow to 0 when raised to
        # a power above 1: that is their value at working precision.
        with np.errstate(under="ignore"):
            if alpha == 1.5:
                np.square(out, out=out)
            else:
                np.power(out, 1.0 / (alpha - 1.0), out=out)
    return out


def _finish(U, tau, alpha, out, ones, normalize=True):
    """``out <- [U - tau]_+ ** q / sum``, ``q = 1 / (alpha - 1)``, row-wise."""
    _clipped_power(U, tau, alpha, out)
    if normalize:
        out /= matmul(out, ones)[:, None]
    return out


def _sparse_rows(U, imax, alpha, workspace):
    """entmax-1.5 or sparsemax of shifted rows ``U`` (maximum 0), in place.

    ``imax`` is the position of each row's maximum and ``workspace`` a workspace
    with at least as many rows as ``U``. Callers that already hold shifted
    scores (the responsibilities of the RBF engine) enter here.
    """
    dense, Ud, n_cand = _split_one_hot(U, imax, alpha, workspace)
    if dense.size:
        tau = _newton_threshold(Ud, alpha, n_cand, workspace)
        U[dense] = _finish(Ud, tau, alpha, workspace.V[: dense.size], workspace.ones)
    return U


def _default_n_iter(dtype, alpha, k):
    """Halvings that resolve ``tau`` to a relative ulp of its smallest value.

    The bracket has width below 1 and ``|tau| >= (1 / k) ** (alpha - 1)``, so
    ``nmant + 2`` halvings give an absolute precision of a quarter ulp of 1,
    and ``(alpha - 1) log2 k`` more make it relative (capped at another
    ``nmant``: beyond that ``tau`` is zero to working precision).
    """
    nmant = np.finfo(dtype).nmant
    extra = min(math.ceil((alpha - 1.0) * math.log2(max(k, 1))), nmant)
    return nmant + 2 + extra


def _bisect_threshold(U, alpha, n_cand, n_iter, workspace):
    """Lower end of the bisection bracket of each row's threshold.

    ``f(tau) = sum_j [u_j - tau]_+ ** (1 / (alpha - 1)) - 1`` is decreasing,
    ``f(-1) >= 0`` (the maximum is 0) and, as only the ``c`` candidates carry
    mass, ``f(-(1 / c) ** (alpha - 1)) <= 0``. Each halving keeps the half
    where ``f`` changes sign, so the returned ``lo`` has ``f(lo) >= 0``: its
    support contains the true one.
    """
    m = U.shape[0]
    lo = np.full(m, -1.0, dtype=U.dtype)
    # For a large alpha the bound underflows to -0: its value at working
    # precision.
    with np.errstate(under="ignore"):
        hi = -np.power(1.0 / n_cand.astype(np.float64), alpha - 1.0)
    hi = hi.astype(U.dtype)
    V = workspace.V[:m]
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        above = matmul(_clipped_power(U, mid, alpha, V), workspace.ones) >= 1.0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return lo
