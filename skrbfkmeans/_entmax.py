"""Sparse probability maps: alpha-entmax, entmax-1.5 and sparsemax, in NumPy.

All maps share one normal form. For a slice ``z`` of scores and ``alpha > 1``,

    p_j = [(alpha - 1) z_j - tau]_+ ** (1 / (alpha - 1)),   sum_j p_j = 1,

with a scalar threshold ``tau``. Every routine first shifts the slice by its
maximum and scales it by ``alpha - 1`` (``u = (alpha - 1) (z - max z)``), so the
largest entry is 0 and ``tau`` lies in ``[-1, -(1 / k) ** (alpha - 1)]``. Only
entries with ``u_j > -1`` can be in the support; a slice with a single such
entry is exactly one-hot.
"""

import math
import numbers

import numpy as np

from ._engine.entmax_rows import (
    _bisect_threshold,
    _blocks,
    _default_n_iter,
    _finish,
    _newton_threshold,
    _split_one_hot,
)

__all__ = ["entmax15", "entmax_bisect", "sparsemax", "entmax_backward"]


def _check_alpha(alpha):
    if (
        not isinstance(alpha, numbers.Real)
        or isinstance(alpha, bool)
        or not math.isfinite(alpha)
        or alpha <= 1
    ):
        raise ValueError(f"alpha must be a finite real number > 1, got {alpha!r}.")
    return float(alpha)


def _result_dtype(dtype):
    """float32 and float64 are kept, float16 computes in float32, others in float64."""
    if dtype == np.float32 or dtype == np.float16:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _as_rows(X, axis, name):
    """View ``X`` as a 2-D array whose rows are the slices along ``axis``.

    Returns the 2-D array (a view of the caller's memory where possible: the
    kernels only read it), the result dtype and a function that maps a 2-D
    result back to the shape and axis of ``X``.
    """
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must contain real numbers, got an array of dtype {X.dtype}."
        )
    if X.ndim == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar.")
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise TypeError(f"axis must be an integer, got {axis!r}.")
    if not -X.ndim <= axis < X.ndim:
        raise ValueError(f"axis {axis} is out of bounds for {name} of ndim {X.ndim}.")
    axis = int(axis) % X.ndim
    moved = np.moveaxis(X, axis, -1)
    moved_shape = moved.shape
    if moved_shape[-1] == 0 and X.size == 0 and math.prod(moved_shape[:-1]) > 0:
        raise ValueError(f"{name} has empty slices along axis {axis}.")

    def restore(P):
        return np.moveaxis(P.reshape(moved_shape), -1, axis)

    rows = moved.reshape(-1, moved_shape[-1])
    if rows.dtype.kind == "b":
        rows = rows.view(np.uint8)
    return rows, _result_dtype(X.dtype), restore


def _check_max(zmax, name):
    """Validate slices from their maxima: argmax reports NaN as the maximum."""
    if np.isfinite(zmax).all():
        return
    if np.isnan(zmax).any():
        raise ValueError(f"{name} contains NaN.")
    if np.isposinf(zmax).any():
        raise ValueError(f"{name} contains +inf.")
    raise ValueError(
        f"{name} has a slice whose entries are all -inf; each slice needs a "
        "finite maximum."
    )


def _shift(X, out, name):
    """``out <- X - max(X)`` row-wise, after validating the maxima.

    Returns the argmax. The maximum itself becomes exactly 0.
    """
    imax = np.argmax(X, axis=1)
    zmax = X[np.arange(X.shape[0]), imax].astype(out.dtype)
    _check_max(zmax, name)
    # Entries further than the largest float below the maximum (possible only
    # for scores near +-1.8e308) overflow to -inf, which is their exact limit:
    # they are infinitely far outside the support.
    with np.errstate(over="ignore"):
        np.subtract(X, zmax[:, None], out=out)
    return imax


