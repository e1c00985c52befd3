"""Tests of the paper's experiment (``skrbfkmeans._cli.reproduce``).

The claims on a small grid around ``sigma*``: entmax-1.5 stays exactly on the
K-Means fixed point below ``sigma*`` and leaves it above, quadratically at
first; softmax never reaches it and its distance shrinks as the width does.
The command line that prints and writes all this: ``test_cli.py``.
"""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skrbfkmeans import AnnealedRBFKMeans
from skrbfkmeans._cli.reproduce import (
    ACTIVATIONS,
    DATASETS,
    SHARP_OFFSET,
    convergence_distances,
    convergence_rows,
    exact_hardness_width,
    exponential_rate,
    kmeans_fixed_point,
    loglog_slope,
    make_dataset,
    make_spiral,
    run_dataset,
    summarize,
    width_grid,
)

# Widths in units of sigma*: four below, four above, two at 0.1%.
FACTORS = np.array([0.3, 0.5, 0.8, 1 - SHARP_OFFSET, 1 + SHARP_OFFSET, 1.5, 3.0])


@pytest.fixture(scope="module", params=DATASETS)
def small(request):
    """A data set of 100 samples, its fixed point, sigma* and the distances."""
    X, n_clusters = make_dataset(request.param, n_samples=100)
    centers = kmeans_fixed_point(X, n_clusters)
    sigma_star = exact_hardness_width(X, centers)
    sigmas = FACTORS * sigma_star
    distances = {a: convergence_distances(X, centers, sigmas, a) for a in ACTIVATIONS}
    return X, centers, sigma_star, sigmas, distances


def _oracle_margins(X, centers):
    # Brute force: every squared distance, sorted per sample.
    d = np.array([[np.sum((x - c) ** 2) for c in centers] for x in X])
    d.sort(axis=1)
    return d[:, 1] - d[:, 0]


def test_entmax_exactly_zero_below_sigma_star(small):
    # Check that entmax-1.5 EM started at the K-Means fixed point does not
    # move it by a single bit at every width below sigma*, up to
    # sigma* (1 - 1e-3), and converges at once.
    _, _, sigma_star, sigmas, distances = small
    d, converged = distances["entmax15"]
    below = sigmas < sigma_star
    assert_array_equal(d[below], 0.0)
    assert converged.all()


def test_entmax_nonzero_above_sigma_star(small):
    # Check that from sigma* (1 + 1e-3) on the entmax-1.5 fixed point is a
    # different point: one sample is soft, the centres move.
    _, _, sigma_star, sigmas, distances = small
    d, _ = distances["entmax15"]
    assert (d[sigmas > sigma_star] > 0).all()


def test_entmax_leaves_quadratically(small):
    # Check that just above sigma* the distance grows like (sigma - sigma*)^2:
    # at sigma* (1 + delta) the closest sample's runner-up responsibility
    # is about 4 delta^2 (two-entry entmax-1.5 with a score gap 2 - 4 delta).
    X, centers, sigma_star, _, _ = small
    deltas = np.array([1e-3, 2e-3])
    d, _ = convergence_distances(X, centers, sigma_star * (1 + deltas), "entmax15")
    assert_allclose(d[1] / d[0], 4.0, rtol=0.05)


def test_softmax_never_zero_and_shrinks_with_sigma(small):
    # Check that softmax never reaches the fixed point exactly and that its
    # distance decreases strictly as the width decreases below sigma*.
    _, _, sigma_star, sigmas, distances = small
    d, converged = distances["softmax"]
    assert (d > 0).all() and converged.all()
    below = d[sigmas <= sigma_star]
    assert (np.diff(below) > 0).all()
    # Softmax's runner-up responsibility at the closest sample is
    # exp(-margin / (2 sigma^2)) = exp(-2 (sigma*/sigma)^2): at 0.3 sigma*
    # about 2e-10, times a distance of order one over a cluster's size.
    assert d[0] < 1e-9 * np.abs(small[0]).max()


def test_sharp_widths_agree_with_sigma_star(small):
    # Check that entmax is exactly one-hot at sigma* (1 - 1e-3) and not at
    # sigma* (1 + 1e-3): sigma* from the margins is the threshold to 0.1%.
    _, _, sigma_star, sigmas, distances = small
    d, _ = distances["entmax15"]
    i = np.searchsorted(sigmas, sigma_star)
    assert d[i - 1] == 0 and d[i] > 0
    assert sigmas[i - 1] < sigma_star < sigmas[i]


@pytest.mark.parametrize("name", DATASETS)
def test_kmeans_fixed_point_is_a_lloyd_fixed_point(name):
    # Check that mu_KM is a Lloyd fixed point: the means of its Voronoi cells
    # (NumPy, float64) are its centres, and no cell is empty.
    X, n_clusters = make_dataset(name, n_samples=100)
    centers = kmeans_fixed_point(X, n_clusters)
    d = ((X[:, None, :] - centers[None]) ** 2).sum(axis=2)
    labels = d.argmin(axis=1)
    assert np.unique(labels).size == n_clusters
    means = np.array([X[labels == j].mean(axis=0) for j in range(n_clusters)])
    assert_allclose(means, centers, rtol=0, atol=1e-12 * np.abs(X).max())


