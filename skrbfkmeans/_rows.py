"""The data of a fit, in blocks, and the iterations written once against it.

A *rows* object holds the data in the engine's working units (see
``_scaling``) with its weights and centring offset, and offers the passes the
algorithms need; each pass visits every row block once:

``stats(centers, sigma, activation)``
    ``(N, S, inertia)``: the sufficient statistics at width ``sigma`` (``S``
    in coordinates centred on ``offset``) and the hard inertia.
``margin_checks(centers)``
    The smallest margin ``d_(2) - d_(1)`` over the rows of positive weight,
    from the engine's distances, and the certificate's independent check
    (``_certificate``): ``(margin, fixed, stable)``, or None where the
    engine's margin already refuses.
``final(centers, sigma, activation)``
    ``(label counts, inertia, objective)`` of the final centres.
``labels(centers)``
    The nearest centre of every row (a lazy array for dask rows).

and the operations a fit runs on them, whatever they are:

``kmeans(centers, activation, max_iter, tol, verbose)``
    KMeans's run (its stopping rules and relocations), ``sigma=0``.
``lloyd(centers, max_iter)``
    Lloyd's algorithm until the labels are stable.
``single_moves(centers, max_iter)``
    Single-sample moves until none lowers the distortion (``_hartigan``).
``init_sample(n_clusters, random_state, tol, kmeans_rule)``
    The rows the initialisation uses, and the tolerance scaled to the data.
``annealing_sample(n_clusters, init, random_state)``
    The rows in memory the annealing runs on, and ``init`` in their units.

``MemoryRows`` (below) runs them on arrays in memory; ``_dask.DaskRows`` on
dask chunks, one ``compute`` per pass. Fixed-width EM, Lloyd's algorithm by EM
and the certificate (``_iterations``) are written once, against either.
"""

import numpy as np

from . import _hartigan, _lloyd
from ._certificate import explicit_fixed_point
from ._engine.passes import (
    column_mean_variance,
    free_energy,
    labels_inertia,
    labels_margins,
    squared_norms,
    statistics,
)
from ._scaling import Units, fit_units


class MemoryRows:
    """Rows in memory: ``X`` (dense or CSR), weights, offset, squared norms.

    ``units`` are the working units ``X`` is in (``_scaling.Units``).
    """

    def __init__(self, X, sample_weight, offset, x_sq=None, units=Units()):
        self.X = X
        self.w = sample_weight
        self.offset = offset
        self.x_sq = squared_norms(X, offset) if x_sq is None else x_sq
        self.units = units
        # The labels of the last ``final`` pass: the fit asks for them next.
        self._last = (None, None)
        self._centred = None

    def centred(self):
        """``X - offset`` as one dense array, made once (for small data)."""
        if self._centred is None:
            self._centred = np.asarray(self.X - self.offset, dtype=self.X.dtype)
        return self._centred

    def stats(self, centers, sigma, activation):
        """``(N, S, inertia)`` of one pass at width ``sigma``."""
        res = statistics(
            self.X, self.w, centers, sigma, activation, self.offset, self.x_sq
        )
        return res.N, res.S, res.inertia

    def margin_checks(self, centers):
        """Return the engine's smallest margin and the explicit check."""
        labels, margins, _ = labels_margins(self.X, centers, self.offset)
        # Rows of weight 0 do not enter the fixed point: they cannot break it.
        margin = float(margins[self.w > 0].min())
        if not margin > 0 or not np.isfinite(margin):
            return margin, None
        # The engine's labels only order the explicit check's work.
        return margin, explicit_fixed_point(self.X, self.w, centers, labels)

    def labels(self, centers):
        """Nearest centre of every row (int32)."""
        if self._last[0] is centers:
            return self._last[1]
        return labels_inertia(self.X, self.w, centers, self.offset, self.x_sq)[0]

    def final(self, centers, sigma, activation):
        """``(label counts, inertia, objective)`` of the centres."""
        labels, inertia = labels_inertia(
            self.X, self.w, centers, self.offset, self.x_sq
        )
        self._last = (centers, labels)
        objective = free_energy(
            self.X, self.w, centers, sigma, activation, self.offset, self.x_sq
        ).objective
        return np.bincount(labels, minlength=centers.shape[0]), inertia, objective

    def kmeans(self, centers, activation, max_iter, tol, verbose=0):
        """KMeans's run from ``centers`` (``_lloyd.kmeans_lloyd``).

        ``activation`` is not used (dask rows run EM at width 0 with it).
        Returns the centres, the iterations and True: as KMeans, a run that
        ``max_iter`` stopped is not reported as unconverged.
        """
        centers, n_iter, _ = _lloyd.kmeans_lloyd(self, centers, max_iter, tol, verbose)
        return centers, n_iter, True

    def lloyd(self, centers, max_iter):
        """Lloyd until the labels are stable (``_lloyd.lloyd``, incremental)."""
        return _lloyd.lloyd(self, centers, max_iter)

    def single_moves(self, centers, max_iter):
        """Centres after single-sample moves until none gains (``_hartigan``)."""
        return _hartigan.hartigan(
            self.X, self.w, centers, self.offset, self.x_sq, max_iter=max_iter
        )[0]

    def init_sample(self, n_clusters, random_state, tol, kmeans_rule=False):
        """Rows for the initialisation (all of them) and the scaled tolerance.

        ``tol`` times the mean feature variance, weighted, or unweighted
        with ``kmeans_rule`` (KMeans's own rule, for ``sigma=0``).
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
        rows. ``random_state`` is not used (the sample depends on the data
        only).
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


def memory_rows(X, sample_weight, init):
    """Rows in memory in the working units of a fit, and ``init`` in them.

    ``init`` is an array, a callable or a name (``_scaling.fit_units``).
    """
    X, offset, init, units = fit_units(X, sample_weight, init)
    return MemoryRows(X, sample_weight, offset, units=units), init


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
