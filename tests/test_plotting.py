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
    assert legend == [
        "centre trajectories",
        "critical widths (splits)",
        "final width (certified)",
    ]
    n_stages = annealed.sigma_path_.size
    assert ax.get_title() == f"4 centres, {n_stages} stages, {n_crit} splits"


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
    assert ax.get_title() == "entmax15, sigma = 0.05: 0 of 120 samples soft"
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
    assert ax.get_title().endswith("120 of 120 samples soft")


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
