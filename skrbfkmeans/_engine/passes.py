"""The RBF K-Means engine: named passes over the rows, block by block.

Everything here takes arrays and scalars, never an estimator. A *pass* runs
one block function over the rows (``BlockPlan.map``: blocks cut by
``partition``'s rule, on the engine's threads) and adds what every block
returns, a ``_Part``, into a ``_Sums`` in block order, so that every number
of threads gives the same bytes. The passes:

- ``statistics``: the E-step's ``N_j = sum_i w_i r_ij`` and ``S_j = sum_i
  w_i r_ij (x_i - offset)`` (float64) with the hard inertia, on the route
  ``statistics_route`` names;
- ``free_energy`` (with the hard inertia); ``free_energy_moments`` (also
  ``N``, ``S`` and the second moments ``M_j = sum_i w_i r_ij x x^T``, in
  centred coordinates: what the annealing's split decision needs);
  ``gradients`` (also ``N``, ``S`` and ``dF/dX``); ``moments``;
  ``responsibilities``;
- the hard passes ``labels_inertia`` and ``labels_margins``, and the
  inertia a fit reports, ``explicit_inertia`` (explicit differences).

The free energy is measured from its value for ``k`` coincident centres: per
sample, softmax gives ``-T log(mean_j exp(-d_ij / T))`` and entmax-1.5
``min_r <r, d_i> + T (H_max - H_1.5(r))``, both between the distance to the
nearest centre and the mean distance (so finite at every width). A ``prior``
(softmax only; probabilities over the centres) gives the mass-constrained
responsibilities ``r_ij ~ p_j exp(-d_ij / T)`` and the free energy ``-T
log(sum_j p_j exp(-d_ij / T))`` (the uniform prior is the case above).

Nothing of size ``n_samples x n_clusters`` exists outside a block unless the
caller asks for the responsibilities. Cost of a pass on the general route:
two ``b x k x d`` products per block (distances and ``S``) and a few passes
over the ``b x k`` scores (one ``exp`` for softmax; entmax needs no power for
one-hot rows).
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .blas import matmul
from .block_stats import (
    accumulate_moments,
    hard_stats,
    near_triplets,
    softmax_stats,
    sparse_moments,
)
from .blocks import (
    SWEEP_BLOCK_BYTES,
    BlockPlan,
    ScaledCenters,
    augmented_block,
    block_responsibilities,
    centred_block,
    centred_rows,
    far_cut,
    pooled_empty,
    runner_up,
    scaled_scores,
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


class _Part(NamedTuple):
    """What one block adds to a pass's ``_Sums`` (``None``: nothing)."""

    inertia: float = 0.0
    objective: float = 0.0
    N: np.ndarray = None
    S: np.ndarray = None
    M: np.ndarray = None


class _Sums:
    """What a pass adds up over its blocks.

    ``N`` and ``S`` (with ``stats``) and the second moments ``M`` (with
    ``moments``) are float64 arrays, ``None`` when not asked for; the hard
    inertia and the objective start at 0.0.
    """

    def __init__(self, n_clusters, n_features, *, stats=False, moments=False):
        d = n_features
        self.N = np.zeros(n_clusters) if stats else None
        self.S = np.zeros((n_clusters, d)) if stats else None
        self.M = np.zeros((n_clusters, d, d)) if moments else None
        self.inertia = self.objective = 0.0

    def reduce(self, parts, grad_X=None):
        """Add the blocks' parts in block order; return the ``PassResult``."""
        for part in parts:
            self.inertia += part.inertia
            self.objective += part.objective
            if part.N is not None:
                self.N += part.N
                self.S += part.S
            if part.M is not None:
                self.M += part.M
        return PassResult(self.N, self.S, self.inertia, self.objective, grad_X, self.M)


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

    Dense ``X``: its weighted mean, or the mean of the rows near one another
    where a few far rows pulled the mean away from them (``_bulk_offset``).
    CSR ``X``: the mean of the columns whose mean dominates their spread
    (``|mean| > std``, so mostly stored), zero elsewhere; there uncentred
    distances would cancel, and centring adds few stored entries. Centring
    elsewhere would make the rows dense.
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
        mean = (matmul(sample_weight, X) / sample_weight.sum()).astype(X.dtype)
        if not np.isfinite(mean).all():
            return mean
        bulk = _bulk_offset(X, sample_weight, mean)
        return mean if bulk is None else bulk


