"""The data of a fit: a frozen record of the rows, with their passes and sampling.

A *rows* record holds the data in the engine's working units (see
``_scaling``): ``X``, the weights ``w``, the centring ``offset``, the squared
norms ``x_sq`` about it (None on dask) and the ``units``; ``in_memory`` says
where the rows live. Every algorithm of the fit (``_anneal``, ``_lloyd``,
``_hartigan``, ``_polish``, ``_iterations``, ``_finish``) takes the record.
Its class keeps only what depends on where the data lives, the passes (each
visits every row block once) and the sampling:

``stats(centers, sigma, activation)``
    A ``PassResult`` with ``N``, ``S`` (the sufficient statistics at width
    ``sigma``, ``S`` in coordinates centred on ``offset``) and the hard
    inertia; in memory the engine's ``statistics`` bound to the arrays.
``final(centers, sigma, activation)``
    ``(label counts, inertia, objective)`` of the final centres.
``labels(centers)``, ``labels_inertia(centers)``
    The nearest centre of every row (a lazy array for dask rows); the label
    counts and the inertia.
``init_sample(n_clusters, random_state, tol, kmeans_rule)``
    The rows the initialisation uses, and the tolerance scaled to the data.
``annealing_sample(n_clusters, init, random_state)``
    The rows in memory the annealing runs on, and ``init`` in their units.

``MemoryRows`` (below) holds arrays in memory; ``_dask.DaskRows`` dask
chunks, one ``compute`` per pass. ``fit_rows`` makes the record of a fit in
memory, ``NewRows`` (and ``_dask.NewDaskRows``) the rows a fitted model
predicts on.
"""

from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.utils import check_array
from sklearn.utils.extmath import row_norms

from ._engine.assign import nearest
from ._engine.blas import matmul
from ._engine.blocks import augmented_rows, centred_rows
from ._engine.passes import (
    column_mean_variance,
    data_offset,
    explicit_inertia,
    free_energy,
    inertia_rounding,
    labels_inertia,
    responsibilities,
    squared_norms,
    statistics,
)
from ._scaling import (
    Units,
    centred_magnitude,
    check_representable,
    safe_scale,
    scaled,
)
from ._validation import check_sample_weight

# The mean is far from the origin beyond 2^10 standard deviations.
_FAR = 2.0**20

# A pass's inertia and free energy are reported (verbose, the annealing's
# path, ``objective_``) as the pass gave them where their rounding is below
# this fraction of the inertia, so that six printed digits are true; else
# with the explicit inertia (``MemoryRows.reported``).
REPORT_RTOL = 1e-7

# Rows in memory keep one augmented copy for the statistics passes up to this
# many bytes (``MemoryRows.augmented``).
AUGMENTED_BYTES = 64 << 20


