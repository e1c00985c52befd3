"""The paper's experiment: soft fixed points collapse onto a K-Means solution.

``python -m skrbfkmeans reproduce`` runs it; this module only computes and
returns data (and builds figures on request), the command line prints and
writes.

Data sets (2-D, every seed 0, ``n_samples`` = 300 by default)
-------------------------------------------------------------
- ``blobs``: ``make_blobs(n_samples, centers=3, cluster_std=0.5)`` (the
  README's example), k = 3.
- ``moons``: ``make_moons(n_samples, noise=0.05)``, k = 2.
- ``spiral``: :func:`make_spiral`, three arms of radius 0.1 to 1 turning
  through 3/4 of a revolution, Gaussian noise 0.05, k = 3.
- ``circles``: ``make_circles(n_samples, noise=0.05, factor=0.5)``, k = 2.

Method
------
1. A K-Means fixed point ``mu_KM``: ``KMeans(n_init=10, tol=0,
   random_state=0)`` (Lloyd until the labels stop changing), checked to be a
   fixed point with NumPy (the means of its Voronoi cells are its centres to
   1e-12 of the data scale), then passed once more through the package's own
   one-hot EM step, so that it is a fixed point of the package's arithmetic
   bit for bit (scikit-learn sums in another order: the two differ by an ulp).
2. ``sigma* = sqrt(min_i margin_i / 4)`` with ``margin_i = d_i(2) - d_i(1)``
   at ``mu_KM``: the largest width at which entmax-1.5 is exactly one-hot for
   every sample (doc/theory.rst, "Entmax-1.5 and exact hardness").
3. Widths: ``n_widths`` (16) geometric from ``0.3 sigma*`` to ``30 sigma*``,
   fixed before any distance is seen, plus ``sigma* (1 - 1e-3)`` and
   ``sigma* (1 + 1e-3)`` to test the threshold sharply (sigma* itself is left
   out: there the one-hot test is an equality that rounding decides).
4. For each width and map (softmax, entmax15): EM from ``mu_KM`` at that
   width (``RBFKMeans(init=mu_KM, sigma=sigma, tol=1e-26, max_iter=10000)``)
   and ``distance = max_j ||mu_j(sigma) - mu_KM_j||``. ``tol=1e-26`` stops
   when the centres move less than ``1e-13`` feature standard deviations per
   iteration: ``tol=0`` runs into cycles of a few ulps near slow fixed points
   and would spend ``max_iter`` there for nothing.
5. Per data set and map: the least-squares slope of ``log distance`` on
   ``log sigma`` over the non-zero distances of the geometric grid, the
   largest width with distance exactly 0 and the next width above it; for
   softmax also the rate ``b`` of ``distance ~ exp(-b sigma*^2 / sigma^2)``
   fitted on the widths up to ``sigma*`` (the closest sample alone gives
   ``b = 2``: its runner-up responsibility is ``exp(-margin / (2 sigma^2))``).

The measured table and what it shows (entmax-1.5 reaches the K-Means fixed
point exactly at ``sigma*``; softmax converges near-exponentially and never
reaches it) are in the user guide, section "What the paper claims and what we
measured"; ``tests/test_reproduce.py`` checks the properties that hold on
every data set.
"""

import warnings
from typing import NamedTuple

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from .._annealed_rbf_kmeans import AnnealedRBFKMeans
from .._rbf_kmeans import RBFKMeans

DATASETS = ("blobs", "moons", "spiral", "circles")
ACTIVATIONS = ("softmax", "entmax15")

# Relative offset of the two widths added around sigma* (see the module
# docstring): far above the rounding of the margins (~1e-13 relative here),
# small enough to pin the threshold to 0.1%.
SHARP_OFFSET = 1e-3
# EM stopping rule of step 4 of the module docstring.
EM_TOL = 1e-26
EM_MAX_ITER = 10_000


