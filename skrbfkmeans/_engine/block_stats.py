"""Sums of one block on the statistics' fast routes, and its second moments.

The general route (``passes``) computes every quantity a caller may ask for
from a block's responsibilities. When only ``N``, ``S`` (and the hard
inertia) are needed, these kernels give the same sums to rounding with less
work: softmax scores from one GEMM with the far scores skipped
(``softmax_stats``), entmax-1.5 blocks of one-hot rows as Lloyd statistics
(``hard_stats``); and second moments without materialising outer products
where ``d`` is large (``accumulate_moments``). tests/test_fast_paths.py
compares each with the general route and with explicit sums.
"""

import numpy as np
import scipy.sparse as sp

from .blas import matmul
from .blocks import far_cut, pooled_empty, softmax_weights
from .partition import block_rows, row_blocks

# Up to this fraction of near scores a block is gathered (sparse route).
_SPARSE_EXP_DENSITY = 0.4


def softmax_stats(Xb, wb, Z, z_max, scaled, buf):
    """``N`` and ``S`` of a block from its scaled softmax scores (float64).

    ``Xb`` holds the block's centred rows (CSR) or its ``augmented_block``
    (left as it is), ``Z`` and ``z_max`` its scores and their row maxima
    (``scaled_scores`` against ``scaled``); both are spoilt.

    One ``exp`` per *near* score (within ``log(2 k / eps)`` of the row's
    maximum; the others weigh less than half an ulp of the row sum). When
    near scores are a minority they are gathered into a sparse ``k x b``
    matrix of weights ``w_i P_ij / Z_i`` and ``S`` is one sparse product (a
    one-hot row costs one entry, no ``b x k`` product and no ``exp`` beyond
    its maximum); otherwise the block takes the dense route with the
    normalisation folded into the sample weights ``v_i = w_i / Z_i``: ``N =
    v P``, ``S = P^T (v X)``. Each block decides for itself, so the sums are
    the same whatever the number of threads.
    """
    b, n_clusters = Z.shape
    sparse = sp.issparse(Xb)
    N, S = np.zeros(n_clusters), np.zeros((n_clusters, scaled.A.shape[0]))
    clamp = near = None
    if not sparse:
        # ">=": the maximum is near even where z_max - cut rounds to z_max.
        cut = far_cut(n_clusters, Z.dtype)
        near = np.greater_equal(Z, (z_max - cut)[:, None], out=buf.near[:b])
        n_near = np.count_nonzero(near)
        if n_near <= _SPARSE_EXP_DENSITY * near.size:
            _sparse_stats(Xb, wb, Z, z_max, near, N, S)
            return N, S
        clamp = n_near < near.size
    P, Zsum = softmax_weights(Z, z_max, buf, clamp, dead=scaled.dead, near=near)
    v = wb / Zsum
    if sparse:
        N += matmul(v, P)
        P *= v[:, None]
        S += (Xb.T @ P).T
    else:
        # Into a buffer: ``Xb`` may be the rows' own augmented copy.
        Xv = np.multiply(Xb, v[:, None], out=pooled_empty("Xv", Xb.shape, Xb.dtype))
        _add_augmented(matmul(P.T, Xv), N, S)
    return N, S


def _add_augmented(SN, N, S):
    """Add a product against augmented rows: ``S`` then ``N`` (last column)."""
    S += SN[:, :-1]
    N += SN[:, -1]


def near_triplets(near):
    """Return the positions of a ``b x k`` mask's entries, in row-major order.

    Returns the flat indices, their rows (ascending) and columns, and
    ``indptr`` (row ``i``'s entries are ``indptr[i]:indptr[i + 1]``): the
    layout of a ``k x b`` CSC matrix of the entries' values.
    """
    b, k = near.shape
    idx = np.flatnonzero(near)
    rows = idx // k
    indptr = np.zeros(b + 1, dtype=np.intp)
    np.cumsum(np.bincount(rows, minlength=b), out=indptr[1:])
    return idx, rows, idx - rows * k, indptr