# ``_bulk_offset``: the middle 80% of the weight within this relative spread
# of squared distances from the mean lies on a thin shell around it; rows
# beyond ``_FAR_ROWS`` times the median squared distance are left out of the
# bulk's mean, which replaces the mean where the median row is ``_NEARER``
# times nearer to it (in squared distance).
_THIN_SHELL = 0.05
_FAR_ROWS = 4.0
_NEARER = 1e-4


def _bulk_offset(X, sample_weight, mean):
    """Return the mean of the rows near one another where it should centre ``X``.

    A pass's distance ``||x - o||^2 + (||mu - o||^2 - 2 (x - o) . (mu -
    o))`` rounds at a few ulps of the squared norms from the offset ``o``.
    A few rows far from all the others (an outlier at 1e5 among rows of
    size 1) pull the mean to a distance ``L`` from every other row: those
    lie on a thin shell around it, and their distances round at ``eps L^2``,
    in float32 more than the distances between them, so that Lloyd and the
    annealing move by rounding noise and never settle. There the mean of
    the rows on the shell (the far rows left out) is the offset: the far
    rows' own distances round as they did, the others' at their own scale.
    Other data keep their mean (the bulk's mean is kept only where the
    median row is ``_NEARER`` times nearer to it); the test costs a pass
    of squared norms and a selection of their quantiles (a sort where the
    weights differ), and where the shell is thin
    (the 10% and 90% quantiles within ``_THIN_SHELL`` of the median) one
    more weighted mean and pass. Returns None where ``mean`` stays.
    """
    w = sample_weight.astype(np.float64)
    t = squared_norms(X, mean).astype(np.float64)
    low, mid, high = _weighted_quantiles(t, w, (0.1, 0.5, 0.9))
    if not (mid > 0 and high - low <= _THIN_SHELL * mid):
        return None
    near = np.where(t <= _FAR_ROWS * mid, w, 0.0)
    bulk = (matmul(near, X) / near.sum()).astype(X.dtype)
    t_bulk = squared_norms(X, bulk).astype(np.float64)
    if _weighted_quantiles(t_bulk, w, (0.5,))[0] > _NEARER * mid:
        return None
    return bulk


def _weighted_quantiles(values, weights, qs):
    """Quantiles ``qs`` of ``values`` under ``weights`` (the inverted CDF).

    The smallest value whose cumulative weight reaches ``q`` of the total:
    rows with integer weights give the quantiles of the rows repeated.
    Equal weights need no sort: the values of ranks ``ceil(q n) - 1``.
    """
    if weights.min() == weights.max():
        ranks = np.maximum(np.ceil(np.asarray(qs) * values.size).astype(np.intp) - 1, 0)
        return np.partition(values, ranks)[ranks]
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    at = np.searchsorted(cumulative, np.asarray(qs) * cumulative[-1], side="left")
    return values[order[np.minimum(at, values.size - 1)]]


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
    augmented=None,
):
    """Return the E-step's sums ``N``, ``S`` and the hard inertia, in one pass.

    ``prior`` (softmax only) gives mass-constrained responsibilities;
    ``inertia=False`` skips the inertia (reported as 0.0). ``route="auto"``
    takes ``statistics_route``'s route, ``"general"`` the general one.
    ``augmented(dtype)`` (None: none) returns dense ``X`` centred, with a
    column of ones, made once for passes that repeat (or None): the
    scaled-softmax route reads its blocks instead of making each again.
    Returns a ``PassResult``.
    """
    if route == "auto":
        route = statistics_route(activation, prior=prior, inertia=inertia)
    dtype, n_clusters = centers.dtype, centers.shape[0]
    T, inv_T = temperature(sigma, dtype)
    log_prior, _, bias = _prior_terms(prior, n_clusters, T, dtype)
    plan = BlockPlan(X, centers, offset, activation)
    sums = _Sums(n_clusters, X.shape[1], stats=True)
    if route == "scaled-softmax":
        rows = None if augmented is None else augmented(dtype)
        block = _scaled_softmax_block(
            plan, sample_weight, x_sq, T, log_prior, inertia, rows
        )
        # None where scaled scores could overflow: the general route then.
        if block is not None:
            return sums.reduce(plan.map(block, distances=False))
    # Entmax-1.5's candidates have d_ij - d_min < 2 T; beyond the dtype's
    # range the window holds every centre.
    window = 2.0 * T
    hard = route == "one-hot-blocks" and window < float(np.finfo(dtype).max)

    def block(sl, Xb, E, closest, e_closest, buf):
        wb = sample_weight[sl]
        block_inertia = _hard_inertia(wb, x_sq[sl], e_closest) if inertia else 0.0
        # Blocks whose rows are all one-hot skip the threshold search.
        sums_b = hard_stats(Xb, wb, E, closest, e_closest, window) if hard else None
        if sums_b is None:
            R = block_responsibilities(
                E, closest, e_closest, activation, inv_T, buf, bias
            )
            sums_b = _block_sums(Xb, wb, R)
        return _Part(block_inertia, 0.0, *sums_b)

    return sums.reduce(plan.map(block))