class DatasetResult(NamedTuple):
    """Everything the experiment measured on one data set."""

    name: str
    X: np.ndarray
    n_clusters: int
    centers: np.ndarray
    sigma_star: float
    sigmas: np.ndarray
    on_grid: np.ndarray
    distances: dict
    converged: dict
    annealed: object


class Summary(NamedTuple):
    """One row of the printed table (per data set and map)."""

    dataset: str
    activation: str
    slope: float
    exp_rate: float
    sigma_star: float
    largest_zero: float
    next_above: float
    agrees: bool
    monotone: bool
    n_not_converged: int


def make_spiral(n_samples=300, *, n_arms=3, noise=0.05, random_state=0):
    """Generate interleaved 2-D spiral arms.

    Sample ``i`` belongs to arm ``i % n_arms``; its radius ``t`` is uniform in
    ``[0.1, 1]`` and its angle ``2 pi a / n_arms + 1.5 pi t``, so every arm
    turns through three quarters of a revolution; isotropic Gaussian noise of
    standard deviation ``noise`` is added.

    Parameters
    ----------
    n_samples : int, default=300
        Number of samples.
    n_arms : int, default=3
        Number of arms.
    noise : float, default=0.05
        Standard deviation of the Gaussian noise.
    random_state : int, RandomState instance or None, default=0
        Seeds the radii and the noise.

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
        The samples.
    y : ndarray of shape (n_samples,)
        The arm of each sample.

    Examples
    --------
    >>> from skrbfkmeans._cli.reproduce import make_spiral
    >>> X, y = make_spiral(6, n_arms=3)
    >>> X.shape, y.tolist()
    ((6, 2), [0, 1, 2, 0, 1, 2])
    """
    rng = check_random_state(random_state)
    y = np.arange(n_samples) % n_arms
    t = rng.uniform(0.1, 1.0, n_samples)
    theta = 2 * np.pi * y / n_arms + 1.5 * np.pi * t
    X = t[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])
    X += noise * rng.standard_normal((n_samples, 2))
    return X, y


def make_dataset(name, n_samples=300):
    """Return ``(X, n_clusters)`` for one of :data:`DATASETS`."""
    if name == "blobs":
        return make_blobs(n_samples, centers=3, cluster_std=0.5, random_state=0)[0], 3
    if name == "moons":
        return make_moons(n_samples, noise=0.05, random_state=0)[0], 2
    if name == "spiral":
        return make_spiral(n_samples, random_state=0)[0], 3
    if name == "circles":
        X = make_circles(n_samples, noise=0.05, factor=0.5, random_state=0)[0]
        return X, 2
    raise ValueError(f"Unknown data set {name!r}; expected one of {DATASETS}.")


def _sq_distances(X, centers):
    # Direct differences, not the expanded GEMM form: the margins below are
    # small differences of squared distances and must not lose digits.
    return ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)


def exact_hardness_width(X, centers):
    """Return ``sigma* = sqrt(min_i (d_i(2) - d_i(1)) / 4)``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The data.
    centers : ndarray of shape (n_clusters, n_features)
        The centres, at least two.

    Returns
    -------
    sigma_star : float
        The largest width at which entmax-1.5 responsibilities are exactly
        one-hot for every sample.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans._cli.reproduce import exact_hardness_width
    >>> X = np.array([[0.0], [1.0], [3.0]])
    >>> float(exact_hardness_width(X, np.array([[0.5], [3.0]])))
    1.0
    """
    d = np.sort(_sq_distances(X, centers), axis=1)
    min_margin = float((d[:, 1] - d[:, 0]).min())
    if not min_margin > 0:
        raise ValueError(
            "A sample is equidistant from its two nearest centres: no width "
            "makes entmax-1.5 one-hot."
        )
    return np.sqrt(min_margin / 4)


def _em(X, centers, sigma, activation, tol=EM_TOL):
    """EM at ``sigma`` from ``centers``: (final centres, converged)."""
    est = RBFKMeans(
        n_clusters=centers.shape[0],
        sigma=sigma,
        activation=activation,
        init=centers,
        n_init=1,
        max_iter=EM_MAX_ITER,
        tol=tol,
    )
    with warnings.catch_warnings():
        # Merged centres at large widths and unconverged runs are expected
        # outcomes here; converged_ records the latter.
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X)
    return est.cluster_centers_, bool(est.converged_)


