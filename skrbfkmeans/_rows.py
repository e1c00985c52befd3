"""The data of a fit, in blocks, and the iterations written once against it.

A *rows* object holds the data in the engine's working units (see
``_scaling``) with its weights and centring offset, and offers the passes the
algorithms need; each pass visits every row block once:

``stats(centers, sigma, activation)``
    ``(N, S, inertia)``: the sufficient statistics at width ``sigma`` (``S``
    in coordinates centred on ``offset``) and the hard inertia.
``min_margin(centers)``
    The smallest margin ``d_(2) - d_(1)`` over the rows of positive weight,
    from the engine's distances.
``explicit_check(centers)``
    The certificate's independent check (``_certificate``).
``final(centers, sigma, activation)``
    ``(label counts, inertia, objective)`` of the final centres.
``labels(centers)``
    The nearest centre of every row (a lazy array for dask rows).

``MemoryRows`` (below) runs them on arrays in memory; ``_dask.DaskRows`` on
dask chunks, one ``compute`` per pass. Fixed-width EM, Lloyd's algorithm and
the certificate are written once, against either.
"""

import numpy as np

from ._certificate import explicit_fixed_point
from ._engine.passes import (
    free_energy,
    labels_inertia,
    labels_margins,
    m_step,
    squared_norms,
    statistics,
)


class MemoryRows:
    """Rows in memory: ``X`` (dense or CSR), weights, offset, squared norms."""

    def __init__(self, X, sample_weight, offset, x_sq=None):
        self.X = X
        self.w = sample_weight
        self.offset = offset
        self.x_sq = squared_norms(X, offset) if x_sq is None else x_sq
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

    def min_margin(self, centers):
        """Smallest engine margin over the rows of positive weight."""
        _, margins, _ = labels_margins(self.X, centers, self.offset)
        # Rows of weight 0 do not enter the fixed point: they cannot break it.
        return float(margins[self.w > 0].min())

    def explicit_check(self, centers):
        """``(margin, fixed, stable)`` of ``_certificate.explicit_fixed_point``."""
        return explicit_fixed_point(self.X, self.w, centers)

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


def em_fixed_sigma(rows, centers_init, sigma, activation, *, max_iter, tol, verbose=0):
    """EM at a fixed width from ``centers_init`` over ``rows``.

    Stops when the summed squared centre shift is at most ``tol`` (already
    scaled to the data, as KMeans does) or after ``max_iter`` iterations.
    Cost: one ``rows.stats`` pass per iteration.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The final centres.
    n_iter : int
        Number of E/M iterations run.
    converged : bool
        Whether the shift criterion was met.
    """
    centers = np.array(centers_init, dtype=centers_init.dtype, copy=True)
    converged = False
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        N, S, inertia = rows.stats(centers, sigma, activation)
        new = m_step(N, S, centers, rows.offset)
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if verbose:
            print(
                f"Iteration {n_iter - 1}, inertia {inertia:.6g}, "
                f"center shift {shift:.3e}."
            )
        if shift <= tol:
            converged = True
            if verbose:
                print(
                    f"Converged at iteration {n_iter - 1}: center shift "
                    f"{shift:.3e} within tolerance {tol:.3e}."
                )
            break
    return centers, n_iter, converged


def lloyd(rows, centers, max_iter):
    """Lloyd iterations until no label changes (or ``max_iter``).

    Entmax-1.5 at a vanishing width is exactly one-hot, so its EM is Lloyd's;
    with ``tol=0`` it stops when no centre moves, i.e. when the labels no
    longer change. Returns the centres, the number of iterations and whether
    the labels became stable.
    """
    return em_fixed_sigma(rows, centers, 0.0, "entmax15", max_iter=max_iter, tol=0.0)


def certify(rows, centers, sigma_max):
    """Largest certified width (at most ``sigma_max``) and whether it holds.

    The centres are certified when every margin is positive, the explicit
    check of ``_certificate`` agrees (margins from explicit differences, each
    centre its cluster's mean), and a Lloyd step (entmax-1.5 at the certified
    width, exactly one-hot) leaves them equal to themselves to rounding. The
    width is shrunk by a few ulps of the margin so that the one-hot test
    holds after the rounding of ``1 / T``.
    """
    min_margin = rows.min_margin(centers)
    eps = np.finfo(centers.dtype).eps
    if not min_margin > 0 or not np.isfinite(min_margin):
        return sigma_max, min_margin == np.inf
    # The engine's margins share the GEMM's rounding: the width must also
    # pass the margins of explicit differences, and the centres their means.
    explicit_margin, fixed, stable = rows.explicit_check(centers)
    if not (explicit_margin > 0 and fixed and stable):
        return sigma_max, False
    min_margin = min(min_margin, explicit_margin)
    sigma = min(sigma_max, 0.5 * np.sqrt(min_margin * (1.0 - 16.0 * eps)))
    N, S, _ = rows.stats(centers, sigma, "entmax15")
    new = m_step(N, S, centers, rows.offset)
    offset = rows.offset
    # Rounding relative to the data's own magnitude (never an absolute 1:
    # tiny data would pass any test).
    scale = float(np.abs(centers - offset).max()) + float(np.abs(offset).max())
    ok = np.allclose(new, centers, rtol=64 * eps, atol=64 * eps * scale)
    return sigma, bool(ok)


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
