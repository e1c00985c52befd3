"""Plots of fitted estimators (needs matplotlib: ``pip install skrbfkmeans[plot]``).

matplotlib is imported inside the functions, so that ``import skrbfkmeans``
and ``import skrbfkmeans.plotting`` work, and stay fast, without it.
"""

import numpy as np
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = [
    "plot_annealing_path",
    "plot_cluster_lifetimes",
    "plot_responsibilities",
    "plot_split_tree",
]


def _import_matplotlib():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "skrbfkmeans.plotting needs matplotlib, which is not installed; "
            'install the "plot" extra: pip install "skrbfkmeans[plot]".'
        ) from exc
    return matplotlib


def _new_axes():
    _import_matplotlib()
    import matplotlib.pyplot as plt

    # A layout engine makes room for the legends drawn outside the axes.
    return plt.subplots(layout="constrained")[1]


def _palette(n_colors):
    """``n_colors`` distinct RGB colours, shape (n_colors, 3)."""
    matplotlib = _import_matplotlib()
    if n_colors <= 10:
        cmap, points = matplotlib.colormaps["tab10"], np.arange(n_colors)
    elif n_colors <= 20:
        cmap, points = matplotlib.colormaps["tab20"], np.arange(n_colors)
    else:
        # Qualitative maps run out; spread the colours over a cyclic map.
        cmap, points = matplotlib.colormaps["hsv"], np.arange(n_colors) / n_colors
    return np.asarray(cmap(points))[:, :3]


def _check_annealed(estimator, name):
    """Raise unless ``estimator`` is a fitted annealing (with its path)."""
    check_is_fitted(estimator)
    if not hasattr(estimator, "sigma_path_"):
        raise TypeError(
            f"{name} needs a fitted AnnealedRBFKMeans (an estimator with "
            f"sigma_path_); got {type(estimator).__name__}."
        )


def plot_annealing_path(estimator, ax=None):
    """Plot the centre trajectories of an annealing run against the width.

    Each centre's position along the first principal axis of the final
    centres is drawn against the width of every stage, on a log axis that
    runs from hot (left) to cold (right). Dashed vertical lines mark the
    critical widths at which a group of centres split; a solid one marks the
    final width. The legend is drawn below the axes, where it hides no
    trajectory: give the figure a layout engine (``layout="constrained"``,
    as for a new figure) to make room for it.

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator (with ``sigma_path_``, ``centers_path_``,
        ``critical_sigmas_`` and ``n_distinct_centers_path_``).
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: ``n_clusters`` trajectory lines, then one
        vertical line per critical width, then one at ``sigma_``. The title
        counts the centres, stages and splits; when there are more splits
        than new centres, it says how many groups merged back or were
        dropped, and it counts the moves of the polish.

    See Also
    --------
    plot_responsibilities : 2-D data coloured by soft assignment.
    plot_split_tree : The splits as a dendrogram.

    Notes
    -----
    Coincident copies of a centre (before it splits) draw on top of each
    other, so the picture shows the splitting tree. Projecting on the first
    principal axis of the final centres keeps the direction along which they
    are most spread; with one feature the feature itself is drawn.

    Each split adds one distinct centre. Between stages, groups of centres
    that came back together merge, and groups that lost their samples are
    dropped (their copies join the nearest group), so a run can split more
    times than it has new centres: the difference is the number of groups
    merged back or dropped (the recorded path does not tell the two apart).
    The polish (``n_polish_moves_``) moves centres after the last stage of
    the annealing: its moves are the jumps of the trajectories at the final
    width, and are not splits.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skrbfkmeans import AnnealedRBFKMeans
    >>> from skrbfkmeans.plotting import plot_annealing_path
    >>> X = np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 0.0],
    ...               [10.0, 2.0], [10.0, 4.0], [10.0, 0.0]])
    >>> est = AnnealedRBFKMeans(n_clusters=2).fit(X)
    >>> ax = plot_annealing_path(est)
    >>> ax.get_xscale(), len(ax.get_lines()) == 2 + len(est.critical_sigmas_) + 1
    ('log', True)
    >>> print(ax.get_title())
    2 centres, ... stages, 1 split
    """
    _check_annealed(estimator, "plot_annealing_path")
    if ax is None:
        ax = _new_axes()
    sigmas = np.asarray(estimator.sigma_path_)
    critical = np.asarray(estimator.critical_sigmas_)
    path = np.asarray(estimator.centers_path_, dtype=np.float64)
    final = path[-1] - path[-1].mean(axis=0)
    # The right singular vector of the centred final centres is their first
    # principal axis; with all centres equal any axis will do.
    axis = np.linalg.svd(final, full_matrices=False)[2][0]
    position = (path - path[0].mean(axis=0)) @ axis

    for j in range(position.shape[1]):
        ax.plot(
            sigmas,
            position[:, j],
            marker=".",
            color=f"C{j % 10}",
            label="centres" if j == 0 else "_nolegend_",
        )
    for i, sigma in enumerate(critical):
        ax.axvline(
            sigma,
            color="0.5",
            linestyle="--",
            linewidth=0.8,
            label="splits (critical widths)" if i == 0 else "_nolegend_",
        )
    certified = getattr(estimator, "certified_", False)
    ax.axvline(
        estimator.sigma_,
        color="k",
        linewidth=0.8,
        label="final width (certified)" if certified else "final width",
    )
    ax.set_xscale("log")
    _label_log_widths(ax)
    # Cooling runs left to right.
    if not ax.xaxis_inverted():
        ax.invert_xaxis()
    ax.set_xlabel(r"width $\sigma$ (cooling $\rightarrow$)")
    ax.set_ylabel("centre position on the first principal axis")
    ax.set_title(_path_title(estimator, position.shape[1], sigmas.size, critical.size))
    # Entries of the caller's own (drawn before) join the legend too.
    n_entries = len(ax.get_legend_handles_labels()[1])
    _legend_below(ax, ncols=2 if n_entries == 4 else min(n_entries, 3))
    return ax