@dataclass(frozen=True, eq=False)
class MemoryRows:
    """Rows in memory: ``X`` (dense or CSR), weights, offset, squared norms, units.

    A frozen record: its fields are never rebound. ``x_sq`` defaults to
    ``squared_norms(X, offset)``; ``units`` are the working units ``X`` is
    in (``_scaling.Units``).
    """

    X: object
    w: np.ndarray
    offset: np.ndarray
    x_sq: np.ndarray = None
    units: Units = Units()
    # The labels of the last hard pass (the fit asks for them next) and the
    # centred rows of small data, made once.
    _cache: dict = field(default_factory=dict, repr=False)

    in_memory: ClassVar[bool] = True

    def __post_init__(self):
        if self.x_sq is None:
            object.__setattr__(self, "x_sq", squared_norms(self.X, self.offset))
        # The statistics pass of these rows, ``stats(centers, sigma,
        # activation, *, prior=None, inertia=True)``: the engine's, bound to
        # their arrays (a ``PassResult``: ``N``, ``S`` centred on ``offset``,
        # the hard inertia).
        stats = partial(
            statistics, self.X, self.w, offset=self.offset, x_sq=self.x_sq,
            augmented=self.augmented,
        )  # fmt: skip
        object.__setattr__(self, "stats", stats)

    def centred(self):
        """``X - offset`` as one dense array, made once (for small data)."""
        if "centred" not in self._cache:
            centred = np.asarray(self.X - self.offset, dtype=self.X.dtype)
            self._cache["centred"] = centred
        return self._cache["centred"]

    def augmented(self, dtype):
        """Dense ``X - offset`` with a column of ones in ``dtype``, made once.

        The rows of every ``augmented_block`` at once, for the statistics
        passes (the annealing makes hundreds): None for sparse rows, or
        beyond ``AUGMENTED_BYTES``.
        """
        n, d = self.X.shape
        size = n * (d + 1) * np.dtype(dtype).itemsize
        if sp.issparse(self.X) or size > AUGMENTED_BYTES:
            return None
        key = ("augmented", np.dtype(dtype).str)
        if key not in self._cache:
            out = np.empty((n, d + 1), dtype=dtype)
            self._cache[key] = augmented_rows(self.X, self.offset, out)
        return self._cache[key]

    def centred_view(self, dtype):
        """Dense ``X - offset`` in ``dtype`` without a copy of its own, or None.

        The first columns of the augmented copy in ``dtype`` (the centres',
        as the blocks of a pass are centred), where the statistics passes
        have made it (``augmented``): for passes that
        would otherwise centre the same rows block by block, many times (the
        polish's Lloyd steps on a few moved centres, the annealing's
        bounded steps). None where there is no such copy: none is made here,
        so that rows without statistics passes (the finish on every row
        after a sample's annealing) keep their memory.
        """
        augmented = self._cache.get(("augmented", np.dtype(dtype).str))
        return None if augmented is None else augmented[:, :-1]

    def pass_rows(self, dtype, idx=None):
        """Rows ``idx`` (None: all) for a pass at centres of ``dtype``.

        Returns ``(X, centred)``: the centred view's rows (``centred``
        True: the pass takes them as they are) where there is one, else
        ``X``'s (the pass centres each block). The same blocks and centred
        values either way, so the same bits.
        """
        Xc = self.centred_view(dtype)
        X = self.X if Xc is None else Xc
        return (X if idx is None else X[idx]), Xc is not None

    def nearest(self, centers, idx=None, *, second=False):
        """``_engine.assign.nearest`` of rows ``idx`` (None: all; ``pass_rows``)."""
        X, centred = self.pass_rows(centers.dtype, idx)
        return nearest(X, centers, self.offset, second=second, centred=centred)

    def labels(self, centers):
        """Nearest centre of every row (int32)."""
        last = self._cache.get("labels")
        if last is not None and last[0] is centers:
            return last[1]
        return labels_inertia(self.X, self.w, centers, self.offset, self.x_sq)[0]

    def labels_inertia(self, centers):
        """``(label counts, inertia)`` of the centres (the labels' pass).

        The inertia a fit reports: each row's distance to its labelled
        centre by explicit differences (``_engine.passes.explicit_inertia``).
        The labels of the last call at the same ``centers`` are reused.
        """
        last = self._cache.get("labels")
        if last is not None and last[0] is centers:
            labels = last[1]
            inertia = explicit_inertia(self.X, self.w, centers, labels)
        else:
            labels, inertia = labels_inertia(
                self.X, self.w, centers, self.offset, explicit=True
            )
            self._cache["labels"] = (centers, labels)
        return np.bincount(labels, minlength=centers.shape[0]), inertia

    def final(self, centers, sigma, activation):
        """``(label counts, inertia, objective)`` of the centres (two passes)."""
        counts, inertia = self.labels_inertia(centers)
        res = free_energy(
            self.X, self.w, centers, sigma, activation, self.offset, self.x_sq
        )
        return counts, inertia, self.reported(centers, res, inertia)[0]

    def reported(self, centers, res, inertia=None):
        """Return a pass's free energy and hard inertia at ``centers`` as reported.

        ``res`` is the pass's ``PassResult``. Where its inertia's rounding
        (``_engine.passes.inertia_rounding``, with the largest centre) could
        show in six digits, the explicit inertia (``inertia``, or one more
        pass: :meth:`labels_inertia`) replaces it, and the free energy takes
        the same change: every row's nearest distance is a term of its own
        in the row's energy. Such rounding comes from rows far from the
        others (their norms dwarf the bulk's distances), float32 clusters
        much tighter than the data's spread, and inertias near 0. Elsewhere
        the pass's values as they are.
        """
        mo = centers.astype(np.float64) - self.offset
        mu_sq = float(np.max(np.einsum("ij,ij->i", mo, mo), initial=0.0))
        weight, w_x_sq = self.weighted_norms()
        norms = w_x_sq + weight * mu_sq
        rounding = inertia_rounding(norms, self.X.shape[1], centers.dtype)
        if rounding <= REPORT_RTOL * res.inertia:
            return res.objective, res.inertia
        if inertia is None:
            _, inertia = self.labels_inertia(centers)
        return res.objective + (inertia - res.inertia), inertia

    def weighted_norms(self):
        """``(sum w, sum w ||x - offset||^2)`` in float64, made once."""
        if "weighted_norms" not in self._cache:
            w = self.w.astype(np.float64)
            norms = float(w.sum()), float(matmul(w, self.x_sq.astype(np.float64)))
            self._cache["weighted_norms"] = norms
        return self._cache["weighted_norms"]

    def init_sample(self, n_clusters, random_state, tol, kmeans_rule=False):
        """Rows for the initialisation (all of them) and the scaled tolerance.

        ``tol`` times the mean feature variance, weighted, or unweighted
        with ``kmeans_rule`` (KMeans's own rule, for ``sigma=0``).
        ``n_clusters`` and ``random_state`` choose the sample of dask rows.
        """
        weights = np.ones_like(self.w) if kmeans_rule else self.w
        return self.X, self.w, tolerance(self.X, weights, tol)

    def annealing_sample(self, n_clusters, init, random_state):
        """Return the rows the annealing of many rows runs on, and ``init`` in them.

        With ``init="anneal"`` and more rows than ``n_units =
        sample_size(n_samples, n_clusters)``: the rows of
        ``weight_sample`` with their counts as weights, in the same units
        (so ``init`` is returned as it is), unless a few very heavy rows
        leave fewer distinct rows drawn than ``n_clusters``. Otherwise these
        rows. ``random_state`` draws the sample of dask rows only (this
        sample depends on the data only).
        """
        n_units = sample_size(self.w.shape[0], n_clusters)
        if not (isinstance(init, str) and init == "anneal"):
            return self, init
        if n_units >= self.w.shape[0]:
            return self, init
        idx, counts = weight_sample(self.w, n_units)
        if idx.size < n_clusters:
            return self, init
        sample = MemoryRows(
            self.X[idx], counts.astype(self.w.dtype), self.offset, units=self.units
        )
        return sample, init