def kmeans_fixed_point(X, n_clusters):
    """Return a K-Means fixed point by Lloyd with ``tol=0``, checked.

    Runs ``KMeans(n_init=10, tol=0, random_state=0)``, checks with NumPy that
    the means of its Voronoi cells are its centres, then applies the
    package's own one-hot EM step (entmax-1.5 below the exact-hardness width,
    a Lloyd step) until nothing moves, so that the result is a fixed point of
    the package's arithmetic to the last bit.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The data.
    n_clusters : int
        Number of centres.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The fixed point ``mu_KM``.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans._cli.reproduce import kmeans_fixed_point
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [5.0, 0.0], [5.0, 1.0]])
    >>> np.sort(kmeans_fixed_point(X, 2), axis=0)
    array([[0. , 0.5],
           [5. , 0.5]])
    """
    km = KMeans(n_clusters, n_init=10, tol=0, random_state=0).fit(X)
    centers = km.cluster_centers_
    labels = _sq_distances(X, centers).argmin(axis=1)
    means = np.array([X[labels == j].mean(axis=0) for j in range(n_clusters)])
    scale = float(np.abs(X).max())
    if not np.array_equal(labels, km.labels_) or not np.allclose(
        means, centers, rtol=0, atol=1e-12 * scale
    ):
        raise RuntimeError("KMeans(tol=0) did not end on a Lloyd fixed point.")
    sigma = 0.5 * exact_hardness_width(X, centers)
    # tol=0: one-hot steps repeat bit for bit, so this stops at a shift of 0.
    fixed, converged = _em(X, centers, sigma, "entmax15", tol=0)
    if not converged or not np.array_equal(
        labels, _sq_distances(X, fixed).argmin(axis=1)
    ):
        raise RuntimeError("The one-hot EM step left the K-Means fixed point.")
    return fixed


def width_grid(sigma_star, n_widths=16, low=0.3, high=30.0):
    """Widths of the experiment, ascending, and which are on the grid.

    Parameters
    ----------
    sigma_star : float
        The exact-hardness width.
    n_widths : int, default=16
        Number of geometric widths from ``low * sigma_star`` to
        ``high * sigma_star``.
    low, high : float, default=0.3, 30.0
        Ends of the grid, in units of ``sigma_star``.

    Returns
    -------
    sigmas : ndarray of shape (n_widths + 2,)
        The grid and ``sigma_star (1 -+ 1e-3)``, sorted.
    on_grid : ndarray of shape (n_widths + 2,)
        ``False`` for the two widths added around ``sigma_star``.

    Examples
    --------
    >>> from skrbfkmeans._cli.reproduce import width_grid
    >>> sigmas, on_grid = width_grid(1.0, n_widths=3, low=0.1, high=10.0)
    >>> sigmas.round(3).tolist(), on_grid.tolist()
    ([0.1, 0.999, 1.0, 1.001, 10.0], [True, False, True, False, True])
    """
    grid = np.geomspace(low * sigma_star, high * sigma_star, n_widths)
    sharp = sigma_star * np.array([1 - SHARP_OFFSET, 1 + SHARP_OFFSET])
    sigmas = np.concatenate([grid, sharp])
    on_grid = np.concatenate([np.ones(n_widths, bool), np.zeros(2, bool)])
    order = np.argsort(sigmas, kind="stable")
    return sigmas[order], on_grid[order]


