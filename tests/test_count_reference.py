"""The count of ``n_clusters="auto"`` against structureless references.

Oracles: the cumulative gap and its standard error written out by loops on
hand-made lifetimes tables; the rule on hand-made gaps; generated data
whose number of clusters is known (a 3 x 3 grid, groups of tight blobs)
and structureless data (uniform in a box, one Gaussian), which must give
one cluster; a rotated rectangle, whose principal box is known; integer
weights against repeated rows; the same ``random_state`` twice.
"""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from pytest import approx

from skrbfkmeans import AnnealedRBFKMeans, _count
from skrbfkmeans._count import (
    choose_count_gap,
    cumulative_gap,
    gap_margin,
    principal_box,
    reference_rows,
)
from skrbfkmeans._rows import MemoryRows


def _fit(X, **params):
    """The auto fit and the messages of its ``n_clusters='auto'`` warnings."""
    params = {"max_clusters": 12, "random_state": 0, **params}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = AnnealedRBFKMeans("auto", **params).fit(X)
    messages = [str(w.message) for w in caught]
    return est, [m for m in messages if "n_clusters='auto'" in m]


def _grid(g, seed, n_per=60, spacing=6.0):
    """A ``g x g`` grid of unit Gaussian blobs, ``spacing`` apart."""
    rng = np.random.default_rng(seed)
    xs, ys = np.meshgrid(np.arange(g), np.arange(g))
    centers = spacing * np.column_stack([xs.ravel(), ys.ravel()])
    return np.concatenate([c + rng.standard_normal((n_per, 2)) for c in centers])


def _two_levels(seed, n_per=60):
    """Two groups 40 apart of three blobs (spread 0.5) 4 apart: six clusters."""
    rng = np.random.default_rng(seed)
    blob = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.5]])
    centers = np.concatenate([blob, blob + [40.0, 0.0]])
    return np.concatenate([c + 0.5 * rng.standard_normal((n_per, 2)) for c in centers])


def test_cumulative_gap_closed_form():
    # Check G(c) = sum_{j=2..c} (L(j) - mean_b R_b(j)) and the standard
    # error sd_b(sum_{j=2..c} R_b(j)) sqrt(1 + 1/B), written out by loops,
    # on a hand-made table; count 1's lifetimes never count.
    life = np.array([9.0, 0.3, 1.2, 0.1, 0.4])
    refs = np.array(
        [
            [5.0, 0.2, 0.1, 0.3, 0.1],
            [1.0, 0.4, 0.3, 0.1, 0.2],
            [7.0, 0.3, 0.2, 0.2, 0.3],
        ]
    )
    gap, se = cumulative_gap(life, refs)
    B = refs.shape[0]
    for c in range(1, 6):
        expected = sum(life[j - 1] - refs[:, j - 1].mean() for j in range(2, c + 1))
        sums = [sum(refs[b, j - 1] for j in range(2, c + 1)) for b in range(B)]
        spread = np.std(sums, ddof=1) * np.sqrt(1 + 1 / B) if c > 1 else 0.0
        assert gap[c - 1] == pytest.approx(expected, abs=1e-15)
        assert se[c - 1] == pytest.approx(spread, abs=1e-15)
    # One reference: no standard error; an infinite lifetime (a count that
    # cannot split) makes the gap infinite from there on.
    gap, se = cumulative_gap([1.0, 0.5, np.inf, 0.0], [[2.0, 0.2, 0.3, 0.1]])
    assert_allclose(gap[:2], [0.0, 0.3])
    assert np.isinf(gap[2:]).all() and not se.any()