def _sparse_stats(Xa, wb, Z, z_max, near, N, S):
    """Statistics from the near scores of an augmented block (see above)."""
    b, k = Z.shape
    idx, rows, cols, indptr = near_triplets(near)
    # Each row's maximum is near, so every row sum is at least 1. Centres of
    # zero prior mass (bias -max/16) are never near: they receive exactly 0.
    vals = np.exp(Z.ravel()[idx] - z_max[rows])
    vals *= (wb / np.bincount(rows, weights=vals, minlength=b))[rows]
    # Column i of this k x b matrix holds sample i's weights; the augmented
    # rows give N with S.
    _add_augmented(sp.csc_array((vals, cols, indptr), shape=(k, b)) @ Xa, N, S)


def hard_stats(Xb, wb, E, closest, e_closest, window):
    """Entmax-1.5 statistics ``(N, S)`` of a block of one-hot rows, or None.

    A row is exactly one-hot when its nearest centre is its only candidate,
    ``e_ij - e_closest < 2 T`` (``_split_one_hot``). Then ``N`` and ``S`` are
    those of Lloyd: ``w_i`` and ``w_i x_i`` go to the nearest centre, through
    a bincount and a sparse ``k x b`` product. One comparison over the block
    decides (``<=``: the nearest centre is counted even where ``2 T`` is
    below its rounding); a block with any tie or near second centre returns
    None for the threshold search.
    """
    b, k = E.shape
    # The window may be below the dtype's smallest normal (Lloyd: T = tiny);
    # the sum is then e_closest itself and only exact ties count. (The caller
    # keeps windows beyond the dtype's range away.)
    with np.errstate(under="ignore"):
        bound = e_closest + E.dtype.type(window)
    if np.count_nonzero(E <= bound[:, None]) != b:
        return None
    N = np.bincount(closest, weights=wb, minlength=k)
    P = sp.csc_array((wb, closest, np.arange(b + 1)), shape=(k, b))
    S = P @ Xb
    S = S.toarray() if sp.issparse(S) else S
    return N, S.astype(np.float64, copy=False)


def accumulate_moments(M, Xb, wb, R):
    """``M_j += sum_i w_i r_ij x_i x_i^T`` in float64.

    Few features: the outer products ``x_i x_i^T`` of a row sub-block
    (``b' x d^2``, 1 MiB) times ``(w r)^T``, one GEMM for all centres.
    From 16 features on, that materialises ``b d^2`` numbers per block (the
    stage summaries of an annealing run on the 64-feature digits spent a
    third of the fit there): only the non-zero responsibilities count, each
    as the row ``y = sqrt(w r) x``, gathered centre by centre (one-hot rows,
    most of them at low temperature, enter once instead of ``k`` times).
    Then each centre gets ``Y^T Y``, one GEMM per centre; or, where a block
    holds many centres with few rows each (a loop over them would cost a
    Python step per centre: an annealing run to 256 centres spent a third of
    its time there), all centres' ``Y_j^T Y_j`` come from one sparse
    product.
    """
    d, b = M.shape[1], Xb.shape[0]
    if d < _MOMENTS_GATHER_D:
        for sl, outer in _outer_products(Xb):
            wr = R[sl] * wb[sl, None]
            M += matmul(wr.T.astype(np.float64), outer).reshape(M.shape)
        return
    Xd = Xb.toarray() if sp.issparse(Xb) else Xb
    Xd = Xd.astype(np.float64, copy=False)
    WR = np.multiply(R, wb[:, None], dtype=np.float64)
    # The non-zero weights in centre-major order.
    centre, rows = np.divmod(np.flatnonzero(np.not_equal(WR, 0.0).T), b)
    _gathered_moments(M, Xd, rows, centre, WR[rows, centre])