def _scaled_softmax_block(plan, sample_weight, x_sq, T, log_prior, inertia, rows):
    """Return the block function of the "scaled-softmax" route, or None.

    ``rows`` (None: made block by block) are the ``augmented_block`` rows
    of every block at once.

    None where the scaled scores could overflow (``sigma`` near 1e-300 of
    the data's scale: ``ScaledCenters.usable``). Dense rows carry a column
    of ones: the bias comes with the scores' GEMM and ``N`` with ``S``'s
    product (its last column). Without a prior the largest score is ``-min_j
    e_ij / T``, which gives the hard inertia. The sums: ``softmax_stats``.
    """
    X, offset = plan.X, plan.offset
    x_sq_max = float(x_sq.max()) if X.shape[0] else 0.0
    scaled = ScaledCenters(plan.prepared, T, log_prior, x_sq_max)
    if not scaled.usable:
        return None
    sparse = sp.issparse(X)

    def block(sl, buf):
        if sparse:
            Xb = centred_block(X, sl, offset, buf)
        elif rows is not None:
            Xb = rows[sl]
        else:
            Xb = augmented_block(X, sl, offset, buf)
        wb = sample_weight[sl]
        Z, z_max = scaled_scores(Xb, scaled, buf)
        block_inertia = 0.0
        if inertia:
            block_inertia = float(matmul(wb, np.maximum(x_sq[sl] - T * z_max, 0.0)))
        return _Part(block_inertia, 0.0, *softmax_stats(Xb, wb, Z, z_max, scaled, buf))

    return block


def free_energy(
    X, sample_weight, centers, sigma, activation, offset, x_sq, *, prior=None
):
    """Return the free energy (``PassResult.objective``) and the hard inertia.

    ``free_energy_moments`` adds the statistics and second moments.
    """
    plan, block = _energy_plan(
        X, sample_weight, centers, sigma, activation, offset, x_sq, prior, False
    )
    return _Sums(centers.shape[0], X.shape[1]).reduce(plan.map(block))


def free_energy_moments(
    X, sample_weight, centers, sigma, activation, offset, x_sq, *, prior=None
):
    """Free energy, hard inertia, ``N``, ``S`` and second moments in one pass.

    What the annealing's split decision needs at one width; a
    ``PassResult``.
    """
    plan, block = _energy_plan(
        X, sample_weight, centers, sigma, activation, offset, x_sq, prior, True
    )
    sums = _Sums(centers.shape[0], X.shape[1], stats=True, moments=True)
    return sums.reduce(plan.map(block))


