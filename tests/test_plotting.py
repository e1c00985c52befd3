"""Tests of ``skrbfkmeans.plotting``, headless (Agg): what is drawn, not only
that something is."""

import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from sklearn.exceptions import NotFittedError

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans  # noqa: E402
from skrbfkmeans.plotting import (  # noqa: E402
    plot_annealing_path,
    plot_cluster_lifetimes,
    plot_responsibilities,
    plot_split_tree,
)

X, _ = make_blobs(n_samples=120, centers=4, cluster_std=0.6, random_state=0)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def annealed():
    return AnnealedRBFKMeans(n_clusters=4).fit(X)


def test_annealing_path_draws_trajectories_and_critical_widths(annealed):
    # Check that one line per centre follows sigma_path_ on a log axis that
    # runs from hot to cold, that each critical width is a vertical line, and
    # that the final width is marked as certified.
    fig, ax = plt.subplots()
    assert plot_annealing_path(annealed, ax=ax) is ax
    lines = ax.get_lines()
    n_crit = annealed.critical_sigmas_.size
    # At least one split per new centre (a merged pair splits again).
    assert n_crit >= 3
    assert len(lines) == 4 + n_crit + 1
    for line in lines[:4]:
        assert_array_equal(line.get_xdata(), annealed.sigma_path_)
    # All centres start together at the data mean (position 0).
    assert_allclose([line.get_ydata()[0] for line in lines[:4]], 0.0, atol=1e-12)
    crit = [line.get_xdata()[0] for line in lines[4 : 4 + n_crit]]
    assert_allclose(crit, annealed.critical_sigmas_)
    assert lines[-1].get_xdata()[0] == annealed.sigma_
    assert ax.get_xscale() == "log"
    assert ax.xaxis_inverted()
    assert "sigma" in ax.get_xlabel() and ax.get_ylabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["centres", "splits (critical widths)", "final width (certified)"]
    n_stages = annealed.sigma_path_.size
    # Four splits for three new centres: one group merged back or was dropped.
    assert n_crit == 4 and annealed.n_distinct_centers_path_[0] == 1
    assert ax.get_title() == (
        f"4 centres, {n_stages} stages, 4 splits\n1 merged back or dropped"
    )


def test_annealing_path_final_positions_are_the_centres(annealed):
    # Check that the trajectories end at the final centres, projected on
    # their first principal axis: the spread of the end points is that of
    # the centres along that axis.
    ax = plot_annealing_path(annealed)
    ends = np.array([line.get_ydata()[-1] for line in ax.get_lines()[:4]])
    centred = annealed.cluster_centers_ - annealed.cluster_centers_.mean(axis=0)
    top = np.linalg.svd(centred, compute_uv=False)[0]
    assert_allclose(np.linalg.norm(ends - ends.mean()), top, rtol=1e-10)


def test_annealing_path_new_axes_and_bad_estimators():
    # Check that a new figure is made without ax, that an RBFKMeans (no
    # path) is refused with a TypeError, and an unfitted estimator with
    # NotFittedError.
    est = AnnealedRBFKMeans(n_clusters=2).fit(X)
    ax = plot_annealing_path(est)
    assert ax.figure is plt.gcf()
    with pytest.raises(TypeError, match="AnnealedRBFKMeans"):
        plot_annealing_path(RBFKMeans(n_clusters=2, random_state=0).fit(X))
    with pytest.raises(NotFittedError):
        plot_annealing_path(AnnealedRBFKMeans(n_clusters=2))


def test_responsibilities_one_hot_colours_and_centres():
    # Check that with exactly one-hot entmax responsibilities every sample
    # has its centre's colour, and that the centres are drawn at
    # cluster_centers_ in those colours.
    est = RBFKMeans(n_clusters=4, activation="entmax15", sigma=0.05, random_state=0)
    est.fit(X)
    ax = plot_responsibilities(est, X)
    samples, centres = ax.collections
    assert_allclose(samples.get_offsets(), X)
    assert_allclose(centres.get_offsets(), est.cluster_centers_)
    palette = centres.get_facecolors()[:, :3]
    assert_allclose(samples.get_facecolors()[:, :3], palette[est.labels_])
    assert ax.get_title() == (
        "entmax15, sigma = 0.05\n0 of 120 samples with largest responsibility < 0.9"
    )
    assert ax.get_xlabel() == "feature 0" and ax.get_ylabel() == "feature 1"