def fit_rows(X, sample_weight, init):
    """Rows in memory in the working units of a fit, and ``init`` in them.

    ``init`` is an array, a callable or a name (``fit_units``).
    """
    X, offset, init, units = fit_units(X, sample_weight, init)
    return MemoryRows(X, sample_weight, offset, units=units), init


def working_units(X, sample_weight, centers=None):
    """Rows, offset and centres in working units, and the ``Units``.

    Returns ``(rows, offset, centers, units)``: the rows are ``X`` itself
    for ordinary data, the offset is the engine's centring point in working
    units (see ``_engine.data_offset``; zero after a shift) and ``centers``
    may be ``None``. Raises a ``ValueError`` when the distortion of ``X``
    cannot be represented (see ``check_representable``).
    """
    offset = data_offset(X, sample_weight)
    magnitude = centred_magnitude(X, offset)
    if centers is not None:
        magnitude = max(magnitude, centred_magnitude(centers, offset))
    size = float(np.abs(offset).max(initial=0.0))
    eps = float(np.finfo(X.dtype).eps)  # Python floats: no underflow flag
    constant = np.isfinite(size) and magnitude <= 8 * eps * size
    if constant:
        # Every row equal (to the centres too), up to the rounding of their
        # mean: the distortion is 0, and the scale of the values themselves
        # keeps their squares, and k-means++'s, in range.
        units = Units(safe_scale(size, X.dtype))
    else:
        check_representable(X, offset, magnitude, float(sample_weight.sum()))
        mean, var = column_mean_variance(X, sample_weight)
        with np.errstate(over="ignore", under="ignore"):
            far = float(mean @ mean) > _FAR * float(var.sum())
        units = Units(safe_scale(magnitude, X.dtype), offset if far else None)
    if units.shift is not None:
        offset = np.zeros_like(offset)
    centers = None if centers is None else units.to_working_points(centers)
    return working_rows(units, X), scaled(offset, units.scale), centers, units