def _energy_plan(
    X, sample_weight, centers, sigma, activation, offset, x_sq, prior, moments
):
    """Return the ``BlockPlan`` and block function of ``free_energy``.

    With ``moments``, of ``free_energy_moments``. The block function gives
    a block's hard inertia and free energy, and with ``moments`` its
    statistics and second moments. Softmax takes the energy from the gaps
    alone, and the responsibilities, where asked, from the energy's own
    ``expm1`` (no second ``exp``).
    """
    dtype, n_clusters = centers.dtype, centers.shape[0]
    T, inv_T = temperature(sigma, dtype)
    _, weights, bias = _prior_terms(prior, n_clusters, T, dtype)

    # Beyond this gap from a row's nearest centre a softmax score weighs
    # nothing: ``far_cut`` below the row's largest, whatever the prior.
    near_gap = _near_gap(weights, n_clusters, T)

    def block(sl, Xb, E, closest, e_closest, buf):
        wb, b = sample_weight[sl], E.shape[0]
        d_min, D, d_mean = _gaps(x_sq[sl], E, e_closest, weights, buf)
        if activation == "softmax":
            near = np.less_equal(D, near_gap, out=buf.near[:b])
            if np.count_nonzero(near) <= _SPARSE_ENERGY_DENSITY * near.size:
                gathered = _Near(near, D, inv_T, weights, wb)
                energy = _energy(wb, gathered.energy(d_min, T), d_min, d_mean)
                if not moments:
                    return _Part(float(matmul(wb, d_min)), energy)
                return _Part(float(matmul(wb, d_min)), energy, *gathered.sums(Xb))
            F, Q = _softmax_energy(D, d_min, T, inv_T, weights, buf.scratch[:b])
            if moments:
                # The objective's expm1 already holds exp(-D / T) - 1: the
                # responsibilities p_j exp(-D_ij / T) / sum follow without a
                # second exp (entries below half an ulp of the row's largest
                # become 0, which the sums do not see).
                R = np.add(Q, 1.0, out=E)
                R *= weights
                R /= matmul(R, buf.ones)[:, None]
        else:
            R = block_responsibilities(
                E, closest, e_closest, activation, inv_T, buf, bias
            )
            F = _entmax_energy(R, D, d_min, T, buf.workspace.W[:b], buf.ones)
        inertia, energy = float(matmul(wb, d_min)), _energy(wb, F, d_min, d_mean)
        if not moments:
            return _Part(inertia, energy)
        M = _block_moments(Xb, wb, R)
        return _Part(inertia, energy, *_block_sums(Xb, wb, R), M)

    return BlockPlan(X, centers, offset, activation, SWEEP_BLOCK_BYTES), block


# Up to this fraction of near scores, a softmax block of the free energy
# takes the gathered route (``_Near``).
_SPARSE_ENERGY_DENSITY = 0.25


def _near_gap(weights, n_clusters, T):
    """Return the gap ``D = d - d_min`` beyond which a score is far (``_Near``).

    The row's largest weight is at least its nearest centre's, ``p_c``; a
    score ``D_ij > (cut + log(p_max / p_min)) T`` weighs ``p_j exp(-D_ij /
    T) < p_min exp(-cut) <= p_c exp(-cut)``. A zero weight (a group of no
    mass) could be a row's nearest: then no gap is safe, and the gap is
    ``inf`` (every score near: the general route), as it is where it would
    leave the dtype's range.
    """
    if not weights.min() > 0:
        return np.inf
    spread = float(np.log(weights.max() / weights.min()))
    gap = (far_cut(n_clusters, weights.dtype) + spread) * T
    return gap if gap < float(np.finfo(weights.dtype).max) else np.inf