def _plural(count, noun):
    """``"1 split"``, ``"2 splits"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _path_title(estimator, n_centers, n_stages, n_splits):
    """Return the title of :func:`plot_annealing_path`: what happened on the path.

    Every split adds a distinct centre and every merge or drop removes one,
    so ``first + splits - merged or dropped = last`` over the counts of
    distinct centres recorded on the path.
    """
    counts = np.asarray(estimator.n_distinct_centers_path_)
    title = ", ".join(
        [f"{n_centers} centres", _plural(n_stages, "stage"), _plural(n_splits, "split")]
    )
    undone = int(counts[0]) + n_splits - int(counts[-1])
    notes = []
    if undone > 0:
        notes.append(f"{undone} merged back or dropped")
    moves = int(getattr(estimator, "n_polish_moves_", 0))
    if moves:
        notes.append(f"then {_plural(moves, 'polish move')}")
    return title + ("\n" + ", ".join(notes) if notes else "")


def _label_log_widths(ax):
    """Label enough ticks of the log width axis to read the widths off.

    A log axis labels the powers of ten only: two labels on the usual two
    decades of an annealing. Label 1 to 9, or 1, 2 and 5, or 1 and 3 times
    each power of ten, the most that the length of the axis has room for, in
    plain numbers.
    """
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    class WidthLocator(LogLocator):
        def tick_values(self, vmin, vmax):
            low, high = sorted((vmin, vmax))
            if not (low > 0 and np.isfinite(high)):
                return super().tick_values(vmin, vmax)
            # get_tick_space allows labels three times as wide as high;
            # "0.05" needs more.
            room = 9 if self.axis is None else self.axis.get_tick_space()
            room = max(2 * room // 3, 3)
            powers = 10.0 ** np.arange(np.floor(np.log10(low)), np.log10(high) + 1)
            for subs in (np.arange(1.0, 10.0), (1.0, 2.0, 5.0), (1.0, 3.0)):
                ticks = np.outer(powers, subs).ravel()
                shown = np.count_nonzero((ticks >= low) & (ticks <= high))
                if 2 <= shown <= room:
                    return ticks
            return super().tick_values(vmin, vmax)

    ax.xaxis.set_major_locator(WidthLocator())
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _legend_below(ax, ncols=3, **kwargs):
    """Draw the legend of ``ax`` below its x axis, clear of the data.

    The legend's top is anchored below the tick labels and the x label, as
    they stand (measured in points, so that the gap does not depend on the
    size the axes end up with). It has at most ``ncols`` columns, fewer
    where it would be wider than the axes.
    """
    from matplotlib.transforms import offset_copy

    below = 4.0
    extent = ax.xaxis.get_tightbbox()
    if extent is not None and extent.height > 0:
        below += max(ax.bbox.y0 - extent.y0, 0.0) * 72.0 / ax.figure.dpi
    anchor = offset_copy(ax.transAxes, fig=ax.figure, y=-below, units="points")
    kwargs.setdefault("fontsize", "small")
    for n in range(max(ncols, 1), 0, -1):
        legend = ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=anchor,
            ncols=n, **kwargs,
        )  # fmt: skip
        if legend.get_window_extent().width <= ax.bbox.width:
            break
    return legend


def plot_cluster_lifetimes(estimator, ax=None):
    """Plot the lifetime of each count of distinct centres, the chosen one marked.

    One bar per count ``c`` of distinct centres: the range of log-width over
    which the annealing's equilibrium had ``c`` distinct centres
    (``cluster_count_lifetimes_``). With ``n_clusters="auto"`` the longest
    lived count from 2 up is the one chosen (``n_clusters_``); the bar of
    ``n_clusters_`` is drawn in another colour (red). A count that can no
    longer split (an infinite lifetime) is drawn as high as the longest
    finite bar and hatched.

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: one bar (a patch) per count, in the order of the
        counts.

    See Also
    --------
    plot_split_tree : The splits as a dendrogram.
    plot_annealing_path : The centre trajectories against the width.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skrbfkmeans import AnnealedRBFKMeans
    >>> from skrbfkmeans.plotting import plot_cluster_lifetimes
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(c, 0.3, size=(30, 2)) for c in (0, 5, 10)])
    >>> est = AnnealedRBFKMeans("auto", max_clusters=6).fit(X)
    >>> ax = plot_cluster_lifetimes(est)
    >>> est.n_clusters_, len(ax.patches)
    (3, 6)
    """
    _check_annealed(estimator, "plot_cluster_lifetimes")
    if ax is None:
        ax = _new_axes()
    lifetimes = np.asarray(estimator.cluster_count_lifetimes_, dtype=np.float64)
    counts = np.arange(1, lifetimes.size + 1)
    finite = lifetimes[np.isfinite(lifetimes)]
    top = finite.max() if finite.size and finite.max() > 0 else 1.0
    heights = np.where(np.isfinite(lifetimes), lifetimes, top)
    chosen = counts == estimator.n_clusters_
    bars = ax.bar(counts, heights, color=np.where(chosen, "C3", "C0"))
    for bar, lifetime in zip(bars, lifetimes):
        if np.isinf(lifetime):
            bar.set_hatch("//")
    ax.set_xticks(counts)
    ax.set_xlabel("number of distinct centres")
    ax.set_ylabel(r"lifetime: range of $\log \sigma$")
    margin = getattr(estimator, "cluster_count_margin_", None)
    if estimator.n_clusters == "auto" and margin is not None and margin <= 1:
        title = (
            f"no count stands out (by at most one cooling step): "
            f"{estimator.n_clusters_} is a fallback"
        )
    elif estimator.n_clusters == "auto":
        by = "" if margin is None or np.isinf(margin) else f" (by {margin:.2g} steps)"
        title = f"chosen: {estimator.n_clusters_} clusters, the longest-lived count{by}"
    else:
        title = f"{estimator.n_clusters_} clusters requested"
    ax.set_title(title)
    return ax


def plot_split_tree(estimator, ax=None, **kwargs):
    """Draw the splits of an annealing run as a dendrogram.

    ``split_linkage_`` drawn by :func:`scipy.cluster.hierarchy.dendrogram`:
    leaf ``i`` is cluster ``i`` (label ``i``) and two clusters join at the
    width of the split that separated them. A cluster moved by the polish
    (``n_polish_moves_``) joins the cluster it split at the final width, a
    height that is bookkeeping, not a width at which the data split: those
    joins are drawn dotted in black with a circle at the join, and the
    legend, below the axes, says so.

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator with at least two clusters.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.
    **kwargs
        Passed to :func:`scipy.cluster.hierarchy.dendrogram` (for example
        ``orientation`` or ``color_threshold``).

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on (width axis linear, from 0); the leaves are
        labelled with the cluster indices. The title counts the splits made
        while annealing, those of the polish and, after an explicit
        ``init``, the clusters apart from the start.

    See Also
    --------
    plot_cluster_lifetimes : The lifetime of each count of centres.
    plot_annealing_path : The centre trajectories against the width.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skrbfkmeans import AnnealedRBFKMeans
    >>> from skrbfkmeans.plotting import plot_split_tree
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(c, 0.3, size=(30, 2)) for c in (0, 5, 10)])
    >>> est = AnnealedRBFKMeans(3).fit(X)
    >>> ax = plot_split_tree(est)
    >>> sorted(t.get_text() for t in ax.get_xticklabels())
    ['0', '1', '2']
    >>> print(ax.get_title())
    Split tree of 3 clusters
    2 splits while annealing
    """
    _check_annealed(estimator, "plot_split_tree")
    Z = np.asarray(estimator.split_linkage_)
    if Z.shape[0] == 0:
        raise ValueError("plot_split_tree needs at least two clusters; got one.")
    from scipy.cluster.hierarchy import dendrogram

    if ax is None:
        ax = _new_axes()
    kwargs.setdefault("labels", [str(i) for i in range(Z.shape[0] + 1)])
    n_drawn = len(ax.collections)
    dendrogram(Z, ax=ax, **kwargs)
    horizontal = kwargs.get("orientation", "top") in ("left", "right")
    width_label = r"width $\sigma$ at which the clusters split"
    (ax.set_xlabel if horizontal else ax.set_ylabel)(width_label)
    (ax.set_ylabel if horizontal else ax.set_xlabel)("cluster (label)")

    annealing, polish = _join_kinds(estimator, Z[:, 2])
    counts = [_plural(int(annealing.sum()), "split") + " while annealing"]
    if polish.any():
        counts.append(f"{int(polish.sum())} by the polish")
        height = Z[polish, 2][0]
        handles = _restyle_polish_joins(
            ax, ax.collections[n_drawn:], height, horizontal
        )
        _legend_below(ax, handles=handles)
    start = Z.shape[0] - int(annealing.sum()) - int(polish.sum())
    if start:
        counts.append(f"{start} apart from the start (given init)")
    ax.set_title(f"Split tree of {Z.shape[0] + 1} clusters\n" + ", ".join(counts))
    return ax


def _join_kinds(estimator, heights):
    """Return which joins of the split tree are the annealing's, the polish's.

    Returns two boolean masks over ``heights`` (the linkage's). A split of
    the annealing joins at one of ``critical_sigmas_``; the moves of the
    polish join at the final width, below every width of the annealing, so
    they are the lowest of the other joins; what is left was apart from the
    start (an explicit ``init``).
    """
    annealing = np.isin(heights, np.asarray(estimator.critical_sigmas_))
    polish = np.zeros_like(annealing)
    if getattr(estimator, "n_polish_moves_", 0) and not annealing.all():
        polish = ~annealing & (heights == heights[~annealing].min())
    return annealing, polish


def _restyle_polish_joins(ax, collections, height, horizontal):
    """Draw the joins at ``height`` (the polish's) apart from the splits.

    ``collections`` are the dendrogram's: its links at ``height`` are taken
    out of them and drawn dotted in black, with a circle at each join.
    Returns the legend's handles: a split of the annealing, a polish join.
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    along = 0 if horizontal else 1  # the coordinate of the width
    moved = []
    for collection in collections:
        segments = collection.get_segments()
        moved += [seg for seg in segments if seg[1, along] == height]
        collection.set_segments([seg for seg in segments if seg[1, along] != height])
    style = {"color": "k", "linestyle": ":", "linewidth": 1.5}
    marker = {"marker": "o", "markerfacecolor": "w", "markeredgecolor": "k"}
    if moved:  # unless truncate_mode left them out
        ax.add_collection(LineCollection(moved, **style))
        joins = np.array([seg[1:3].mean(axis=0) for seg in moved])
        # Not clipped: a join at the final width sits on the axis.
        ax.plot(*joins.T, linestyle="none", clip_on=False, **marker)
    polish = "split by the polish (at the final width)"
    return [
        Line2D(
            [], [], color="0.3", label="split while annealing (at its critical width)"
        ),
        Line2D([], [], **style, **marker, label=polish),
    ]


def plot_responsibilities(estimator, X, ax=None, *, threshold=0.9):
    """Plot 2-D data coloured by its soft assignment to the centres.

    Each centre gets a colour; each sample is drawn in the mixture of the
    centres' colours weighted by its responsibilities (``predict_proba``), so
    that one-hot samples have their centre's colour and soft ones a blend.
    The centres are drawn as crosses in their colours.

    Parameters
    ----------
    estimator : RBFKMeans or AnnealedRBFKMeans
        A fitted estimator with ``predict_proba``.
    X : array-like of shape (n_samples, 2)
        Two-dimensional data.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.
    threshold : float, default=0.9
        The title counts the samples whose largest responsibility is below
        ``threshold``: the samples shared between centres. Softmax gives
        every centre a positive share, so that no sample is exactly
        one-hot; ``threshold=1`` counts the samples that are not one-hot,
        which is meaningful for entmax-1.5 (exact zeros).

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: one scatter collection for the samples, then one
        for the centres. The title names the map and the width, and counts
        the samples whose largest responsibility is below ``threshold``.

    See Also
    --------
    plot_annealing_path : The path of an annealing run.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from skrbfkmeans import RBFKMeans
    >>> from skrbfkmeans.plotting import plot_responsibilities
    >>> X = np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 0.0],
    ...               [10.0, 2.0], [10.0, 4.0], [10.0, 0.0]])
    >>> est = RBFKMeans(n_clusters=2, activation="entmax15", random_state=0).fit(X)
    >>> ax = plot_responsibilities(est, X)
    >>> len(ax.collections)
    2
    >>> print(ax.get_title())
    entmax15, sigma = 2.3
    0 of 6 samples with largest responsibility < 0.9
    """
    check_is_fitted(estimator)
    X = check_array(X, dtype=[np.float64, np.float32])
    if X.shape[1] != 2:
        raise ValueError(
            f"plot_responsibilities draws 2-D data; X has {X.shape[1]} features."
        )
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1]; got {threshold!r}.")
    if ax is None:
        ax = _new_axes()
    resp = estimator.predict_proba(X)
    centers = np.asarray(estimator.cluster_centers_)
    palette = _palette(centers.shape[0])
    # A convex combination of the centres' colours: one-hot rows keep their
    # centre's colour exactly. Clip the rounding of rows that sum to 1 + ulp.
    colors = np.clip(resp @ palette, 0.0, 1.0)
    ax.scatter(X[:, 0], X[:, 1], c=colors, s=12, linewidths=0, label="samples")
    ax.scatter(
        centers[:, 0],
        centers[:, 1],
        c=palette,
        marker="X",
        s=120,
        edgecolors="k",
        label="centres",
    )
    activation = getattr(estimator, "activation_path_", None)
    activation = estimator.activation if activation is None else activation[-1]
    n_shared = int((resp.max(axis=1) < threshold).sum())
    ax.set_title(
        f"{activation}, sigma = {estimator.sigma_:.3g}\n{n_shared} of "
        f"{X.shape[0]} samples with largest responsibility < {threshold:g}"
    )
    names = getattr(estimator, "feature_names_in_", ["feature 0", "feature 1"])
    ax.set_xlabel(str(names[0]))
    ax.set_ylabel(str(names[1]))
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize="small")
    return ax