def fit_units(X, sample_weight, init):
    """``working_units`` of a fit whose ``init`` is an array, a callable or a name.

    Returns ``(rows, offset, init, units)``: an array ``init`` in working
    units (it enters the scale), a callable wrapped so that it sees the
    user's rows and returns centres in working units, a name as it is.
    """
    array = init if isinstance(init, np.ndarray) else None
    X_user = X
    X, offset, array, units = working_units(X, sample_weight, array)
    if array is not None:
        return X, offset, array, units
    if not units.identity and callable(init):
        user_init = init

        def init(X, n_clusters, random_state):
            centers = check_array(
                user_init(X_user, n_clusters, random_state=random_state),
                dtype=X_user.dtype,
            )
            return units.to_working_points(centers)

    return X, offset, init, units


def working_rows(units, X):
    """Return rows ``X`` (dense, CSR or dask) in the working ``units``."""
    if units.shift is not None:
        X = centred_rows(X, units.shift.astype(X.dtype, copy=False))
    return scaled(X, units.scale)


def seeding_rows(X, sample_weight):
    """Return the rows k-means++ seeds from: centred where the mean is far.

    Far from the origin the seeding's distances cancel: there it runs on
    centred rows (one copy, as KMeans makes), elsewhere on ``X`` itself (no
    copy). The seeds are rows of ``X`` either way.
    """
    mean, var = column_mean_variance(X, sample_weight)
    if float(mean @ mean) > float(var.sum()):
        return centred_rows(X, data_offset(X, sample_weight))
    return X


def tolerance(X, sample_weight, tol):
    """``tol`` times the mean feature variance, as KMeans scales it.

    The variance is weighted (KMeans's is not: pass unit weights for its
    rule), so that integer weights stay equivalent to repeated rows down to
    the stopping iteration.
    """
    if tol == 0:
        return 0.0
    _, var = column_mean_variance(X, sample_weight)
    return max(float(np.mean(var)), 0.0) * tol


def sample_size(n_samples, n_clusters):
    """Return the size of the in-memory sample: ``min(n, max(10000, 100 k))``.

    Rows for the initialisation on dask input; rows (dask input with another
    ``init``) or units of weight (``init="anneal"``, NumPy and dask) for the
    annealing of many rows.
    """
    return min(n_samples, max(10_000, 100 * n_clusters))