class _Near:
    """A softmax block's near scores, gathered: its free energy and sums.

    At low temperature most of a row's scores are *far*: beyond
    ``_near_gap`` from its nearest centre, so that together they weigh
    less than half an ulp of the row's sum. The general route
    exponentiates every score; here only the near ones are, as triplets
    ``(row, centre, value)`` in row-major order, and the sums are sparse
    products. Per row, with ``s = sum_near p_j exp(-D_j / T)`` (the far
    terms are below its rounding), the free energy is ``d_min - T log s``,
    to within ``T eps`` (the general route's ``log1p`` is exact to a few
    ulps of ``T (1 - s)``, which matters where every score is near, at high
    temperature: that route runs there), and the responsibilities are ``p_j
    exp(-D_j / T) / s``, far ones exactly 0.
    """

    def __init__(self, near, D, inv_T, weights, wb):
        b, k = D.shape
        idx, self.rows, self.cols, self.indptr = near_triplets(near)
        scores = np.asarray(D.ravel()[idx] * -inv_T, dtype=np.float64)
        with np.errstate(under="ignore"):
            self.P = np.asarray(weights, dtype=np.float64)[self.cols] * np.exp(scores)
        self.s = np.bincount(self.rows, weights=self.P, minlength=b)
        self.b, self.k, self.wb = b, k, wb

    def energy(self, d_min, T):
        """Per-row free energy ``d_min - T log sum_j p_j exp(-D_j / T)``."""
        return d_min - T * np.log(self.s)

    def sums(self, Xb):
        """``N``, ``S`` and the second moments of the block's responsibilities."""
        rows, cols, indptr, b, k = self.rows, self.cols, self.indptr, self.b, self.k
        wr = np.asarray(self.wb, dtype=np.float64)[rows] * (self.P / self.s[rows])
        N = np.bincount(cols, weights=wr, minlength=k)
        S = sp.csc_array((wr, cols, indptr), shape=(k, b)) @ Xb
        S = S.toarray() if sp.issparse(S) else np.asarray(S, dtype=np.float64)
        M = np.zeros((k, Xb.shape[1], Xb.shape[1]))
        sparse_moments(M, Xb, rows, cols, wr, indptr)
        return N, S, M


def responsibilities(X, centers, sigma, activation, offset, x_sq, out):
    """Write the responsibilities of every row into ``out``; returns ``out``.

    ``x_sq`` is not used: the row constant ``||x_i||^2`` cancels in both
    maps.
    """
    _, inv_T = temperature(sigma, centers.dtype)

    def block(sl, Xb, E, closest, e_closest, buf):
        out[sl] = block_responsibilities(E, closest, e_closest, activation, inv_T, buf)

    BlockPlan(X, centers, offset, activation, SWEEP_BLOCK_BYTES).map(block)
    return out


def gradients(X, sample_weight, centers, sigma, activation, offset, x_sq):
    """Free energy, hard inertia, ``N``, ``S`` and ``dF/dX`` in one pass.

    Returns a ``PassResult``; ``grad_X`` is in the dtype of ``centers``.
    """
    dtype, n_clusters = centers.dtype, centers.shape[0]
    T, inv_T = temperature(sigma, dtype)
    _, weights, _ = _prior_terms(None, n_clusters, T, dtype)
    plan = BlockPlan(X, centers, offset, activation, SWEEP_BLOCK_BYTES)
    grad_X = np.empty(X.shape, dtype=dtype)

    def block(sl, Xb, E, closest, e_closest, buf):
        wb, b = sample_weight[sl], E.shape[0]
        d_min, D, d_mean = _gaps(x_sq[sl], E, e_closest, weights, buf)
        R = block_responsibilities(E, closest, e_closest, activation, inv_T, buf)
        if activation == "softmax":
            F, _ = _softmax_energy(D, d_min, T, inv_T, weights, buf.scratch[:b])
        else:
            F = _entmax_energy(R, D, d_min, T, buf.workspace.W[:b], buf.ones)
        energy = _energy(wb, F, d_min, d_mean)
        _gradient_rows(grad_X[sl], Xb, wb, R, plan.prepared.C)
        return _Part(float(matmul(wb, d_min)), energy, *_block_sums(Xb, wb, R))

    sums = _Sums(n_clusters, X.shape[1], stats=True)
    return sums.reduce(plan.map(block), grad_X)


