"""Tests of ``skrbfkmeans.plotting``, headless (Agg): what is drawn, not only
that something is."""

import io
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.cluster.hierarchy import cophenet
from scipy.spatial.distance import squareform
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
# (one move), which joins the tree at the final width.
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


# The reproducer of the jumping centre: centre 1 sat on centre 0 down to
# sigma 2.22, then leapt 10.7 beside centre 2, the cluster it split from.
X_JUMP, _ = make_blobs(n_samples=1000, centers=5, cluster_std=1.5, random_state=0)


@pytest.fixture(scope="module")
def jumping():
    return AnnealedRBFKMeans(5).fit(X_JUMP)


@pytest.fixture(scope="module")
def iris_k10():
    # Standardised iris with ten clusters: merges, drops and polish moves.
    from sklearn.datasets import load_iris
    from sklearn.preprocessing import StandardScaler

    iris = StandardScaler().fit_transform(load_iris().data)
    est = AnnealedRBFKMeans(10).fit(iris)
    assert est.n_polish_moves_ == 2
    return est


def _births(est):
    """Width and parent of the birth of each cluster, from the split tree.

    The lineages as the docstring of plot_annealing_path defines them,
    derived with SciPy's cophenetic distances: cluster ``j`` has a line of
    its own below its smallest split width with a cluster of smaller index,
    and splits off the smallest cluster within that width.
    """
    n = est.split_linkage_.shape[0] + 1
    coph = squareform(cophenet(est.split_linkage_))
    births = {}
    for j in range(1, n):
        width = coph[j, :j].min()
        births[j] = (width, min(i for i in range(n) if coph[i, j] <= width))
    return births


def _path_positions(est):
    """The path's centres on the first principal axis of the final centres."""
    final = est.centers_path_[-1] - est.centers_path_[-1].mean(axis=0)
    axis = np.linalg.svd(final)[2][0]
    return (est.centers_path_ - est.centers_path_[0].mean(axis=0)) @ axis


def _drawn_at(line, sigma):
    x, y = line.get_data()
    return y[np.flatnonzero(x == sigma)]


def test_annealing_path_draws_each_cluster_from_its_birth(jumping):
    # Check, on the data where a centre leapt across the plot, that each
    # cluster's line starts at the critical width where the split tree says
    # it split off, at the point of the line of the cluster it split from;
    # that every point drawn is a centre of the path; and that, once born,
    # no two lines share a centre (a centre not yet split off sat on
    # another).
    est = jumping
    fig, ax = plt.subplots()
    plot_annealing_path(est, ax=ax)
    lines = ax.get_lines()[:5]
    sigmas = est.sigma_path_
    assert_array_equal(lines[0].get_xdata(), sigmas)
    births = _births(est)
    assert sorted(w for w, _ in births.values()) == sorted(est.critical_sigmas_)
    for j, (width, parent) in births.items():
        x, y = lines[j].get_data()
        assert_array_equal(x, sigmas[sigmas <= width])
        assert_array_equal(_drawn_at(lines[parent], width), y[:1])
    centres = _path_positions(est)
    ends = np.array([line.get_ydata()[-1] for line in lines])
    sign = np.sign(ends @ centres[-1])
    for s, sigma in enumerate(sigmas):
        own = [
            _drawn_at(line, sigma)[0]
            for j, line in enumerate(lines)
            if j == 0 or births[j][0] > sigma
        ]
        assert len(own) == len(set(own)) == est.n_distinct_centers_path_[s]
        gaps = np.abs(np.subtract.outer(own, sign * centres[s])).min(axis=1)
        assert_allclose(gaps, 0.0, atol=1e-9 * np.ptp(centres))


def test_annealing_path_marks_the_splits_of_the_polish(polished):
    # Check that a cluster the polish split off is drawn from the last stage
    # of the annealing, at the point of the cluster it split from, to its
    # final centre, dotted and ending in a circle, the other lines solid,
    # and that the legend says what the dotted line is.
    est = polished
    fig, ax = plt.subplots()
    plot_annealing_path(est, ax=ax)
    lines = ax.get_lines()[:6]
    births = _births(est)
    moved = [j for j, (width, _) in births.items() if width == est.sigma_]
    assert len(moved) == est.n_polish_moves_ == 1
    (j,) = moved
    x, y = lines[j].get_data()
    assert_array_equal(x, est.sigma_path_[-2:])
    assert_array_equal(_drawn_at(lines[births[j][1]], x[0]), y[:1])
    assert lines[j].get_linestyle() == ":" and lines[j].get_marker() == "o"
    assert list(lines[j].get_markevery()) == [1]
    assert all(lines[i].get_linestyle() == "-" for i in range(6) if i != j)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "split off by the polish" in legend