def _sparse_map(X, alpha, axis):
    X, dtype, restore = _as_rows(X, axis, "X")
    m, k = X.shape
    Z = np.empty((m, k), dtype=dtype)
    workspace, blocks = _blocks(m, k, dtype)
    capacity = workspace.V.shape[0]
    # Rows that need a threshold search, when they are few per block (low
    # temperature), are pooled across blocks: one Newton solve per workspace
    # of them instead of one per block (its fixed cost dominated there).
    pending = []

    def solve(parts):
        Ud = np.concatenate([part[1] for part in parts])
        rows = np.concatenate([part[0] for part in parts])
        n_cand = np.concatenate([part[2] for part in parts])
        tau = _newton_threshold(Ud, alpha, n_cand, workspace)
        Z[rows] = _finish(Ud, tau, alpha, workspace.V[: rows.size], workspace.ones)

    for sl in blocks:
        # Each block of the output holds the shifted scores, then the result.
        U = Z[sl]
        dense, Ud, n_cand = _split_one_hot(U, _shift(X[sl], U, "X"), alpha, workspace)
        if 8 * dense.size >= U.shape[0]:
            tau = _newton_threshold(Ud, alpha, n_cand, workspace)
            U[dense] = _finish(
                Ud, tau, alpha, workspace.V[: dense.size], workspace.ones
            )
            continue
        if dense.size + sum(part[0].size for part in pending) > capacity:
            solve(pending)
            pending = []
        if dense.size:
            pending.append((dense + sl.start, Ud.copy(), n_cand))
    if pending:
        solve(pending)
    return restore(Z)


def entmax15(X, axis=-1):
    """Entmax-1.5: a sparse, exact alternative to softmax.

    Maps each slice ``z`` of ``X`` along ``axis`` to the probability vector
    ``p_j = [z_j / 2 - tau]_+ ** 2`` whose threshold ``tau`` makes it sum to one.

    Parameters
    ----------
    X : array-like of shape (..., n, ...)
        Scores. Entries may be ``-inf`` (masked out) as long as every slice has
        a finite maximum. Integers are converted to float64, float16 to
        float32; float32 and float64 are kept.
    axis : int, default=-1
        The axis along which the map is applied.

    Returns
    -------
    P : ndarray of the same shape as ``X``
        Non-negative, each slice sums to one; exact zeros outside the support.

    Raises
    ------
    ValueError
        If ``X`` contains NaN or ``+inf``, or a slice is entirely ``-inf``.

    See Also
    --------
    entmax_bisect : Alpha-entmax for any alpha > 1.
    sparsemax : The alpha = 2 member of the family.
    entmax_backward : Vector-Jacobian product of the map.

    Notes
    -----
    With ``u = (z - max z) / 2`` only entries with ``u_j > -1`` can be in the
    support, so a slice whose two largest scores differ by at least 2 is
    exactly one-hot and costs no iteration. Otherwise the threshold is found by
    Newton's method on the convex equation ``sum_j [u_j - tau]_+^2 = 1`` from
    the lower bound ``tau = -1``, and finished with its closed form (the
    smaller root of a quadratic in ``tau``) as soon as the support is known;
    the closed form is exact when it is consistent with the support.

    The map is the solution of
    ``argmax_p <p, z> + H_1.5(p)`` over the simplex, with the Tsallis entropy
    ``H_1.5(p) = (4 / 3) sum_j (p_j - p_j ** 1.5)``.

    References
    ----------
    .. [1] B. Peters, V. Niculae, A. F. T. Martins, "Sparse Sequence-to-Sequence
       Models", ACL 2019, arXiv:1905.05702.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import entmax15
    >>> entmax15(np.array([0.0, 1.0, 3.0]))
    array([0., 0., 1.])
    >>> entmax15(np.array([[0.0, 0.4, -3.0], [2.0, 2.0, 2.0]]))
    array([[0.36      , 0.64      , 0.        ],
           [0.33333333, 0.33333333, 0.33333333]])
    """
    return _sparse_map(X, 1.5, axis)


def sparsemax(X, axis=-1):
    """Sparsemax: the Euclidean projection of the scores onto the simplex.

    Maps each slice ``z`` of ``X`` along ``axis`` to ``p_j = [z_j - tau]_+``
    whose threshold ``tau`` makes it sum to one.

    Parameters
    ----------
    X : array-like of shape (..., n, ...)
        Scores. Entries may be ``-inf`` (masked out) as long as every slice has
        a finite maximum. Integers are converted to float64, float16 to
        float32; float32 and float64 are kept.
    axis : int, default=-1
        The axis along which the map is applied.

    Returns
    -------
    P : ndarray of the same shape as ``X``
        Non-negative, each slice sums to one; exact zeros outside the support.

    Raises
    ------
    ValueError
        If ``X`` contains NaN or ``+inf``, or a slice is entirely ``-inf``.

    See Also
    --------
    entmax15 : The alpha = 1.5 member of the family.
    entmax_bisect : Alpha-entmax for any alpha > 1.

    Notes
    -----
    A slice whose two largest scores differ by at least 1 is exactly one-hot.
    Otherwise the threshold is found by Michelot's algorithm, which is
    Newton's method on ``sum_j [z_j - tau]_+ = 1`` from the lower bound
    ``max z - 1``: each step is the closed form ``tau = (sum_S z - 1) / |S|``
    on the current support ``S``, and it stops, exact, when ``S`` no longer
    changes.

    References
    ----------
    .. [1] A. F. T. Martins, R. F. Astudillo, "From Softmax to Sparsemax",
       ICML 2016, arXiv:1602.02068.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import sparsemax
    >>> sparsemax(np.array([0.0, 0.5, 2.0]))
    array([0., 0., 1.])
    >>> sparsemax(np.array([0.0, 0.5, 1.0]))
    array([0.  , 0.25, 0.75])
    """
    return _sparse_map(X, 2.0, axis)