def test_responsibilities_soft_colours_are_mixtures():
    # Check that with softmax at a large width each sample's colour is the
    # responsibility-weighted mixture of the centres' colours, so that soft
    # samples are drawn in none of the centres' colours.
    est = RBFKMeans(n_clusters=4, sigma=2.0, random_state=0).fit(X)
    ax = plot_responsibilities(est, X)
    samples, centres = ax.collections
    resp = est.predict_proba(X)
    palette = centres.get_facecolors()[:, :3]
    assert_allclose(samples.get_facecolors()[:, :3], resp @ palette, atol=1e-12)
    # No softmax row is one-hot here: the title counts the ones shared
    # between centres, the largest responsibility below 0.9.
    assert (resp.max(axis=1) < 1).all()
    n_shared = int((resp.max(axis=1) < 0.9).sum())
    assert 0 < n_shared < 120
    assert ax.get_title().endswith(
        f"\n{n_shared} of 120 samples with largest responsibility < 0.9"
    )


def test_responsibilities_annealed_and_bad_input(annealed):
    # Check that an annealed estimator is titled with its final map, and
    # that data that is not 2-D is refused.
    ax = plot_responsibilities(annealed, X)
    assert ax.get_title().startswith(str(annealed.activation_path_[-1]))
    with pytest.raises(ValueError, match="2-D data; X has 3 features"):
        plot_responsibilities(annealed, np.ones((5, 3)))


def test_missing_matplotlib_names_the_extra(monkeypatch, annealed):
    # Check that without matplotlib the error says which extra to install.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"skrbfkmeans\[plot\]"):
        plot_annealing_path(annealed)
    with pytest.raises(ImportError, match=r"skrbfkmeans\[plot\]"):
        plot_responsibilities(annealed, X)