def test_choose_count_gap_rule():
    # Check the choice on hand-made gaps: the smallest count within the
    # tolerance of the largest gap, the tolerance the largest of the cooling
    # steps, the standard errors at the largest and a share of the largest
    # gap; 1 when the largest gap
    # does not exceed the threshold (the larger of the cooling steps and
    # null_se standard errors); the first infinite gap wins.
    step = 0.05
    zero = np.zeros(6)
    gap = np.array([0.0, 0.1, 0.5, 0.52, 0.56, 0.4])
    assert choose_count_gap(gap, zero, step, 1.0, 1.0, 1.0, 2.0, 0.0) == (4, step, step)
    choice = choose_count_gap(gap, zero, step, 2.0, 1.0, 3.0, 2.0, 0.0)
    assert choice == (3, 0.1, approx(0.15))
    se = np.full(6, 0.5)
    assert choose_count_gap(gap, se, step, 1.0, 1.0, 3.0, 1.0, 0.0) == (2, 0.5, 0.5)
    assert choose_count_gap(gap, se, step, 1.0, 1.0, 3.0, 2.0, 0.0) == (1, 0.5, 1.0)
    assert choose_count_gap(gap, se, step, 1.0, 2.0, 3.0, 1.0, 0.0)[0] == 1
    # The threshold's cooling steps: a largest gap of 11.2 steps is
    # structure at 11 steps, not at 12.
    assert choose_count_gap(gap, zero, step, 1.0, 1.0, 11.0, 2.0, 0.0)[0] == 4
    choice = choose_count_gap(gap, zero, step, 1.0, 1.0, 12.0, 2.0, 0.0)
    assert choice == (1, step, approx(0.6))
    # A share of the largest gap: 0.56 / 8 = 0.07 reaches 0.5 (count 3).
    assert choose_count_gap(gap, zero, step, 1.0, 1.0, 1.0, 2.0, 1 / 8)[:2] == (
        3,
        0.07,
    )
    flat = np.array([0.0, 0.03, -0.02, 0.04])
    assert choose_count_gap(flat, np.zeros(4), step, 1.0, 1.0, 1.0, 2.0, 0.0)[0] == 1
    assert choose_count_gap(np.array([0.0, 0.5, np.inf]), np.zeros(3), step)[0] == 3
    # Lifetimes of whole cooling steps: count 3 lives one step more than the
    # references, so its gap is short of count 4's by exactly the tolerance
    # (one step), to the rounding of the sums, and is within it.
    step = -0.5 * np.log(0.9)
    life = np.array([2.0, 1.0, 7.0, 2.0, 1.0]) * step
    refs = np.array([[2.0, 5.0, 1.0, 1.0, 1.0]] * 2) * step
    gap, se = cumulative_gap(life, refs)
    assert_allclose(gap[1:], np.array([-4.0, 2.0, 3.0, 3.0]) * step, rtol=1e-12)
    assert choose_count_gap(gap, se, step, 1.0, 1.0, 1.0, 2.0, 0.0) == (3, step, step)


def test_gap_margin():
    # Check the margin: the chosen count's gap over the largest of the
    # smaller counts' (G(1) = 0 among them), in steps.
    gap = np.array([0.0, 0.2, -0.1, 0.5, 0.45])
    assert gap_margin(gap, 4, 0.05) == pytest.approx(6.0)
    assert gap_margin(gap, 2, 0.05) == pytest.approx(4.0)
    assert gap_margin(gap, 1, 0.05) == 0.0
    assert gap_margin(np.array([0.0, np.inf]), 2, 0.05) == np.inf


def test_principal_box_of_a_rotated_rectangle():
    # Check the box on a rectangle of sides 8 and 2 rotated by 30 degrees:
    # the first axis is the long side (up to sign), the box about the mean
    # is [-4, 4] x [-1, 1] to the sampling; reference rows lie inside it,
    # fill it, and have unit weights.
    rng = np.random.default_rng(0)
    Z = rng.uniform([-4, -1], [4, 1], size=(4000, 2))
    a = np.pi / 6
    R = np.array([[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]])
    X = Z @ R + [10.0, -3.0]
    rows = MemoryRows(X, np.ones(len(X)), np.zeros(2))
    axes, low, high = principal_box(rows, 1000)
    assert abs(axes[0] @ R[0]) == pytest.approx(1.0, abs=1e-2)
    assert_allclose(low, [-4, -1], atol=0.05)
    assert_allclose(high, [4, 1], atol=0.05)
    ref = reference_rows((axes, low, high), 2000, np.random.default_rng(1), X.dtype)
    coords = ref.X @ axes.T
    assert np.all(coords >= low - 1e-12) and np.all(coords <= high + 1e-12)
    assert_allclose(coords.min(axis=0), low, atol=0.05)
    assert_allclose(coords.max(axis=0), high, atol=0.05)
    assert_array_equal(ref.w, 1.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: rng.uniform(0, 1, size=(600, 2)),
        lambda rng: rng.uniform(0, 1, size=(600, 5)) * [3, 1, 1, 1, 1],
        lambda rng: rng.standard_normal((600, 3)),
    ],
    ids=["uniform-square", "uniform-5d-long", "gaussian-3d"],
)
def test_structureless_data_gives_one_cluster(make):
    # Check that data without clusters give one cluster, with a warning
    # that says no count beat the references, and the attributes that
    # show it: no gap exceeds the threshold.
    X = make(np.random.default_rng(3))
    est, messages = _fit(X)
    assert est.n_clusters_ == 1
    assert est.cluster_centers_.shape == (1, X.shape[1])
    assert len(messages) == 1 and "structureless" in messages[0]
    assert est.cluster_count_gap_.max() <= est.cluster_count_gap_threshold_
    assert est.cluster_count_margin_ == 0.0
    # One cluster is an ordinary fit: every row's label is 0, its distance
    # the distance to the centre, the mean.
    assert_allclose(est.cluster_centers_[0], X.mean(axis=0), atol=1e-12)
    assert_array_equal(est.predict(X), 0)
    assert_allclose(
        est.transform(X)[:, 0], np.linalg.norm(X - X.mean(axis=0), axis=1), rtol=1e-9
    )


