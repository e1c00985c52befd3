"""The RBF K-Means engine: block passes over the data.

Everything here takes arrays and scalars, never an estimator. A *pass* visits
the rows in blocks (``_assign.block_rows``); each entry point names what it
accumulates: ``statistics`` (``N_j = sum_i w_i r_ij`` and
``S_j = sum_i w_i r_ij (x_i - offset)``, float64, with the hard inertia),
``free_energy``, ``responsibilities``, ``gradients`` (with respect to ``X``)
and ``moments``; ``labels_inertia`` and ``labels_margins`` are the hard
passes. Nothing of size ``n_samples x n_clusters`` exists outside a block
unless the caller asks for the responsibilities.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .blas import matmul, row_sums
from .block_stats import _accumulate_moments, _hard_stats, _softmax_stats
from .blocks import (
    SWEEP_BLOCK_BYTES,
    BlockPlan,
    ScaledCenters,
    centred_rows,
    pooled_empty,
    responsibilities_inplace,
    scores_inplace,
    temperature,
)
from .partition import block_rows, row_blocks

# ``squared_norms`` takes blocks of 1 MiB of centred rows (``partition``).
_NORMS_BLOCK_BYTES = 1 << 20


class PassResult(NamedTuple):
    """What one pass over the data accumulated.

    Arrays not asked for are ``None``; the objective not asked for, and the
    inertia with ``inertia=False``, are 0.0.
    """

    N: np.ndarray
    S: np.ndarray
    inertia: float
    objective: float
    grad_X: np.ndarray
    moments: np.ndarray


def column_mean_variance(X, sample_weight):
    """Weighted mean and variance of every column (float64).

    Sums of squared deviations, never ``E[x^2] - mean^2`` (which cancels for
    a column far from 0); for CSR input the implicit zeros deviate by
    ``-mean`` with the weight the column does not store.
    """
    w = sample_weight / sample_weight.sum(dtype=np.float64)
    if not sp.issparse(X):
        # Means and squares of tiny values underflow: their working values.
        with np.errstate(under="ignore"):
            mean = matmul(w, X)
            return mean, matmul(w, (X - mean) ** 2)
    X = X.tocsr()
    d = X.shape[1]
    # In units of a power of 2 near the largest entry (at most it, so that
    # the unit itself stays finite): the squares of data near 1e160 (whose
    # working units come later) must not overflow.
    exponent = int(np.frexp(np.abs(X.data).max(initial=1.0))[1])
    unit = float(np.ldexp(1.0, exponent - 1))
    data = X.data / unit
    mean = np.asarray(X.T @ w).ravel() / unit
    w_stored = np.repeat(w, np.diff(X.indptr))
    deviation = data - mean[X.indices]
    # Squares of tiny deviations underflow to 0 (their values at working
    # precision); data near the dtype's limit give an infinite variance,
    # which the scale checks (``_scaling``) turn into a clear error.
    with np.errstate(under="ignore", over="ignore"):
        stored_var = np.bincount(
            X.indices, weights=w_stored * deviation**2, minlength=d
        )
        stored_w = np.bincount(X.indices, weights=w_stored, minlength=d)
        var = stored_var + np.maximum(1.0 - stored_w, 0.0) * mean**2
        return mean * unit, var * unit * unit


def data_offset(X, sample_weight):
    """Return the point the engine centres rows on.

    Dense ``X``: its weighted mean. CSR ``X``: the mean of the columns whose
    mean dominates their spread (``|mean| > std``, so mostly stored), zero
    elsewhere; there uncentred distances would cancel, and centring adds
    few stored entries. Centring elsewhere would make the rows dense.
    """
    # Data near the dtype's limit give an infinite or NaN mean, which the
    # scale checks (``_scaling``) report as data too large; tiny data give a
    # mean at working precision.
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if sp.issparse(X):
            mean, var = column_mean_variance(X, sample_weight)
            # Compared without squaring the mean (it may be near 1e160).
            dominant = np.abs(mean) > np.sqrt(var)
            return np.where(dominant, mean, 0.0).astype(X.dtype)
        return (matmul(sample_weight, X) / sample_weight.sum()).astype(X.dtype)


def squared_norms(X, offset):
    """``||x_i - offset||^2`` for every row, computed block by block."""
    if sp.issparse(X):
        Xc = centred_rows(X, offset)
        return np.asarray(Xc.multiply(Xc).sum(axis=1), dtype=X.dtype).ravel()
    n_samples = X.shape[0]
    out = np.empty(n_samples, dtype=X.dtype)
    step = block_rows(n_samples, X.shape[1] * X.itemsize, _NORMS_BLOCK_BYTES)
    # One reused 1 MiB buffer: fresh ones cost page faults on every block
    # (and under dask's MALLOC_TRIM_THRESHOLD_ a fresh mapping each time).
    buf = pooled_empty("sq_norms", (step, X.shape[1]), X.dtype)
    for sl in row_blocks(n_samples, step):
        Xb = np.subtract(X[sl], offset, out=buf[: sl.stop - sl.start])
        np.einsum("ij,ij->i", Xb, Xb, out=out[sl])
    return out


def statistics_route(activation, *, prior=None, inertia=True):
    """Name the route ``statistics(route="auto")`` tries first.

    ``"scaled-softmax"``: scores from one GEMM against the centres scaled by
    ``1 / T``, far scores skipped, near ones gathered into a sparse product
    (``_block_stats._softmax_stats``); it falls back to the general route
    where scaled scores could overflow (``sigma`` near 1e-300 of the data).
    With a prior it needs ``inertia=False``. ``"one-hot-blocks"``
    (entmax-1.5): blocks whose rows are all one-hot take Lloyd's statistics;
    the pass continues on the general route from its first block with a
    soft row. ``"general"``: responsibilities block by block. All routes
    agree to rounding (tests/test_fast_paths.py).
    """
    if activation == "softmax" and (prior is None or not inertia):
        return "scaled-softmax"
    if activation == "entmax15":
        return "one-hot-blocks"
    return "general"


def statistics(
    X,
    sample_weight,
    centers,
    sigma,
    activation,
    offset,
    x_sq,
    *,
    prior=None,
    inertia=True,
    route="auto",
):
    """Return the E-step's sums ``N``, ``S`` and the hard inertia, in one pass.

    ``prior`` (softmax only) gives mass-constrained responsibilities;
    ``inertia=False`` skips the inertia (reported as 0.0). ``route="auto"``
    takes ``statistics_route``'s route, ``"general"`` the general one.
    Returns a ``PassResult``.
    """
    return _pass(
        X, sample_weight, centers, sigma, activation, offset, x_sq,
        prior=prior, inertia=inertia, route=route,
    )  # fmt: skip


def free_energy(
    X,
    sample_weight,
    centers,
    sigma,
    activation,
    offset,
    x_sq,
    *,
    prior=None,
    with_statistics=False,
):
    """Return the free energy (``PassResult.objective``) and the hard inertia.

    ``with_statistics`` also accumulates ``N``, ``S`` and the second moments
    (what the annealing's split decision needs) in the same pass.
    """
    return _pass(
        X, sample_weight, centers, sigma, activation, offset, x_sq,
        stats=with_statistics, objective=True, moments=with_statistics,
        prior=prior,
    )  # fmt: skip


def responsibilities(X, centers, sigma, activation, offset, x_sq, out):
    """Write the responsibilities of every row into ``out``; returns ``out``."""
    ones = np.ones(X.shape[0], dtype=out.dtype)
    _pass(
        X, ones, centers, sigma, activation, offset, x_sq,
        stats=False, inertia=False, resp_out=out,
    )  # fmt: skip
    return out


def gradients(X, sample_weight, centers, sigma, activation, offset, x_sq):
    """Free energy, ``N``, ``S`` and ``dF/dX`` in one pass (``PassResult``)."""
    return _pass(
        X, sample_weight, centers, sigma, activation, offset, x_sq,
        objective=True, grad_X=True,
    )  # fmt: skip


def moments(X, sample_weight, centers, sigma, activation, offset, x_sq):
    """``N``, ``S`` and ``M_j = sum_i w_i r_ij x x^T`` (``PassResult``)."""
    return _pass(
        X, sample_weight, centers, sigma, activation, offset, x_sq, moments=True
    )


def _pass(
    X,
    sample_weight,
    centers,
    sigma,
    activation,
    offset,
    x_sq,
    *,
    stats=True,
    objective=False,
    grad_X=False,
    resp_out=None,
    prior=None,
    moments=False,
    inertia=True,
    route="auto",
):
    """One pass over ``X`` at width ``sigma``: the entry points above.

    The free energy is measured from its value for ``k`` coincident centres:
    per sample, softmax gives ``-T log(mean_j exp(-d_ij / T))`` and entmax-1.5
    ``min_r <r, d_i> + T (H_max - H_1.5(r))``, both between the distance to
    the nearest centre and the mean distance (so finite at every width).

    ``prior`` (softmax only; probabilities over the centres) gives the
    mass-constrained responsibilities ``r_ij ~ p_j exp(-d_ij / T)`` and the
    free energy ``-T log(sum_j p_j exp(-d_ij / T))`` (the uniform prior is the
    case above). ``moments`` accumulates ``M_j = sum_i w_i r_ij x x^T`` (float64,
    centred coordinates) for the posterior covariances. ``inertia=False``
    skips the hard inertia (reported as 0.0); a softmax pass with a prior
    takes the fast route only then.

    Statistics alone, with ``route="auto"``, take ``statistics_route``'s
    route; they equal the general path to rounding.

    Cost: two ``b x k x d`` products per block (distances and ``S``) and a few
    passes over the ``b x k`` scores (one ``exp`` for softmax; entmax needs no
    power for one-hot rows).
    """
    dtype = centers.dtype
    n_clusters = centers.shape[0]
    T, inv_T = temperature(sigma, dtype)
    sums = _Sums(X.shape, n_clusters, dtype, stats, grad_X, moments, resp_out)
    # Nothing per sample is returned: responsibilities may drop entries below
    # rounding (they only feed sums).
    internal = not (grad_X or resp_out is not None)
    sweeps = objective or moments or not internal
    target = SWEEP_BLOCK_BYTES if sweeps else None
    plan = BlockPlan(X, centers, offset, activation, target)
    log_prior, weights, bias = _prior_terms(prior, n_clusters, T, dtype)
    fast = route == "auto" and internal and stats and not (objective or moments)
    if fast and statistics_route(activation, prior=prior, inertia=inertia) == (
        "scaled-softmax"
    ):
        args = (X, sample_weight, x_sq, plan, T, log_prior, inertia)
        result = _scaled_softmax(*args)
        if result is not None:
            return result
    # Entmax-1.5 statistics: blocks whose rows are all one-hot skip the
    # threshold search (_hard_stats).
    window = 2.0 * T  # candidates of entmax-1.5: d_ij - d_min < 2 T
    hard = (
        fast
        and activation == "entmax15"
        # Beyond the dtype's range the window holds every centre.
        and window < float(np.finfo(dtype).max)
    )

    def block(sl, Xb, E, imin, e_min, buf):
        """One block's (inertia, free energy, sums); rows ``sl`` of outputs."""
        wb = sample_weight[sl]
        b = wb.shape[0]
        d_min = np.maximum(x_sq[sl] + e_min, 0.0)
        block_inertia = float(matmul(wb, d_min)) if inertia else 0.0
        if hard:
            part = _hard_stats(Xb, wb, E, imin, e_min, window)
            if part is not None:
                return block_inertia, 0.0, part
        if objective:
            # D = d - d_min >= 0, kept for the objective and its bounds.
            D = np.subtract(E, e_min[:, None], out=buf.D[:b])
            np.maximum(D, 0.0, out=D)
            d_mean = d_min + matmul(D, weights)
            if activation == "softmax":
                F, Q = _softmax_energy(D, d_min, T, inv_T, weights, buf.scratch[:b])
        if objective and activation == "softmax" and internal:
            if not (stats or moments):
                # The objective alone: no responsibilities needed.
                return block_inertia, float(matmul(wb, np.clip(F, d_min, d_mean))), None
            # The objective's expm1 already holds exp(-D / T) - 1: the
            # responsibilities p_j exp(-D_ij / T) / sum follow without a
            # second exp (entries below half an ulp of the row's largest
            # become 0, which the statistics do not see).
            R = np.add(Q, 1.0, out=E)
            R *= weights
            R /= row_sums(R, buf.ones)[:, None]
        else:
            if prior is not None:
                E += bias
                imin = np.argmin(E, axis=1)
                e_min = E[np.arange(b), imin]
            U = scores_inplace(E, e_min, inv_T)
            R = responsibilities_inplace(U, imin, activation, buf)
        block_energy = 0.0
        if objective:
            if activation == "entmax15":
                F = _entmax_energy(R, D, d_min, T, buf.ws.W[:b], buf.ones)
            # Rounding only: the exact value lies between these bounds.
            block_energy = float(matmul(wb, np.clip(F, d_min, d_mean)))
        return block_inertia, block_energy, sums.block(sl, Xb, wb, R, plan.pc.C)

    total_inertia = free_energy = 0.0
    for block_inertia, block_energy, part in plan.map(block):
        total_inertia += block_inertia
        free_energy += block_energy
        sums.add(part)
    return PassResult(sums.N, sums.S, total_inertia, free_energy, sums.G, sums.M)


def _scaled_softmax(X, sample_weight, x_sq, plan, T, log_prior, inertia):
    """Run the "scaled-softmax" route; ``None`` where scaled scores overflow."""
    x_sq_max = float(x_sq.max()) if X.shape[0] else 0.0
    sc = ScaledCenters(plan.pc, T, log_prior, x_sq_max)
    if not sc.usable:
        return None
    N, S, total_inertia = _softmax_stats(X, sample_weight, x_sq, sc, T, plan, inertia)
    return PassResult(N, S, total_inertia, 0.0, None, None)


def _prior_terms(prior, n_clusters, T, dtype):
    """``log p`` (float64, or ``None``), the weights ``p`` and the bias ``-T log p``.

    Without a prior the weights are uniform (the free energy's reference of
    ``k`` coincident centres) and there is no bias. With one, the
    mass-constrained scores ``-d / T + log p`` are the bias on ``e = d -
    ||x||^2``.
    """
    if prior is None:
        return None, np.full(n_clusters, 1.0 / n_clusters, dtype=dtype), None
    with np.errstate(divide="ignore"):
        log_prior = np.log(np.asarray(prior, dtype=np.float64))
    with np.errstate(over="ignore"):
        bias = (-T * log_prior).astype(dtype)
    return log_prior, np.asarray(prior, dtype=dtype), bias


def _softmax_energy(D, d_min, T, inv_T, weights, scratch):
    """Per-row softmax free energy from ``D = d - d_min >= 0``; and ``Q``.

    ``-T log(sum_j p_j exp(-D_j / T))``: log1p of ``sum_j p_j expm1(-D_j /
    T)`` keeps full precision when ``T`` is large and the exponents tiny;
    far scores underflow to -1. ``Q`` (in ``scratch``) holds ``exp(-D / T) -
    1``, from which the responsibilities follow without a second ``exp``.
    """
    with np.errstate(over="ignore", under="ignore"):
        Q = np.multiply(D, -inv_T, out=scratch)
        np.expm1(Q, out=Q)
        return d_min - T * np.log1p(matmul(Q, weights)), Q


def _entmax_energy(R, D, d_min, T, W, ones):
    """Per-row entmax-1.5 free energy ``<r, d> + T (H_max - H_1.5(r))``.

    The entropy gap ``H_max - H_1.5(r) = (4/3) (sum_j r_j^1.5 - c)`` (``c =
    k^-1/2``) is a difference of nearly equal terms near the uniform row,
    where a large ``T`` multiplies its rounding (relative errors of 2e-10 at
    widths of 1e4 times the data's scale, over 1% at 1e8). With ``delta_j =
    sqrt(r_j) - c`` and ``sum_j r_j = 1`` it is ``2 c sum_j delta_j^2 + (4/3)
    sum_j delta_j^3`` exactly, a sum of small terms; one-hot rows take the
    exact ``H_max``.
    """
    c = R.shape[1] ** -0.5
    # At extreme widths the entropy terms underflow to 0: their value at
    # working precision.
    with np.errstate(under="ignore"):
        np.sqrt(R, out=W)
        W -= c
        W2 = W * W
        gap = 2.0 * c * row_sums(W2, ones)
        W2 *= W
        gap += (4.0 / 3.0) * row_sums(W2, ones)
        gap[R.max(axis=1) == 1.0] = (4.0 / 3.0) * (1.0 - c)
        return d_min + np.einsum("ij,ij->i", R, D) + T * gap


class _Sums:
    """What a general pass accumulates from each block's responsibilities.

    Arrays not asked for are ``None``: the statistics ``N``, ``S``, the
    gradient ``G`` with respect to ``X``, the second moments ``M``, and the
    caller's ``resp_out``.
    """

    def __init__(self, shape, n_clusters, dtype, stats, grad_X, moments, resp_out):
        n_samples, d = shape
        self.N = np.zeros(n_clusters) if stats else None
        self.S = np.zeros((n_clusters, d)) if stats else None
        self.G = np.empty((n_samples, d), dtype=dtype) if grad_X else None
        self.M = np.zeros((n_clusters, d, d)) if moments else None
        self.resp_out = resp_out

    def block(self, sl, Xb, wb, R, C):
        """One block's ``(N, S, M)`` (``None`` if not asked for); rows ``sl``.

        Rows ``Xb`` (weights ``wb``, responsibilities ``R``) of block ``sl``
        write their rows of the responsibilities and the gradient; ``C``
        holds the centred centres; ``Xb`` and ``R`` are scratch.
        """
        if self.resp_out is not None:
            self.resp_out[sl] = R
        if self.G is not None:
            # dF/dx_i = 2 w_i (x_i - sum_j r_ij mu_j), in centred coordinates.
            Gb = self.G[sl]
            Gb[...] = Xb.toarray() if sp.issparse(Xb) else Xb
            Gb -= matmul(R, C)
            Gb *= 2.0 * wb[:, None]
        M = N = S = None
        if self.M is not None:
            M = np.zeros_like(self.M)
            _accumulate_moments(M, Xb, wb, R)
        if self.N is not None:
            N = matmul(wb, R)
            if sp.issparse(Xb):
                R *= wb[:, None]
                S = (Xb.T @ R).T
            else:
                Xb *= wb[:, None]
                S = matmul(R.T, Xb)
        return N, S, M

    def add(self, part):
        """Add one block's ``(N, S, M)`` (in block order)."""
        if part is None:
            return
        N, S, M = part
        if N is not None:
            self.N += N
            self.S += S
        if M is not None:
            self.M += M


def m_step(N, S, centers, offset):
    """Return the centres ``S_j / N_j + offset``; one with no mass stays put."""
    new = centers.copy()
    alive = N > 0
    # The means of tiny data underflow: their values at working precision.
    with np.errstate(under="ignore"):
        new[alive] = S[alive] / N[alive, None] + offset
    return new


def labels_inertia(X, sample_weight, centers, offset, x_sq=None):
    """Nearest centre (int32) and the weighted hard inertia, block by block.

    ``fit`` and ``predict`` both call this on the same arrays, so ``labels_``
    equals ``predict(X)`` bit for bit.
    """
    if x_sq is None:
        x_sq = squared_norms(X, offset)
    labels = np.empty(X.shape[0], dtype=np.int32)

    def block(sl, Xb, E, imin, e_min, buf):
        labels[sl] = imin
        return float(matmul(sample_weight[sl], np.maximum(x_sq[sl] + e_min, 0.0)))

    inertia = 0.0
    for block_inertia in BlockPlan(X, centers, offset).map(block):
        inertia += block_inertia
    return labels, inertia


def labels_margins(X, centers, offset):
    """Nearest centre, margin ``d_(2) - d_(1)`` and ``d_(1) - ||x||^2``.

    The margin is computed from the same partial distances as the
    responsibilities, so ``margin >= 4 sigma^2`` decides exactly as the
    entmax-1.5 one-hot test does at width ``sigma`` (up to the rounding of
    one multiplication by ``1 / T``). With one centre the margin is ``inf``.
    The last array plus ``squared_norms(X, offset)`` is the squared distance
    to the nearest centre.
    """
    n_samples, n_clusters = X.shape[0], centers.shape[0]
    labels = np.empty(n_samples, dtype=np.int32)
    margins = np.full(n_samples, np.inf)
    nearest = np.empty(n_samples, dtype=centers.dtype)

    def block(sl, Xb, E, imin, e_min, buf):
        labels[sl] = imin
        nearest[sl] = e_min
        if n_clusters > 1:
            two = np.partition(E, 1, axis=1)[:, :2]
            margins[sl] = two[:, 1] - two[:, 0]

    BlockPlan(X, centers, offset).map(block)
    return labels, margins, nearest