def entmax_bisect(X, alpha=1.5, axis=-1, *, n_iter=None, ensure_sum_one=True):
    """Alpha-entmax for any ``alpha > 1``, by bisection on the threshold.

    Maps each slice ``z`` of ``X`` along ``axis`` to
    ``p_j = [(alpha - 1) z_j - tau]_+ ** (1 / (alpha - 1))`` whose threshold
    ``tau`` makes it sum to one. ``alpha = 2`` is sparsemax, ``alpha -> 1``
    tends to softmax.

    Parameters
    ----------
    X : array-like of shape (..., n, ...)
        Scores. Entries may be ``-inf`` (masked out) as long as every slice has
        a finite maximum. Integers are converted to float64, float16 to
        float32; float32 and float64 are kept.
    alpha : float, default=1.5
        The entmax parameter, a finite real number > 1.
    axis : int, default=-1
        The axis along which the map is applied.
    n_iter : int, default=None
        Number of halvings of the threshold bracket. ``None`` derives it from
        the dtype: ``nmant + 2 + min(ceil((alpha - 1) log2 n), nmant)`` where
        ``nmant`` is the number of mantissa bits (52 for float64, 23 for
        float32), which resolves ``tau`` to a relative ulp of its smallest
        possible magnitude ``(1 / n) ** (alpha - 1)``.
    ensure_sum_one : bool, default=True
        Whether to divide each slice by its sum at the end. Without it a slice
        sums to one within the bracket's final width.

    Returns
    -------
    P : ndarray of the same shape as ``X``
        Non-negative, each slice sums to one; exact zeros outside the support.

    Raises
    ------
    ValueError
        If ``alpha`` is not a finite number > 1, ``n_iter`` is not a
        non-negative integer, ``X`` contains NaN or ``+inf``, or a slice is
        entirely ``-inf``.

    See Also
    --------
    entmax15 : Exact fast path for alpha = 1.5.
    sparsemax : Exact fast path for alpha = 2.

    Notes
    -----
    Each slice is shifted by its maximum *before* anything else (so a large
    common offset costs no precision) and scaled by ``alpha - 1``; then
    ``tau`` lies in ``[-1, -(1 / n) ** (alpha - 1)]``, where ``f(tau) =
    sum_j p_j(tau) - 1`` changes sign. Each halving keeps the half where it
    does. Slices whose two largest scores differ by at least ``1 / (alpha -
    1)`` are exactly one-hot and skip the bisection.

    Cost: ``n_iter`` passes over the slices that are not one-hot, each with a
    power (a square for alpha = 1.5, none for alpha = 2).

    References
    ----------
    .. [1] B. Peters, V. Niculae, A. F. T. Martins, "Sparse Sequence-to-Sequence
       Models", ACL 2019, arXiv:1905.05702.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import entmax_bisect
    >>> entmax_bisect(np.array([0.0, 0.4, -3.0]), alpha=1.5)
    array([0.36, 0.64, 0.  ])
    >>> entmax_bisect(np.array([0.0, 0.5, 1.0]), alpha=2)
    array([0.  , 0.25, 0.75])
    """
    alpha = _check_alpha(alpha)
    if n_iter is not None and (
        not isinstance(n_iter, numbers.Integral)
        or isinstance(n_iter, bool)
        or n_iter < 0
    ):
        raise ValueError(f"n_iter must be a non-negative integer, got {n_iter!r}.")
    X, dtype, restore = _as_rows(X, axis, "X")
    m, k = X.shape
    if n_iter is None:
        n_iter = _default_n_iter(dtype, alpha, k)
    Z = np.empty((m, k), dtype=dtype)
    workspace, blocks = _blocks(m, k, dtype)
    for sl in blocks:
        # Each block of the output holds the shifted scores, then the result.
        U = Z[sl]
        imax = _shift(X[sl], U, "X")
        dense, Ud, n_cand = _split_one_hot(U, imax, alpha, workspace)
        if dense.size:
            lo = _bisect_threshold(Ud, alpha, n_cand, n_iter, workspace)
            P = workspace.W[: dense.size]
            U[dense] = _finish(
                Ud, lo, alpha, P, workspace.ones, normalize=ensure_sum_one
            )
    return restore(Z)