@pytest.mark.parametrize(
    "make, K, K_alone",
    [(lambda: _grid(3, 0), 9, 9), (lambda: _two_levels(1), 6, 2)],
    ids=["grid-3x3", "two-levels"],
)
def test_grid_and_fine_level_are_found(make, K, K_alone):
    # Check the two kinds the longest lifetime alone failed on, 3 x 3 grids
    # (4 on some) and groups of tight blobs (the groups), give the number of
    # blobs, and the attributes: references' lifetimes one row per
    # reference and one column per count, the gap 0 at one cluster, the
    # chosen count within the tolerance of the largest gap, every smaller
    # count below it. K_alone is the longest lifetime's count on the same
    # data: this grid it finds too, the two levels it takes for 2.
    X = make()
    est, messages = _fit(X)
    assert est.n_clusters_ == K and not messages
    refs, gap = est.cluster_count_reference_lifetimes_, est.cluster_count_gap_
    assert refs.shape == (_count.N_REFERENCES, 12) and gap.shape == (12,)
    assert gap[0] == 0.0
    tol = est.cluster_count_gap_tolerance_
    assert gap.max() > est.cluster_count_gap_threshold_
    assert gap[K - 1] >= gap.max() - tol
    assert np.all(gap[: K - 1] < gap.max() - tol)
    saved = _count.N_REFERENCES
    try:
        _count.N_REFERENCES = 0  # the longest lifetime alone, as before
        assert _fit(X)[0].n_clusters_ == K_alone
    finally:
        _count.N_REFERENCES = saved


def test_references_are_deterministic_from_random_state():
    # Check that the references are drawn from random_state: the same seed
    # (an int or a RandomState made from it) gives the same lifetimes, to
    # the bit; another seed other draws.
    X = _grid(2, 4)
    a = _fit(X, random_state=7)[0].cluster_count_reference_lifetimes_
    b = _fit(X, random_state=np.random.RandomState(7))[0]
    assert_array_equal(b.cluster_count_reference_lifetimes_, a)
    c = _fit(X, random_state=8)[0].cluster_count_reference_lifetimes_
    assert not np.array_equal(a, c)


def test_reference_size_and_weights(monkeypatch):
    # Check the references' size: REFERENCE_ROWS rows at most, the data's
    # weight in samples when it is smaller, and integer weights give the
    # references of repeated rows (the same box, size and draws).
    sizes = []
    make = _count.reference_rows

    def recording(box, n_rows, rng, dtype):
        sizes.append(n_rows)
        return make(box, n_rows, rng, dtype)

    monkeypatch.setattr(_count, "reference_rows", recording)
    X = _grid(2, 5, n_per=400)
    _fit(X)
    assert sizes == [_count.REFERENCE_ROWS] * _count.N_REFERENCES
    small = _grid(2, 6, n_per=40)
    w = np.random.default_rng(0).integers(1, 4, size=small.shape[0])
    sizes.clear()
    est = AnnealedRBFKMeans("auto", max_clusters=8, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        weighted = est.fit(small, sample_weight=w)
        assert sizes == [int(w.sum())] * _count.N_REFERENCES
        repeated = AnnealedRBFKMeans("auto", max_clusters=8, random_state=0).fit(
            np.repeat(small, w, axis=0)
        )
    assert weighted.n_clusters_ == repeated.n_clusters_ == 4
    assert_allclose(
        weighted.cluster_count_reference_lifetimes_,
        repeated.cluster_count_reference_lifetimes_,
        rtol=1e-9,
    )


def test_given_count_has_no_reference_attributes():
    # Check that the references run only for n_clusters="auto".
    est = AnnealedRBFKMeans(3, random_state=0).fit(_grid(2, 0))
    for name in ("cluster_count_reference_lifetimes_", "cluster_count_gap_"):
        assert not hasattr(est, name)


def test_lifetimes_plot_draws_the_references():
    # Check that the lifetimes plot draws the references' mean lifetime of
    # each count (one point per count, on its bar) and says so in the
    # legend, keeps one bar per count, and titles structureless data.
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skrbfkmeans.plotting import plot_cluster_lifetimes

    try:
        est, _ = _fit(_grid(3, 0))
        ax = plot_cluster_lifetimes(est)
        assert len(ax.patches) == 12
        x, y = ax.lines[0].get_data()
        assert_array_equal(x, np.arange(1, 13))
        assert_allclose(y, est.cluster_count_reference_lifetimes_.mean(axis=0))
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("structureless references" in text for text in legend)
        assert "chosen: 9 clusters" in ax.get_title()
        flat, _ = _fit(np.random.default_rng(0).uniform(size=(500, 2)))
        title = plot_cluster_lifetimes(flat).get_title()
        assert "1 cluster" in title and "structureless" in title
    finally:
        plt.close("all")