def test_import_does_not_import_matplotlib():
    # Check that importing the package and its plotting module leaves
    # matplotlib unimported (it is an optional extra, and slow to import).
    code = (
        "import sys, skrbfkmeans, skrbfkmeans.plotting, skrbfkmeans._cli.main; "
        "print('matplotlib' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_cluster_lifetimes_bars_and_the_chosen_count():
    # Check that one bar per count has the lifetime's height, that only the
    # chosen count's bar has another colour, and that an infinite lifetime
    # (a count that cannot split) is drawn hatched at the longest finite one.
    est = AnnealedRBFKMeans("auto", max_clusters=8).fit(X)
    ax = plot_cluster_lifetimes(est)
    bars = ax.patches
    assert len(bars) == 8
    assert_allclose([b.get_height() for b in bars], est.cluster_count_lifetimes_)
    assert [b.get_x() + b.get_width() / 2 for b in bars] == list(range(1, 9))
    colors = [b.get_facecolor() for b in bars]
    odd = [i for i, c in enumerate(colors) if c != colors[0]]
    assert odd == [est.n_clusters_ - 1] and est.n_clusters_ == 4
    assert "chosen: 4 clusters" in ax.get_title()
    three = np.repeat([[0.0, 0.0], [9.0, 0.0], [0.0, 9.0]], 10, axis=0)
    est = AnnealedRBFKMeans("auto", max_clusters=5).fit(three)
    bars = plot_cluster_lifetimes(est).patches
    finite = est.cluster_count_lifetimes_[:2]
    assert bars[2].get_hatch() == "//" and bars[2].get_height() == finite.max()
    assert bars[0].get_hatch() is None


def test_split_tree_draws_the_linkage(annealed):
    # Check that the dendrogram has one U per split at the linkage's
    # heights and the cluster indices as leaf labels.
    ax = plot_split_tree(annealed)
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    assert len(segments) == 3
    heights = sorted(seg[1, 1] for seg in segments)
    assert_allclose(heights, np.sort(annealed.split_linkage_[:, 2]))
    labels = sorted(t.get_text() for t in ax.get_xticklabels())
    assert labels == ["0", "1", "2", "3"]
    assert "width" in ax.get_ylabel()


def test_tree_and_lifetimes_need_an_annealed_fit():
    # Check the errors: an RBFKMeans (no split history), an unfitted
    # estimator, a single cluster (no tree to draw).
    with pytest.raises(TypeError, match="AnnealedRBFKMeans"):
        plot_split_tree(RBFKMeans(2).fit(X))
    with pytest.raises(TypeError, match="AnnealedRBFKMeans"):
        plot_cluster_lifetimes(RBFKMeans(2).fit(X))
    with pytest.raises(NotFittedError):
        plot_split_tree(AnnealedRBFKMeans(2))
    with pytest.raises(ValueError, match="at least two clusters"):
        plot_split_tree(AnnealedRBFKMeans(1).fit(X))


# Five separated blobs fitted with six clusters: the polish moves a cluster
# (two moves), which joins the tree at the final width.
X_FIVE, _ = make_blobs(n_samples=500, centers=5, cluster_std=0.6, random_state=1)


@pytest.fixture(scope="module")
def polished():
    est = AnnealedRBFKMeans(n_clusters=6).fit(X_FIVE)
    assert est.n_polish_moves_ == 1
    return est


def _extent(artist):
    return artist.get_window_extent()


def _disjoint(a, b):
    return a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


@pytest.mark.parametrize(
    "figsize, n_panels", [((6.4, 4.8), 1), ((16, 4.6), 3), ((16, 8), 4)]
)
def test_annealing_path_legend_is_below_the_axes(annealed, figsize, n_panels):
    # Check, at the sizes the gallery and the command line use, that the
    # legend is drawn below the axes, under the tick labels and the x label
    # (it sat on the trajectories), inside the figure, in as many columns
    # as the axes' width allows.
    fig, axes = plt.subplots(1, n_panels, figsize=figsize, layout="constrained")
    for ax in np.atleast_1d(axes):
        plot_annealing_path(annealed, ax=ax)
    fig.canvas.draw()
    for ax in np.atleast_1d(axes):
        legend = _extent(ax.get_legend())
        assert legend.y1 <= ax.bbox.y0
        assert legend.y1 <= ax.xaxis.get_tightbbox().y0
        assert fig.bbox.x0 <= legend.x0 and legend.x1 <= fig.bbox.x1
        assert legend.y0 >= fig.bbox.y0
        assert legend.width <= ax.bbox.width


@pytest.mark.parametrize("figsize, n_panels", [((6.4, 4.8), 1), ((16, 8), 4)])
def test_annealing_path_labels_enough_widths(figsize, n_panels, annealed):
    # Check that the log width axis labels at least four widths in its
    # range (it labelled the powers of ten: two), in plain numbers, without
    # two labels overlapping.
    fig, axes = plt.subplots(1, n_panels, figsize=figsize, layout="constrained")
    ax = np.atleast_1d(axes)[0]
    plot_annealing_path(annealed, ax=ax)
    fig.canvas.draw()
    low, high = sorted(ax.get_xlim())
    shown = [
        t
        for t in ax.get_xticklabels()
        if t.get_text() and low <= t.get_position()[0] <= high
    ]
    assert len(shown) >= 4
    for label in shown:
        assert float(label.get_text()) == pytest.approx(label.get_position()[0])
    boxes = sorted((_extent(t) for t in shown), key=lambda b: b.x0)
    assert all(_disjoint(a, b) for a, b in zip(boxes, boxes[1:]))


def test_annealing_path_title_counts_what_happened(polished):
    # Check the title's counts: "1 split" in the singular, and the polish's
    # move (singular too), which comes after the path's splits.
    est = AnnealedRBFKMeans(n_clusters=2).fit(X)
    assert est.critical_sigmas_.size == 1
    title = plot_annealing_path(est).get_title()
    assert title == f"2 centres, {est.sigma_path_.size} stages, 1 split"
    title = plot_annealing_path(polished).get_title()
    n_stages = polished.sigma_path_.size
    assert polished.critical_sigmas_.size == 5
    assert title == f"6 centres, {n_stages} stages, 5 splits\nthen 1 polish move"


def test_split_tree_title(annealed):
    # Check that the tree of a fit without polish moves is titled with its
    # splits, and has no legend (one kind of join).
    ax = plot_split_tree(annealed)
    assert ax.get_title() == "Split tree of 4 clusters\n3 splits while annealing"
    assert ax.get_legend() is None


def test_split_tree_draws_polish_joins_apart(polished):
    # Check that the join made by the polish (at the final width) is drawn
    # dotted in black with a circle, apart from the splits of the annealing
    # (which keep the dendrogram's solid lines), and that the title and the
    # legend say which is which.
    fig, ax = plt.subplots(layout="constrained")
    plot_split_tree(polished, ax=ax)
    heights = polished.split_linkage_[:, 2]
    final = heights.min()
    assert np.isin(heights[heights > final], polished.critical_sigmas_).all()
    *splits, moved = ax.collections
    tops = [seg[1, 1] for coll in splits for seg in coll.get_segments()]
    assert_allclose(sorted(tops), np.sort(heights[heights > final]))
    for coll in splits:
        assert all(dashes is None for _, dashes in coll.get_linestyles())
    assert [seg[1, 1] for seg in moved.get_segments()] == [final]
    assert moved.get_linestyles()[0][1] is not None
    assert_allclose(moved.get_colors(), [[0, 0, 0, 1]])
    (circles,) = ax.get_lines()
    assert circles.get_marker() == "o" and list(circles.get_ydata()) == [final]
    assert ax.get_title() == (
        "Split tree of 6 clusters\n4 splits while annealing, 1 by the polish"
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [
        "split while annealing (at its critical width)",
        "split by the polish (at the final width)",
    ]
    fig.canvas.draw()
    assert _extent(ax.get_legend()).y1 <= ax.xaxis.get_tightbbox().y0


def test_split_tree_horizontal_polish_joins(polished):
    # Check that with the width along x (orientation="left") the polish's
    # join is found and drawn apart too.
    ax = plot_split_tree(polished, orientation="left")
    moved = ax.collections[-1]
    assert [seg[1, 0] for seg in moved.get_segments()] == [
        polished.split_linkage_[:, 2].min()
    ]
    assert "width" in ax.get_xlabel()


def test_split_tree_of_a_given_init():
    # Check that clusters apart from the start (an explicit init, no
    # annealing) are not counted as splits.
    est = AnnealedRBFKMeans(n_clusters=3, init=X[:3], polish=False).fit(X)
    ax = plot_split_tree(est)
    assert ax.get_title() == (
        "Split tree of 3 clusters\n0 splits while annealing, "
        "2 apart from the start (given init)"
    )


def test_responsibilities_threshold():
    # Check that the title counts the samples whose largest responsibility
    # is below threshold (1: the samples that are not one-hot, which
    # entmax-1.5 makes exact), and that a threshold outside (0, 1] is
    # refused.
    est = RBFKMeans(n_clusters=4, activation="entmax15", sigma=1.0, random_state=0)
    resp = est.fit(X).predict_proba(X)
    not_one_hot = int((resp.max(axis=1) < 1).sum())
    assert 0 < not_one_hot < 120
    ax = plot_responsibilities(est, X, threshold=1)
    assert ax.get_title().endswith(
        f"\n{not_one_hot} of 120 samples with largest responsibility < 1"
    )
    ax = plot_responsibilities(est, X, threshold=0.6)
    n = int((resp.max(axis=1) < 0.6).sum())
    assert n < not_one_hot
    assert ax.get_title().endswith(
        f"{n} of 120 samples with largest responsibility < 0.6"
    )
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\]"):
            plot_responsibilities(est, X, threshold=bad)