def test_exact_hardness_width_matches_oracle(global_random_seed):
    # Check sigma* = sqrt(min margin / 4) against a brute-force oracle.
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(50, 3))
    centers = rng.normal(size=(4, 3))
    expected = np.sqrt(_oracle_margins(X, centers).min() / 4)
    assert_allclose(exact_hardness_width(X, centers), expected, rtol=1e-12)


def test_exact_hardness_width_tie_raises():
    # Check that a sample equidistant from two centres (no exact-hardness
    # width) is an error, not sigma* = 0.
    X = np.array([[0.0], [1.0], [2.0]])
    with pytest.raises(ValueError, match="equidistant"):
        exact_hardness_width(X, np.array([[0.0], [2.0]]))


def test_width_grid():
    # Check that the grid is geometric from 0.3 to 30 sigma*, with the two
    # sharp widths added and flagged, in ascending order.
    sigmas, on_grid = width_grid(2.0, n_widths=12)
    assert sigmas.shape == (14,) and on_grid.sum() == 12
    assert (np.diff(sigmas) > 0).all()
    grid = sigmas[on_grid]
    assert_allclose(grid[[0, -1]], [0.6, 60.0])
    assert_allclose(np.diff(np.log(grid)), np.log(100) / 11)
    assert_allclose(sigmas[~on_grid], [2.0 * (1 - 1e-3), 2.0 * (1 + 1e-3)])


def test_make_spiral():
    # Check that the spiral has its documented shape, labels and radius range
    # (noise-free), and repeats with its seed.
    X, y = make_spiral(90, n_arms=3, noise=0.0, random_state=0)
    assert X.shape == (90, 2)
    assert_array_equal(np.bincount(y), [30, 30, 30])
    radius = np.hypot(X[:, 0], X[:, 1])
    assert radius.min() >= 0.1 and radius.max() <= 1.0
    assert_array_equal(make_spiral(90, random_state=0)[0], make_spiral(90)[0])


def test_fitted_rates():
    # Check the slope and rate fits on exact laws: a power law with zeros left
    # out, and exp(-b sigma*^2 / sigma^2) below sigma*.
    s = np.geomspace(0.2, 5.0, 9)
    assert_allclose(loglog_slope(s, np.where(s > 0.5, 0.1 * s**3, 0.0)), 3.0)
    assert np.isnan(loglog_slope(s, np.zeros_like(s)))
    d = 7.0 * np.exp(-2.0 * (1.0 / s) ** 2)
    assert_allclose(exponential_rate(s, d, 1.0), 2.0)


def test_run_dataset_and_summary():
    # Check the assembled result: shapes, the annealed estimator, the CSV
    # rows and the table row, whose entmax threshold agrees with sigma*.
    result = run_dataset("blobs", n_samples=60, n_widths=12)
    assert result.sigmas.shape == (14,)
    assert isinstance(result.annealed, AnnealedRBFKMeans)
    assert result.annealed.certified_
    rows = convergence_rows([result])
    assert len(rows) == 2 * 14
    assert {row[1] for row in rows} == set(ACTIVATIONS)
    entmax = summarize(result, "entmax15")
    assert entmax.agrees
    assert entmax.largest_zero <= entmax.sigma_star < entmax.next_above
    assert entmax.n_not_converged == 0
    softmax = summarize(result, "softmax")
    assert np.isnan(softmax.largest_zero) and not softmax.agrees
    assert softmax.slope > entmax.slope > 0


def test_figures():
    # Check what the figures draw: log-log panels with a slope per map in the
    # legend and the zeros marked at the bottom; trajectories in the plane
    # above the annealing path of each data set.
    pytest.importorskip("matplotlib")
    from skrbfkmeans._cli.reproduce import convergence_figure, trajectories_figure

    results = [run_dataset("moons", n_samples=60, n_widths=12)]
    (ax,) = convergence_figure(results).axes
    assert ax.get_xscale() == ax.get_yscale() == "log"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("slope" in label for label in labels) == 2
    assert "entmax15: exactly 0 (drawn at bottom)" in labels
    zeros = next(
        line for line in ax.get_lines() if line.get_label().endswith("at bottom)")
    )
    n_zero = int((results[0].distances["entmax15"] == 0).sum())
    assert len(zeros.get_xdata()) == n_zero
    # Drawn below every non-zero distance.
    assert zeros.get_ydata().max() < results[0].distances["softmax"].min()

    top, bottom = trajectories_figure(results).axes
    k = results[0].n_clusters
    assert len(top.get_lines()) == k + 1
    assert bottom.get_xscale() == "log"