def _expected_counts(est):
    """The joins of the split tree by kind, and the other splits of the path."""
    heights = est.split_linkage_[:, 2]
    annealing = int(np.isin(heights, est.critical_sigmas_).sum())
    polish = int((heights == est.sigma_).sum())
    counts = f"{annealing} split{'' if annealing == 1 else 's'} while annealing"
    if polish:
        counts += f", {polish} by the polish"
    return counts, est.critical_sigmas_.size - annealing


@pytest.mark.parametrize("fit", ["annealed", "jumping", "polished", "iris_k10"])
def test_annealing_path_and_split_tree_titles_agree(fit, request):
    # Check that the path's title and the tree's give the same counts (iris
    # with ten clusters read "11 splits, 2 merged back or dropped, then 2
    # polish moves" on the path and "7 splits while annealing, 2 by the
    # polish" on the tree), and that the path says how many other splits
    # were undone on the way.
    est = request.getfixturevalue(fit)
    counts, undone = _expected_counts(est)
    path_title = plot_annealing_path(est).get_title().split("\n")
    tree_title = plot_split_tree(est).get_title().split("\n")
    n_stages = est.sigma_path_.size
    assert path_title[0] == f"{est.n_clusters_} centres, {n_stages} stages: {counts}"
    assert tree_title == [f"Split tree of {est.n_clusters_} clusters", counts]
    if undone:
        assert path_title[1].startswith(
            f"{undone} other split{'' if undone == 1 else 's'} undone"
        )
    else:
        assert len(path_title) == 1


def _leaf_legs(ax):
    """Leaf label -> (colour, top) of the leg drawn up from it."""
    x = {int(t.get_text()): t.get_position()[0] for t in ax.get_xticklabels()}
    legs = {}
    for collection in ax.collections:
        for segment, color in zip(collection.get_segments(), collection.get_colors()):
            for label, position in x.items():
                bottom, top = segment[np.argsort(segment[:, 1])]
                if bottom[1] == 0 and bottom[0] == position == top[0]:
                    legs[label] = (tuple(color), top[1])
    return legs


@pytest.mark.parametrize("fit", ["polished", "iris_k10"])
def test_split_tree_colours_are_the_path_colours(fit, request):
    # Check that the leg of each cluster in the tree, from its leaf up to
    # its first join, has the colour of the cluster's line in the annealing
    # path (SciPy's default colours meant nothing), and that the legend says
    # so.
    from matplotlib.colors import to_rgba

    est = request.getfixturevalue(fit)
    n = est.n_clusters_
    path = plot_annealing_path(est).get_lines()[:n]
    ax = plot_split_tree(est)
    legs = _leaf_legs(ax)
    assert sorted(legs) == list(range(n))
    coph = squareform(cophenet(est.split_linkage_))
    np.fill_diagonal(coph, np.inf)
    for j, (color, top) in legs.items():
        assert color == to_rgba(path[j].get_color())
        assert top == coph[j].min()
    assert len({color for color, _ in legs.values()}) == n
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "its colour in the annealing path" in legend[0]


@pytest.mark.parametrize("fit", ["polished", "iris_k10"])
def test_split_tree_shows_the_polish_joins(fit, request):
    # Check that the joins of the polish (at the final width, 0.013 on an
    # axis to 1.7 for iris) are drawn where a reader sees them, well above
    # the bottom of the axes, on a log width axis that keeps every join
    # inside; that the leg each one splits off is dotted with a circle at
    # its top; and that the legend says so.
    est = request.getfixturevalue(fit)
    fig, ax = plt.subplots()
    plot_split_tree(est, ax=ax)
    fig.savefig(io.BytesIO(), format="png")
    assert ax.get_yscale() == "log"
    heights = est.split_linkage_[:, 2]
    pixels = ax.transData.transform(np.column_stack([np.zeros_like(heights), heights]))
    above = (pixels[:, 1] - ax.bbox.y0) / ax.bbox.height
    assert above.min() >= 0.05 and above.max() <= 0.95
    dotted = [c for c in ax.collections if c.get_linestyles()[0][1] is not None]
    (dotted,) = dotted
    tops = sorted(segment[:, 1].max() for segment in dotted.get_segments())
    assert_array_equal(tops, heights[heights == est.sigma_])
    circles = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert sorted(line.get_ydata()[0] for line in circles) == tops
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1] == "split off by the polish (at the final width)"