def convergence_distances(X, centers, sigmas, activation):
    """Distance of the soft fixed point at each width from ``centers``.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The data.
    centers : ndarray of shape (n_clusters, n_features)
        The K-Means fixed point ``mu_KM``, the EM start at every width.
    sigmas : array-like of shape (n_widths,)
        The widths.
    activation : {"softmax", "entmax15"}
        The map.

    Returns
    -------
    distances : ndarray of shape (n_widths,)
        ``max_j ||mu_j(sigma) - mu_KM_j||``.
    converged : ndarray of shape (n_widths,)
        Whether EM met its tolerance within ``EM_MAX_ITER`` iterations.
    """
    distances = np.empty(len(sigmas))
    converged = np.empty(len(sigmas), dtype=bool)
    for i, sigma in enumerate(sigmas):
        soft, converged[i] = _em(X, centers, float(sigma), activation)
        distances[i] = np.sqrt(((soft - centers) ** 2).sum(axis=1)).max()
    return distances, converged


def loglog_slope(sigmas, distances):
    """Least-squares slope of ``log distance`` on ``log sigma``, zeros left out.

    Returns ``nan`` with fewer than two non-zero distances.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans._cli.reproduce import loglog_slope
    >>> s = np.array([0.5, 1.0, 2.0, 4.0])
    >>> float(loglog_slope(s, np.where(s > 0.6, 3 * s**2, 0.0)))
    2.0
    """
    sigmas, distances = np.asarray(sigmas), np.asarray(distances)
    nonzero = distances > 0
    if nonzero.sum() < 2:
        return np.nan
    x, y = np.log(sigmas[nonzero]), np.log(distances[nonzero])
    return float(np.polyfit(x, y, 1)[0])


def exponential_rate(sigmas, distances, sigma_star):
    """Fit ``distance ~ exp(-b sigma*^2 / sigma^2)`` below ``sigma*``: ``b``.

    Uses the non-zero distances at widths up to ``sigma_star``; ``nan`` with
    fewer than two.
    """
    sigmas, distances = np.asarray(sigmas), np.asarray(distances)
    keep = (distances > 0) & (sigmas <= sigma_star)
    if keep.sum() < 2:
        return np.nan
    x = (sigma_star / sigmas[keep]) ** 2
    return float(-np.polyfit(x, np.log(distances[keep]), 1)[0])


def run_dataset(name, n_samples=300, n_widths=16):
    """Run the whole experiment on one data set.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    n_samples : int, default=300
        Size of the data set.
    n_widths : int, default=16
        Number of widths of the geometric grid.

    Returns
    -------
    result : DatasetResult
        The data, ``mu_KM``, ``sigma*``, the widths, the distances and
        convergence flags per map, and the fitted ``AnnealedRBFKMeans``.
    """
    X, n_clusters = make_dataset(name, n_samples)
    centers = kmeans_fixed_point(X, n_clusters)
    sigma_star = exact_hardness_width(X, centers)
    sigmas, on_grid = width_grid(sigma_star, n_widths)
    distances, converged = {}, {}
    for activation in ACTIVATIONS:
        distances[activation], converged[activation] = convergence_distances(
            X, centers, sigmas, activation
        )
    annealed = AnnealedRBFKMeans(n_clusters=n_clusters).fit(X)
    return DatasetResult(
        name,
        X,
        n_clusters,
        centers,
        sigma_star,
        sigmas,
        on_grid,
        distances,
        converged,
        annealed,
    )


def run_experiment(n_samples=300, n_widths=16, datasets=DATASETS):
    """Run :func:`run_dataset` on every data set; returns a list of results."""
    return [run_dataset(name, n_samples, n_widths) for name in datasets]