def moments(X, sample_weight, centers, sigma, activation, offset, x_sq):
    """``N``, ``S``, the hard inertia and the second moments (``PassResult``)."""
    _, inv_T = temperature(sigma, centers.dtype)

    def block(sl, Xb, E, closest, e_closest, buf):
        wb = sample_weight[sl]
        block_inertia = _hard_inertia(wb, x_sq[sl], e_closest)
        R = block_responsibilities(E, closest, e_closest, activation, inv_T, buf)
        M = _block_moments(Xb, wb, R)
        return _Part(block_inertia, 0.0, *_block_sums(Xb, wb, R), M)

    plan = BlockPlan(X, centers, offset, activation, SWEEP_BLOCK_BYTES)
    sums = _Sums(centers.shape[0], X.shape[1], stats=True, moments=True)
    return sums.reduce(plan.map(block))


def labels_inertia(X, sample_weight, centers, offset, x_sq=None, *, explicit=False):
    """Nearest centre (int32) and the weighted hard inertia, block by block.

    ``fit`` and ``predict`` both call this on the same arrays, so ``labels_``
    equals ``predict(X)`` bit for bit. The inertia is the pass's (from the
    partial distances, as the searches compare it), or with ``explicit``
    the inertia a fit reports: ``explicit_inertia`` of the labels.
    """
    if x_sq is None and not explicit:
        x_sq = squared_norms(X, offset)
    labels = np.empty(X.shape[0], dtype=np.int32)

    def block(sl, Xb, E, closest, e_closest, buf):
        labels[sl] = closest
        if not explicit:
            return _Part(_hard_inertia(sample_weight[sl], x_sq[sl], e_closest))

    parts = BlockPlan(X, centers, offset).map(block)
    if explicit:
        return labels, explicit_inertia(X, sample_weight, centers, labels)
    return labels, _Sums(centers.shape[0], X.shape[1]).reduce(parts).inertia


def explicit_inertia(X, sample_weight, centers, labels):
    """Weighted squared distance of every row to its labelled centre, by differences.

    The passes take a distance as ``||x - o||^2 + (||mu - o||^2 - 2 (x - o)
    . (mu - o))`` (``o`` the offset), whose rounding is a few ulps of the
    squared norms: where some rows lie far from the others (a far outlier
    pulls the mean, and the offset, away from the bulk) the bulk's distances
    keep no correct digit. Here each is ``sum_j (x_j - mu_j)^2`` in float64,
    within a few ulps of the distance itself, as KMeans reports its inertia:
    what a fit says in ``inertia_`` and ``score`` returns. Dense rows in
    blocks of 1 MiB; CSR rows by their stored entries, the others adding
    ``mu_j^2``.
    """
    w = sample_weight.astype(np.float64)
    C = centers.astype(np.float64)
    n_samples, n_features = X.shape
    if sp.issparse(X):
        return _explicit_inertia_csr(sp.csr_array(X), w, C, labels)
    step = block_rows(n_samples, n_features * 8, _NORMS_BLOCK_BYTES)
    buf = pooled_empty("explicit_inertia", (step, n_features), np.float64)
    total = 0.0
    for sl in row_blocks(n_samples, step):
        diff = np.subtract(X[sl], C[labels[sl]], out=buf[: sl.stop - sl.start])
        total += float(matmul(w[sl], np.einsum("ij,ij->i", diff, diff)))
    return total