def sparse_moments(M, Xb, rows, cols, vals, indptr):
    """``M_j += sum v x_i x_i^T`` over the triplets ``(i, j, v)``, in float64.

    The triplets are a block's non-zero weights ``w_i r_ij`` in row-major
    order (``rows`` ascending; row ``i``'s are ``indptr[i]:indptr[i + 1]``).
    Few features: the outer products of a row sub-block times the sparse
    ``k x b'`` weights; from 16 features on, the gathered routes of
    ``accumulate_moments``.
    """
    k, d = M.shape[0], M.shape[1]
    if d >= _MOMENTS_GATHER_D:
        Xd = Xb.toarray() if sp.issparse(Xb) else Xb
        order = np.argsort(cols, kind="stable")
        _gathered_moments(
            M, Xd.astype(np.float64, copy=False), rows[order], cols[order], vals[order]
        )
        return
    Mf = M.reshape(k, d * d)
    for sl, outer in _outer_products(Xb):
        lo, hi = indptr[sl.start], indptr[sl.stop]
        P = sp.csc_array(
            (vals[lo:hi], cols[lo:hi], indptr[sl.start : sl.stop + 1] - lo),
            shape=(k, outer.shape[0]),
        )
        Mf += P @ outer


def _outer_products(Xb):
    """Yield each row sub-block's slice and its ``x x^T`` (``b' x d^2``, float64).

    Sub-blocks of ``_OUTER_BLOCK_ELEMENTS`` numbers (``partition``'s rule).
    """
    b, d = Xb.shape
    for sl in row_blocks(b, block_rows(b, d * d, _OUTER_BLOCK_ELEMENTS)):
        xs = Xb[sl].toarray() if sp.issparse(Xb) else Xb[sl]
        xs = xs.astype(np.float64, copy=False)
        yield sl, (xs[:, :, None] * xs[:, None, :]).reshape(xs.shape[0], d * d)


def _gathered_moments(M, Xd, rows, centre, vals):
    """``M_j += Y_j^T Y_j``, ``Y_j`` the rows of centre ``j`` scaled by ``sqrt(v)``.

    The triplets ``(rows, centre, vals)`` are in centre-major order, rows
    ascending within a centre. One GEMM per centre; or, where the block
    holds many centres with few rows each, one sparse product for all.
    """
    k, d = M.shape[0], M.shape[1]
    scale = np.sqrt(vals)
    bounds = np.searchsorted(centre, np.arange(k + 1))
    active = np.flatnonzero(np.diff(bounds))
    if rows.size * d * d < _SPARSE_PER_CENTRE * active.size:
        # Row i of the sparse n x kd matrix Z holds y_i in its centre's d
        # columns: Z^T Y stacks the centres' Y_j^T Y_j.
        Y = Xd[rows] * scale[:, None]
        n = rows.size
        cols = (centre[:, None] * d + np.arange(d)).ravel()
        Z = sp.csr_array((Y.ravel(), cols, np.arange(0, n * d + 1, d)), (n, k * d))
        M += (Z.T @ Y).reshape(M.shape)
        return
    for j in active:
        sl = slice(bounds[j], bounds[j + 1])
        Y = Xd[rows[sl]] * scale[sl, None]
        M[j] += matmul(Y.T, Y)


# From this many features on, moments are accumulated centre by centre.
_MOMENTS_GATHER_D = 16
# Below it, the outer products of a row sub-block: 1 MiB of float64
# (``partition``'s rule).
_OUTER_BLOCK_ELEMENTS = 1 << 17
# One sparse product beats a GEMM per centre below this many products
# ``y_a y_b`` per centre with weight in the block (a Python step costs about
# 3.5 us, a product in the sparse kernel about 0.35 ns: measured on blocks of
# 256-4096 rows, 32-512 centres, 16 and 64 features).
_SPARSE_PER_CENTRE = 10_000