def weight_sample(sample_weight, n_units):
    """Rows and counts of a stratified sample of ``n_units`` units of weight.

    The total weight ``W`` is cut into ``n_units`` strata of equal weight,
    laid along the rows in their order, and one point is drawn uniformly in
    each stratum (``weight_points``, from a fixed seed: the sample depends
    on the data only); a row is drawn once per point that falls in its
    weight. Rows of weight zero are never drawn; a row heavier than
    ``W / n_units`` is drawn at least that many times. Integer weights and
    rows repeated in place give the same points: ``X`` with weights ``w``
    and ``np.repeat(X, w, axis=0)`` draw the same rows the same number of
    times (the copies of one row drawn separately in the second).

    Returns the drawn row indices (sorted, distinct) and how many points
    fell in each (integers summing to ``n_units``).
    """
    cum = np.cumsum(sample_weight, dtype=np.float64)
    return draw_rows(cum, weight_points(cum[-1], n_units), sample_weight)


def weight_points(total, n_units):
    """Return the points of ``weight_sample``: one uniform draw per stratum."""
    rng = np.random.default_rng(0)
    return (np.arange(n_units) + rng.random(n_units)) * (total / n_units)


def draw_rows(cum, points, sample_weight):
    """Rows whose weight (``cum``: cumulated weights) holds each of ``points``.

    Returns the distinct rows, sorted, and how many points each holds.
    """
    idx = np.searchsorted(cum, points, side="right")
    # Rounding can put a point at the total weight: the last row of
    # positive weight takes it.
    idx = np.minimum(idx, np.flatnonzero(sample_weight > 0)[-1])
    return np.unique(idx, return_counts=True)


class NewRows(NamedTuple):
    """New rows in memory, in a fitted model's working units: prediction's passes.

    ``X`` is validated and in working units; ``offset`` is the fit's,
    in the dtype of ``X``. ``_dask.NewDaskRows`` has the same passes, lazy.
    """

    X: object
    offset: np.ndarray

    def labels(self, centers):
        """Nearest centre of every row (int32)."""
        ones = np.ones(self.X.shape[0], dtype=self.X.dtype)
        return labels_inertia(self.X, ones, centers, self.offset)[0]

    def responsibilities(self, centers, sigma, activation):
        """Responsibilities of the centres at ``sigma`` (n x k, dtype of ``X``)."""
        X, offset = self.X, self.offset
        resp = np.empty((X.shape[0], centers.shape[0]), dtype=X.dtype)
        return responsibilities(
            X, centers, sigma, activation, offset, squared_norms(X, offset), resp
        )

    def distances(self, centers):
        """Euclidean distances to the centres, as ``KMeans.transform`` gives them."""
        X, offset = self.X, self.offset
        if np.any(offset):
            # Centred, as in fit: far from the origin the distances cancel.
            X, centers = centred_rows(X, offset), centers - offset
        return _exact_near_zero(X, centers, euclidean_distances(X, centers))

    def inertia(self, centers, sample_weight):
        """Weighted hard inertia of the rows."""
        sample_weight = check_sample_weight(sample_weight, self.X, fit=False)
        return labels_inertia(
            self.X, sample_weight, centers, self.offset, explicit=True
        )[1]


def _exact_near_zero(X, centers, distances):
    """Recompute by explicit differences the distances below their rounding.

    ``euclidean_distances`` takes ``||x||^2 - 2 x . c + ||c||^2``, whose
    rounding (a few ulps of the squared norms) leaves about ``1e-8`` between
    a sample and a centre at the same place; those few entries are redone
    exactly, so a sample on a centre is at distance 0.
    """
    dtype = distances.dtype
    x_sq = row_norms(X, squared=True).astype(np.float64)
    c_sq = np.einsum("ij,ij->i", centers, centers).astype(np.float64)
    bound = 16 * np.finfo(dtype).eps * (x_sq[:, None] + c_sq[None, :])
    rows, cols = np.nonzero(distances.astype(np.float64) ** 2 <= bound)
    if rows.size:
        Xr = X[rows]
        Xr = Xr.toarray() if sp.issparse(Xr) else Xr
        diff = Xr.astype(np.float64) - centers[cols].astype(np.float64)
        distances[rows, cols] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    return distances