def _explicit_inertia_csr(X, w, C, labels):
    """``explicit_inertia`` of CSR rows, in blocks of about 1 MiB of entries.

    ``||x - mu||^2 = sum over stored j of ((x_j - mu_j)^2 - mu_j^2) +
    ||mu||^2``: the stored entries by differences, the others by the
    centre's coordinates.
    """
    n_samples = X.shape[0]
    per_row = max(X.nnz // max(n_samples, 1), 1)
    step = block_rows(n_samples, per_row * 8, _NORMS_BLOCK_BYTES)
    mu_sq = np.einsum("ij,ij->i", C, C)
    total = 0.0
    for sl in row_blocks(n_samples, step):
        Xb = X[sl]
        rows = np.repeat(np.arange(Xb.shape[0]), np.diff(Xb.indptr))
        mu = C[labels[sl][rows], Xb.indices]
        stored = (Xb.data.astype(np.float64) - mu) ** 2 - mu**2
        # float64 even for a block without stored entries (bincount of no
        # values counts, in integers).
        d = np.bincount(rows, weights=stored, minlength=Xb.shape[0]).astype(np.float64)
        d += mu_sq[labels[sl]]
        total += float(matmul(w[sl], np.maximum(d, 0.0)))
    return total


def inertia_rounding(weighted_norms, n_features, dtype):
    """Return a bound on the rounding of a pass's hard inertia.

    A pass's distance ``||x||^2 + (||mu||^2 - 2 x . mu)`` (centred) is
    computed in ``dtype`` with a product of ``n_features`` terms: its error
    is at most about ``(n_features + 2) eps (||x||^2 + ||mu||^2)`` (``2 |x .
    mu| <= ||x||^2 + ||mu||^2``). ``weighted_norms`` is that sum weighted
    over the rows, ``sum_i w_i (||x_i||^2 + ||mu_(i)||^2)``, with each row's
    own centre or a larger one.
    """
    return (n_features + 2) * float(np.finfo(dtype).eps) * weighted_norms


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

    def block(sl, Xb, E, closest, e_closest, buf):
        labels[sl] = closest
        nearest[sl] = e_closest
        if n_clusters > 1:
            margins[sl] = runner_up(E, closest)[1] - e_closest

    BlockPlan(X, centers, offset).map(block)
    return labels, margins, nearest


def m_step(N, S, centers, offset):
    """Return the centres ``S_j / N_j + offset``; one with no mass stays put."""
    new = centers.copy()
    alive = N > 0
    # The means of tiny data underflow: their values at working precision.
    with np.errstate(under="ignore"):
        new[alive] = S[alive] / N[alive, None] + offset
    return new


def _hard_inertia(wb, x_sq_b, e_closest):
    """Return a block's weighted distance to its nearest centres (``e_closest``)."""
    return float(matmul(wb, np.maximum(x_sq_b + e_closest, 0.0)))


def _gaps(x_sq_b, E, e_closest, weights, buf):
    """Return a block's nearest distances, gaps ``D = d - d_min`` and mean distances.

    ``D`` (in ``buf.D``) is kept for the objective and its bounds; the mean
    distance is under ``weights`` (the prior's, uniform without one).
    """
    d_min = np.maximum(x_sq_b + e_closest, 0.0)
    D = np.subtract(E, e_closest[:, None], out=buf.D[: E.shape[0]])
    np.maximum(D, 0.0, out=D)
    return d_min, D, d_min + matmul(D, weights)


def _energy(wb, F, d_min, d_mean):
    """Return a block's weighted free energy from its per-row values ``F``.

    Beyond the bounds only by rounding: the exact value lies between them.
    """
    return float(matmul(wb, np.clip(F, d_min, d_mean)))


def _block_sums(Xb, wb, R):
    """``N = w R`` and ``S = R^T (w Xb)`` of a block; ``Xb`` (or ``R``) is scratch."""
    N = matmul(wb, R)
    if sp.issparse(Xb):
        R *= wb[:, None]
        return N, (Xb.T @ R).T
    Xb *= wb[:, None]
    return N, matmul(R.T, Xb)


def _block_moments(Xb, wb, R):
    """Return a block's second moments ``sum_i w_i r_ij x_i x_i^T`` (float64)."""
    d = Xb.shape[1]
    M = np.zeros((R.shape[1], d, d))
    accumulate_moments(M, Xb, wb, R)
    return M


def _gradient_rows(G, Xb, wb, R, C):
    """``dF/dx_i = 2 w_i (x_i - sum_j r_ij mu_j)`` into ``G``, centred coordinates."""
    G[...] = Xb.toarray() if sp.issparse(Xb) else Xb
    G -= matmul(R, C)
    G *= 2.0 * wb[:, None]


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
        gap = 2.0 * c * matmul(W2, ones)
        W2 *= W
        gap += (4.0 / 3.0) * matmul(W2, ones)
        gap[R.max(axis=1) == 1.0] = (4.0 / 3.0) * (1.0 - c)
        return d_min + np.einsum("ij,ij->i", R, D) + T * gap