def summarize(result, activation):
    """Summarize one data set and map as a row of the printed table.

    ``largest_zero`` is the largest width with distance exactly 0 (``nan``
    if none) and ``next_above`` the next width of the experiment above it;
    ``agrees`` is ``largest_zero <= sigma* < next_above`` (entmax-1.5's
    claim; always ``False`` for a map with no zero). ``monotone``: the
    distance never decreases as the width grows.
    """
    sigmas, d = result.sigmas, result.distances[activation]
    zero = np.flatnonzero(d == 0)
    if zero.size:
        last = zero[-1]
        largest_zero = float(sigmas[last])
        next_above = float(sigmas[last + 1]) if last + 1 < sigmas.size else np.inf
        # The claim is that the zeros are exactly the widths below sigma*.
        agrees = bool(
            largest_zero <= result.sigma_star < next_above
            and np.all(d[: last + 1] == 0)
        )
    else:
        largest_zero = next_above = np.nan
        agrees = False
    grid = result.on_grid
    return Summary(
        result.name,
        activation,
        loglog_slope(sigmas[grid], d[grid]),
        exponential_rate(sigmas, d, result.sigma_star),
        float(result.sigma_star),
        largest_zero,
        next_above,
        agrees,
        bool(np.all(np.diff(d) >= 0)),
        int((~result.converged[activation]).sum()),
    )


def convergence_rows(results):
    """Rows ``(dataset, activation, sigma, distance)`` of ``convergence.csv``."""
    return [
        (r.name, activation, float(s), float(d))
        for r in results
        for activation in ACTIVATIONS
        for s, d in zip(r.sigmas, r.distances[activation])
    ]


def convergence_figure(results):
    """Figure: log-log distance against width, one panel per data set.

    Zero distances cannot be drawn on a log axis: they are drawn as
    downward triangles on the bottom edge of the panel, labelled as such.
    Slopes in the legend are :func:`loglog_slope` over the grid widths.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(results), 5), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(results)))
    styles = {"softmax": ("C0", "o"), "entmax15": ("C3", "s")}
    for ax, r in zip(axes, results):
        nonzero_min = min(
            float(d[d > 0].min()) for d in r.distances.values() if (d > 0).any()
        )
        floor = nonzero_min / 30
        for activation in ACTIVATIONS:
            d = r.distances[activation]
            color, marker = styles[activation]
            nz = d > 0
            slope = loglog_slope(r.sigmas[r.on_grid], d[r.on_grid])
            ax.plot(
                r.sigmas[nz],
                d[nz],
                marker=marker,
                color=color,
                label=f"{activation} (slope {slope:.2f})",
            )
            if (~nz).any():
                ax.plot(
                    r.sigmas[~nz],
                    np.full((~nz).sum(), floor),
                    linestyle="none",
                    marker="v",
                    color=color,
                    label=f"{activation}: exactly 0 (drawn at bottom)",
                )
        ax.axvline(r.sigma_star, color="grey", linestyle="--", label=r"$\sigma^*$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{r.name} (k={r.n_clusters}, n={r.X.shape[0]})")
        ax.set_xlabel(r"width $\sigma$")
        ax.set_ylabel(r"$\max_j \|\mu_j(\sigma) - \mu^{KM}_j\|$")
        # Below the panel: inside, it would hide points in one panel or another.
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return fig


def trajectories_figure(results):
    """Figure: centre trajectories of ``AnnealedRBFKMeans`` per data set.

    Top row: the data and the path of every centre in the plane, from the
    data mean to the certified end point (squares). Bottom row:
    :func:`skrbfkmeans.plotting.plot_annealing_path`.
    """
    from matplotlib.figure import Figure

    from ..plotting import plot_annealing_path

    fig = Figure(figsize=(4 * len(results), 8), layout="constrained")
    axes = np.asarray(fig.subplots(2, len(results))).reshape(2, -1)
    for top, bottom, r in zip(axes[0], axes[1], results):
        est = r.annealed
        top.scatter(r.X[:, 0], r.X[:, 1], s=4, color="0.75")
        for j in range(est.n_clusters):
            path = est.centers_path_[:, j, :]
            top.plot(path[:, 0], path[:, 1], color=f"C{j % 10}", marker=".")
        top.plot(
            *est.cluster_centers_.T,
            linestyle="none",
            marker="s",
            markeredgecolor="k",
            color="w",
        )
        top.set_title(f"{r.name}: certified={est.certified_}")
        top.set_aspect("equal", adjustable="datalim")
        plot_annealing_path(est, ax=bottom)
    return fig