def test_split_tree_horizontal(polished):
    # Check that with the width along x (orientation="left") the width axis
    # is the log one and the polish's join is drawn dotted there.
    ax = plot_split_tree(polished, orientation="left")
    assert ax.get_xscale() == "log" and "width" in ax.get_xlabel()
    dotted = ax.collections[-1]
    assert [seg[:, 0].max() for seg in dotted.get_segments()] == [polished.sigma_]


def _lifetimes_by_definition(est):
    """The lifetimes as the attribute's docstring defines them."""
    steps = np.log(est.sigma_path_[:-1] / est.sigma_path_[1:])
    counts = est.n_distinct_centers_path_[:-1]
    top = est.n_distinct_centers_path_.max()
    return np.array([steps[counts == c].sum() for c in range(1, top + 1)])


def test_cluster_lifetimes_requested_count_is_open_ended(annealed):
    # Check that with an integer n_clusters the requested count's bar, which
    # lasts from its birth to the end of the schedule whatever the data (it
    # was always the tallest, read as evidence for it), is drawn hatched and
    # pale, no higher than the longest other bar, with a legend saying it is
    # open-ended; the other bars are the lifetimes on the path.
    est = annealed
    lifetimes = _lifetimes_by_definition(est)
    assert lifetimes[-1] > lifetimes[:-1].max()  # the misleading bar
    fig, ax = plt.subplots()
    bars = plot_cluster_lifetimes(est, ax=ax).patches
    assert len(bars) == 4
    assert_allclose([b.get_height() for b in bars[:3]], lifetimes[:3])
    assert bars[3].get_height() == lifetimes[:3].max()
    assert [b.get_hatch() for b in bars] == [None, None, None, "//"]
    assert bars[3].get_facecolor()[3] < 1 == bars[0].get_facecolor()[3]
    assert "4 clusters requested" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "open-ended: cut at the end of the schedule, not a lifetime" in legend


def test_cluster_lifetimes_auto_bars_and_the_chosen_count():
    # Check that with n_clusters="auto" one bar per count has the lifetime's
    # height, that only the chosen count's bar has another colour, and that
    # an infinite lifetime (a count that cannot split) is drawn hatched at
    # the longest finite one.
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


PLOTS = {
    "annealing_path": lambda est, ax: plot_annealing_path(est, ax=ax),
    "split_tree": lambda est, ax: plot_split_tree(est, ax=ax),
    "cluster_lifetimes": lambda est, ax: plot_cluster_lifetimes(est, ax=ax),
    "responsibilities": lambda est, ax: plot_responsibilities(est, X_FIVE, ax=ax),
}


def _inside(box, frame):
    return (
        frame.x0 <= box.x0
        and box.x1 <= frame.x1
        and frame.y0 <= box.y0
        and box.y1 <= frame.y1
    )


@pytest.mark.parametrize("name", list(PLOTS))
def test_legend_is_saved_with_the_figure(polished, name):
    # Check that the usual notebook call, fig, ax = plt.subplots(), the
    # plot, fig.savefig(...), saves the legend inside the figure (it was cut
    # off below it): nothing drawn lies outside the saved figure, so that
    # bbox_inches="tight" would not grow it; and the legend hides none of
    # the axes' data area where it is drawn below them.
    fig, ax = plt.subplots()
    PLOTS[name](polished, ax)
    fig.savefig(io.BytesIO(), format="png")
    legend = ax.get_legend().get_window_extent()
    assert _inside(legend, fig.bbox)
    assert _inside(fig.get_tightbbox(), fig.bbox_inches.padded(1e-9))
    if name != "responsibilities":
        assert legend.y1 <= ax.bbox.y0


@pytest.mark.parametrize("name", list(PLOTS))
def test_legend_inside_axes_placed_by_hand(polished, name):
    # Check that on axes placed by hand (no layout can make room below
    # them), the legend is drawn inside the axes, so inside the figure.
    fig = plt.figure()
    ax = fig.add_axes((0.1, 0.1, 0.85, 0.8))
    PLOTS[name](polished, ax)
    fig.savefig(io.BytesIO(), format="png")
    legend = ax.get_legend().get_window_extent()
    assert _inside(legend, ax.bbox)