def entmax_backward(P, G, *, alpha=1.5, axis=-1):
    """Vector-Jacobian product of alpha-entmax.

    Given ``P = entmax(Z)`` and an upstream gradient ``G = dL/dP``, returns
    ``dL/dZ``.

    Parameters
    ----------
    P : array-like
        The output of an alpha-entmax map (``entmax15``, ``sparsemax`` or
        ``entmax_bisect`` with the same ``alpha``) along ``axis``.
    G : array-like of the same shape as ``P``
        Gradient of the loss with respect to ``P``.
    alpha : float, default=1.5
        The entmax parameter, a finite real number > 1.
    axis : int, default=-1
        The axis along which the map was applied.

    Returns
    -------
    dZ : ndarray of the same shape as ``P``
        Gradient of the loss with respect to the scores ``Z``. Zero outside
        the support of ``P``.

    Raises
    ------
    ValueError
        If the shapes differ, an input is not finite, ``P`` has negative
        entries or a slice with no positive entry, or ``alpha`` is invalid.

    See Also
    --------
    entmax15, sparsemax, entmax_bisect : The forward maps.

    Notes
    -----
    The Jacobian is symmetric: with ``s = P ** (2 - alpha)`` on the support
    and 0 elsewhere, ``dZ = s * G - s * sum(s * G) / sum(s)`` along ``axis``.
    alpha = 1.5 gives ``s = sqrt(P)``, sparsemax ``s = 1[P > 0]``, and
    ``alpha -> 1`` recovers the softmax Jacobian ``diag(p) - p p^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import entmax15, entmax_backward
    >>> P = entmax15(np.array([0.0, 0.5, 5.0]))
    >>> entmax_backward(P, np.array([1.0, 2.0, 3.0]))
    array([0., 0., 0.])
    >>> P = entmax15(np.array([0.0, 0.4]))
    >>> P
    array([0.36, 0.64])
    >>> entmax_backward(P, np.array([1.0, 0.0]))
    array([ 0.34285714, -0.34285714])
    """
    alpha = _check_alpha(alpha)
    P_arr, G_arr = np.asarray(P), np.asarray(G)
    if P_arr.shape != G_arr.shape:
        raise ValueError(
            f"P and G must have the same shape, got {P_arr.shape} and {G_arr.shape}."
        )
    Pr, p_dtype, restore = _as_rows(P_arr, axis, "P")
    Gr, g_dtype, _ = _as_rows(G_arr, axis, "G")
    dtype = np.promote_types(p_dtype, g_dtype)
    Pr, Gr = Pr.astype(dtype, copy=False), Gr.astype(dtype, copy=False)
    for arr, name in ((Pr, "P"), (Gr, "G")):
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinity.")
    if (Pr < 0).any():
        raise ValueError("P has negative entries; it must be a probability map.")
    support = Pr > 0
    if Pr.size and not support.any(axis=1).all():
        raise ValueError("P has a slice with no positive entry.")
    if alpha == 2.0:
        S = support.astype(dtype)
    elif alpha == 1.5:
        S = np.sqrt(Pr)
    else:
        # s = p ** (2 - alpha) overflows for alpha > 2 and a small p: work with
        # s / max(s) (computed in the log domain) and scale back at the end.
        with np.errstate(divide="ignore"):
            log_s = np.where(support, (2.0 - alpha) * np.log(Pr), -np.inf)
        log_scale = log_s.max(axis=1, keepdims=True)
        with np.errstate(under="ignore"):
            S = np.exp(log_s - log_scale)
    # dZ = s * g - s * <s, g> / sum(s), with s up to a positive factor per row.
    total = S.sum(axis=1, keepdims=True)
    dZ = S * Gr
    dZ -= S * (dZ.sum(axis=1, keepdims=True) / total)
    if alpha not in (1.5, 2.0):
        # Exact zeros stay zero (no inf * 0) when the factor overflows.
        with np.errstate(over="ignore", under="ignore"):
            scale = np.broadcast_to(np.exp(log_scale), dZ.shape)
            np.multiply(dZ, scale, out=dZ, where=dZ != 0)
    return restore(dZ)
