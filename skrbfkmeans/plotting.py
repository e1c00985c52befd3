"""Plots of fitted estimators (needs matplotlib: ``pip install skrbfkmeans[plot]``).

matplotlib is imported inside the functions, so that ``import skrbfkmeans``
and ``import skrbfkmeans.plotting`` work, and stay fast, without it.

The legends are drawn below the axes, where they hide no data. So that
``fig, ax = plt.subplots(); plot_...(est, ax=ax); fig.savefig(...)`` saves
them, a figure without a layout engine is given the constrained one, which
makes room for them; axes placed by hand (``fig.add_axes``) get the legend
inside.
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


def _make_room(ax):
    """Whether the figure of ``ax`` makes room for what is drawn outside it.

    A figure without a layout engine (``plt.subplots()``) saves only what
    lies inside its axes' fixed frame: a legend below the axes is cut off.
    Such a figure gets the constrained layout, which shrinks the axes to
    make room, as a new figure has; axes placed by hand (``add_axes``) are
    left alone, and ``False`` says the legend must go inside them.
    """
    # A subfigure lays out with its parent; ax.figure may be either.
    figure = getattr(ax.figure, "figure", None) or ax.figure
    if figure.get_layout_engine() is not None:
        return True
    if ax.get_subplotspec() is None:
        return False
    figure.set_layout_engine("constrained")
    return True


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

    Each final cluster is drawn from its birth: its position along the first
    principal axis of the final centres against the width of every stage,
    on a log axis that runs from hot (left) to cold (right). A cluster that
    split off starts at the position of the group it split from, at the
    critical width of the split; its line and its leg of the split tree
    (:func:`plot_split_tree`) have the same colour. Dashed vertical lines
    mark the critical widths; a solid one marks the final width. The legend
    is drawn below the axes, where it hides no trajectory; a figure without
    a layout engine gets the constrained one, to make room for it (axes
    placed by hand get the legend inside).

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator (with ``sigma_path_``, ``centers_path_``,
        ``critical_sigmas_`` and ``split_linkage_``).
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: one line per cluster (label ``i`` is cluster
        ``i``; the lines of the splits of the polish dotted, ending in a
        circle), then, if any, one line of markers only for the centres of
        the path that no final cluster descends from, then one vertical line
        per critical width and one at ``sigma_``. The title counts the
        centres and stages, and the splits as :func:`plot_split_tree` does;
        a second line counts the other splits, undone on the way.

    See Also
    --------
    plot_responsibilities : 2-D data coloured by soft assignment.
    plot_split_tree : The splits as a dendrogram.

    Notes
    -----
    The lineage of each cluster is the split tree's (``split_linkage_``):
    at the stage of width ``sigma``, the clusters whose split width is at
    most ``sigma`` are still one group, drawn as one line (that of the
    cluster of smallest index); the splits of the polish join their two
    sides up to the last stage of the annealing, and clusters apart from
    the start (an explicit ``init``) are apart at every stage. Each group
    is drawn at the centre of the path nearest to where its clusters are
    at the next stage, one group per centre, from the coldest stage back.

    The path can split more often than the tree says: groups that came back
    together merged, groups that lost their samples were dropped, and each
    move of the polish takes a cluster out of the tree and splits it off
    another at the final width. The centres of the path that no final
    cluster descends from are drawn as grey dots. Projecting on the first
    principal axis of the final centres keeps the direction along which
    they are most spread; with one feature the feature itself is drawn.

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
    2 centres, ... stages: 1 split while annealing
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
    origin = path[0].mean(axis=0)
    lines, strays = _lineages(estimator)
    palette = _palette(path.shape[1])
    polish_style = {"linestyle": ":", "marker": "o", "markerfacecolor": "w"}
    for j, (first, positions, by_polish) in enumerate(lines):
        style = {"marker": ".", "linestyle": "-"}
        if by_polish:
            style = dict(polish_style, markevery=[len(positions) - 1])
        ax.plot(
            sigmas[first:],
            (positions - origin) @ axis,
            color=palette[j],
            label=str(j),
            **style,
        )
    if strays:
        stages, points = zip(*strays)
        ax.plot(
            sigmas[list(stages)],
            (np.array(points) - origin) @ axis,
            linestyle="none",
            marker=".",
            color="0.6",
            label="_centres undone",
        )
    for i, sigma in enumerate(critical):
        ax.axvline(
            sigma,
            color="0.5",
            linestyle="--",
            linewidth=0.8,
            label="_split" if i else "_splits",
        )
    certified = getattr(estimator, "certified_", False)
    ax.axvline(estimator.sigma_, color="k", linewidth=0.8, label="_final width")
    ax.set_xscale("log")
    _label_log_widths(ax.xaxis)
    # Cooling runs left to right.
    if not ax.xaxis_inverted():
        ax.invert_xaxis()
    ax.set_xlabel(r"width $\sigma$ (cooling $\rightarrow$)")
    ax.set_ylabel("centre position on the first principal axis")
    ax.set_title(_path_title(estimator, len(lines), sigmas.size, critical.size))
    _path_legend(ax, palette[0], critical.size, bool(strays), certified, lines)
    return ax


def _path_legend(ax, color, n_critical, strays, certified, lines):
    """Draw the legend of :func:`plot_annealing_path`: one entry per kind of line.

    The clusters' lines are labelled by their index (for ``get_lines``);
    the legend shows one proxy for them all. Entries the caller drew before
    join the legend.
    """
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    ours = {str(j) for j in range(len(lines))}
    kept = [(h, lab) for h, lab in zip(handles, labels) if lab not in ours]
    proxies = [
        Line2D([], [], color=color, marker=".", label="a cluster, from its birth")
    ]
    if any(by_polish for _, _, by_polish in lines):
        proxies.append(
            Line2D(
                [], [], color=color, linestyle=":", marker="o",
                markerfacecolor="w", label="split off by the polish",
            )
        )  # fmt: skip
    if strays:
        proxies.append(
            Line2D(
                [], [], color="0.6", linestyle="none", marker=".",
                label="centres merged back, dropped or moved",
            )
        )  # fmt: skip
    if n_critical:
        proxies.append(
            Line2D(
                [], [], color="0.5", linestyle="--", linewidth=0.8,
                label="splits (critical widths)",
            )
        )  # fmt: skip
    final = "final width (certified)" if certified else "final width"
    proxies.append(Line2D([], [], color="k", linewidth=0.8, label=final))
    handles = [h for h, _ in kept] + proxies
    n = len(handles)
    _legend_below(ax, handles=handles, ncols=2 if n == 4 else min(n, 3))


def _lineages(estimator):
    """Return the line of each cluster of an annealing run, and the stray centres.

    The lines follow the split tree (see the Notes of
    :func:`plot_annealing_path`). Returns ``(lines, strays)``: ``lines[j]``
    is ``(first, positions, by_polish)``, cluster ``j`` drawn from stage
    ``first`` (the stage before it is apart: where it splits off, at the
    position of its group) at ``positions``, of shape ``(n_stages - first,
    n_features)``, and whether the polish split it off; ``strays`` lists
    ``(stage, centre)`` for the centres of the path left to no cluster.
    """
    from scipy.optimize import linear_sum_assignment

    Z = np.asarray(estimator.split_linkage_)
    path = np.asarray(estimator.centers_path_, dtype=np.float64)
    sigmas = np.asarray(estimator.sigma_path_)
    n_stages, n = path.shape[0], path.shape[1]
    annealing, polish = _join_kinds(estimator, Z[:, 2])
    # at[s, j]: the point of stage s of the group that cluster j is drawn in
    # (its representative's); rep[s, j]: that representative.
    at = np.array(path)
    rep = np.tile(np.arange(n), (n_stages, 1))
    strays = []
    for s in range(n_stages - 2, -1, -1):
        # At a stage of the annealing a split of width h has not yet
        # happened if h <= sigma; a split of the polish happens after it.
        rep[s] = _representatives(Z, n, (annealing & (Z[:, 2] <= sigmas[s])) | polish)
        reps = np.unique(rep[s])
        centres = np.unique(path[s], axis=0)
        # The distance of each centre to the nearest point, at the next
        # stage, of the clusters of each group.
        gaps = np.linalg.norm(at[s + 1][:, None, :] - centres[None, :, :], axis=2)
        cost = np.array([gaps[rep[s] == r].min(axis=0) for r in reps])
        rows, cols = linear_sum_assignment(cost)
        chosen = np.full(reps.size, -1)
        chosen[rows] = cols
        # More groups than centres (the tree kept a split the path undid):
        # the extra groups sit on the nearest centre.
        left = chosen < 0
        chosen[left] = cost[left].argmin(axis=1)
        at[s] = centres[chosen[np.searchsorted(reps, rep[s])]]
        strays += [(s, centres[c]) for c in np.setdiff1d(np.arange(len(centres)), cols)]
    by_polish = set(_born(Z, n)[polish].tolist())
    lines = []
    for j in range(n):
        # The first stage where j draws its own group, less one: the stage
        # it splits off from, drawn at its group's point there.
        own = np.flatnonzero(rep[:, j] == j)[0]
        first = max(own - 1, 0)
        lines.append((first, at[first:, j], j in by_polish))
    return lines, strays


def _smallest_below(Z, n):
    """Return the smallest cluster below each node of the linkage ``Z``.

    Nodes are numbered as SciPy does: the ``n`` clusters, then row ``r``'s
    join as ``n + r``. Returns an array of ``2 n - 1`` cluster indices.
    """
    smallest = list(range(n))
    for a, b in Z[:, :2].astype(np.intp):
        smallest.append(min(smallest[a], smallest[b]))
    return np.array(smallest, dtype=np.intp)


def _born(Z, n):
    """Return the cluster that each row of the linkage ``Z`` splits off.

    A row joins two groups, each drawn as its smallest cluster; the group
    whose smallest cluster is the larger splits off the other. Returns an
    array of ``n - 1`` cluster indices, one per row.
    """
    smallest = _smallest_below(Z, n)
    return smallest[Z[:, :2].astype(np.intp)].max(axis=1)


def _representatives(Z, n, united):
    """Return each cluster's group, as its smallest cluster, rows ``united`` joined.

    ``Z`` is a SciPy linkage matrix over ``n`` clusters; row ``r`` joins its
    two nodes when ``united[r]``. Returns an array of ``n`` cluster indices.
    The rows are sorted by width and the callers unite a row only when they
    unite every row below it (the splits of the polish, always united, are
    the lowest; those of the start, never, the highest), so that each side
    of a united row is one group.
    """
    members = [[i] for i in range(n)]
    rep = np.arange(n)
    for r, (a, b) in enumerate(Z[:, :2].astype(np.intp)):
        both = members[a] + members[b]
        members.append(both)
        if united[r]:
            rep[both] = rep[both].min()
    return rep


def _plural(count, noun):
    """``"1 split"``, ``"2 splits"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _split_counts(estimator, Z):
    """Return the counts of the split tree's joins, as both titles give them.

    ``"7 splits while annealing, 2 by the polish"``, and the clusters apart
    from the start after an explicit ``init``; see :func:`_join_kinds`.
    """
    annealing, polish = _join_kinds(estimator, Z[:, 2])
    counts = [_plural(int(annealing.sum()), "split") + " while annealing"]
    if polish.any():
        counts.append(f"{int(polish.sum())} by the polish")
    start = Z.shape[0] - int(annealing.sum()) - int(polish.sum())
    if start:
        counts.append(f"{start} apart from the start (given init)")
    return ", ".join(counts)


def _path_title(estimator, n_centers, n_stages, n_splits):
    """Return the title of :func:`plot_annealing_path`: what happened on the path.

    The first line counts the splits as the split tree's title does; every
    other split of the path (``n_splits`` in all) was undone on the way: a
    group that merged back or was dropped, or a cluster the polish moved.
    """
    Z = np.asarray(estimator.split_linkage_)
    title = (
        f"{n_centers} centres, {_plural(n_stages, 'stage')}: "
        f"{_split_counts(estimator, Z)}"
    )
    annealing, _ = _join_kinds(estimator, Z[:, 2])
    undone = n_splits - int(annealing.sum())
    if undone > 0:
        title += (
            f"\n{_plural(undone, 'other split')} undone "
            "(merged back, dropped or moved by the polish)"
        )
    return title


def _label_log_widths(axis):
    """Label enough ticks of the log width ``axis`` to read the widths off.

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

    axis.set_major_locator(WidthLocator())
    axis.set_major_formatter(StrMethodFormatter("{x:g}"))
    axis.set_minor_formatter(NullFormatter())


def _legend_below(ax, ncols=3, **kwargs):
    """Draw the legend of ``ax`` below its x axis, clear of the data.

    The legend's top is anchored below the tick labels and the x label, as
    they stand (measured in points, so that the gap does not depend on the
    size the axes end up with). It has at most ``ncols`` columns, fewer
    where it would be wider than the axes. Where the figure cannot make
    room below the axes (:func:`_make_room`), the legend goes inside them,
    where it hides the least.
    """
    from matplotlib.transforms import offset_copy

    if not _make_room(ax):
        kwargs.setdefault("fontsize", "small")
        return ax.legend(loc="best", **kwargs)
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
    (``cluster_count_lifetimes_``). The bar of ``n_clusters_``, chosen or
    requested, is drawn in another colour (red).

    With ``n_clusters="auto"`` the same exploration ran on structureless
    references (``cluster_count_reference_lifetimes_``): their mean
    lifetime of each count is drawn on its bar, a black tick on a line from
    the smallest to the largest reference's. The count chosen is the
    smallest whose cumulative gap (``cluster_count_gap_``: the data's
    lifetimes less the references' mean, summed from 2 clusters up) is
    within tolerance of the largest; one cluster when no count's gap beats
    the references.

    A count whose lifetime did not end in a split is open-ended: with
    ``"auto"``, a count that can no longer split (an infinite lifetime);
    with an integer ``n_clusters``, the count the schedule ends with, which
    lives until the schedule stops, whatever the data. Its bar is not a
    lifetime: it is drawn hatched and pale, as high as the longest of the
    other bars, and the legend, below the axes, says so.

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
        counts; with references, their mean lifetimes as a line
        (``ax.lines[0]``, one point per count) and their ranges as an
        error bar collection.

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
    matplotlib = _import_matplotlib()
    lifetimes = np.asarray(estimator.cluster_count_lifetimes_, dtype=np.float64)
    counts = np.arange(1, lifetimes.size + 1)
    auto = estimator.n_clusters == "auto"
    open_ended = np.isinf(lifetimes)
    if not auto:
        # The schedule stops splitting at n_clusters: the count it ends
        # with lives until the schedule stops.
        last = int(np.asarray(estimator.n_distinct_centers_path_)[-1])
        open_ended[last - 1] = True
    closed = lifetimes[~open_ended]
    top = closed.max() if closed.size and closed.max() > 0 else 1.0
    heights = np.where(open_ended, top, lifetimes)
    chosen = counts == estimator.n_clusters_
    colors = [matplotlib.colors.to_rgb("C3" if c else "C0") for c in chosen]
    bars = ax.bar(counts, heights, color=colors)
    for bar, color, is_open in zip(bars, colors, open_ended):
        if is_open:
            bar.set_facecolor((*color, 0.3))
            bar.set_edgecolor(color)
            bar.set_hatch("//")
    references = _reference_lifetimes(estimator)
    if references is not None:
        _draw_references(ax, counts, references)
    ax.set_xticks(counts)
    ax.set_xlabel("number of distinct centres")
    ax.set_ylabel(r"lifetime: range of $\log \sigma$")
    ax.set_title(_lifetimes_title(estimator, references is not None))
    _lifetimes_legend(ax, auto, open_ended.any(), references is not None)
    return ax


def _reference_lifetimes(estimator):
    """Return the references' lifetimes of an auto fit (rows), ``None`` if none ran."""
    references = getattr(estimator, "cluster_count_reference_lifetimes_", None)
    if references is None or np.asarray(references).shape[0] == 0:
        return None
    return np.asarray(references, dtype=np.float64)


def _draw_references(ax, counts, references):
    """Draw the references' mean lifetime per count and their range on the bars."""
    mean = references.mean(axis=0)
    # The mean of equal lifetimes may round past them: no negative bar.
    below = np.maximum(mean - references.min(axis=0), 0.0)
    above = np.maximum(references.max(axis=0) - mean, 0.0)
    ax.errorbar(
        counts, mean, yerr=[below, above], fmt="_", color="k",
        markersize=8, elinewidth=1, capsize=0, linestyle="none",
    )  # fmt: skip


def _lifetimes_title(estimator, references):
    """Return the title of :func:`plot_cluster_lifetimes` (``references``: drawn)."""
    k = estimator.n_clusters_
    margin = getattr(estimator, "cluster_count_margin_", None)
    if estimator.n_clusters != "auto":
        return f"{k} clusters requested: the schedule splits no further"
    if references:
        if k == 1:
            return "no count beats the structureless references: 1 cluster (fallback)"
        if margin is not None and margin <= 1:
            return (
                f"chosen: {k} clusters, uncertain (gap over the references "
                f"rises by {margin:.2g} steps)"
            )
        by = ""
        if margin is not None and not np.isinf(margin):
            by = f" (rises by {margin:.2g} steps)"
        return f"chosen: {k} clusters, the gap over the references{by}"
    if margin is not None and margin <= 1:
        return f"no count stands out (by at most one cooling step): {k} is a fallback"
    by = "" if margin is None or np.isinf(margin) else f" (by {margin:.2g} steps)"
    return f"chosen: {k} clusters, the longest-lived count{by}"


def _lifetimes_legend(ax, auto, open_ended, references=False):
    """Say below the axes what the red and the hatched bars and the ticks are."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color="C0", label="lifetime (ended by a split)"),
        Patch(color="C3", label="chosen count" if auto else "requested count"),
    ]
    if references:
        handles.append(
            Line2D(
                [],
                [],
                color="k",
                marker="_",
                markersize=8,
                label="structureless references: mean lifetime and range",
            )  # fmt: skip
        )
    if open_ended:
        label = (
            "open-ended: can split no further (drawn as high as the longest)"
            if auto
            else "open-ended: cut at the end of the schedule, not a lifetime"
        )
        handles.append(
            Patch(
                facecolor=(0.5, 0.5, 0.5, 0.3), edgecolor="0.5", hatch="//", label=label
            )
        )
    _legend_below(ax, handles=handles, ncols=1)


def plot_split_tree(estimator, ax=None, **kwargs):
    """Draw the splits of an annealing run as a dendrogram.

    ``split_linkage_`` laid out by :func:`scipy.cluster.hierarchy.dendrogram`:
    leaf ``i`` is cluster ``i`` (label ``i``) and two groups join at the
    width of the split that separated them, on a log width axis, as in
    :func:`plot_annealing_path`. Each cluster's leg, from its leaf up to
    the join where it split off, has the colour of its line in
    :func:`plot_annealing_path`: at a join, the group of the smaller
    cluster goes on in its colour and the other splits off in its own. A
    cluster moved by the polish (``n_polish_moves_``) joins the cluster it
    split at the final width, far below the critical widths (the log axis
    shows it): its leg is dotted, with a circle where it splits off. The
    legend, below the axes, says so.

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator with at least two clusters.
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.
    **kwargs
        Passed to :func:`scipy.cluster.hierarchy.dendrogram` (for example
        ``orientation`` or ``labels``). With ``color_threshold`` or
        ``link_color_func`` the links take SciPy's colours instead, one per
        link.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on (width axis logarithmic); the leaves are labelled
        with the cluster indices. The links are one collection of solid
        segments (two legs and a bar per join), then, with splits of the
        polish, one of dotted legs and one line per circle (a marker in the
        colour of its leg). The title
        counts the splits made while annealing, those of the polish and,
        after an explicit ``init``, the clusters apart from the start.

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
    n = Z.shape[0] + 1
    kwargs.setdefault("labels", [str(i) for i in range(n)])
    lineage = "color_threshold" not in kwargs and "link_color_func" not in kwargs
    if lineage:
        kwargs["link_color_func"] = lambda k: "k"
    n_drawn = len(ax.collections)
    layout = dendrogram(Z, ax=ax, **kwargs)
    # Redrawn below leg by leg, in the colours of the clusters.
    for collection in ax.collections[n_drawn:]:
        collection.remove()
    orientation = kwargs.get("orientation", "top")
    horizontal = orientation in ("left", "right")
    _, polish = _join_kinds(estimator, Z[:, 2])
    handles = _draw_tree_links(ax, Z, layout, polish, horizontal, lineage)
    width_label = r"width $\sigma$ at which the clusters split"
    (ax.set_xlabel if horizontal else ax.set_ylabel)(width_label)
    (ax.set_ylabel if horizontal else ax.set_xlabel)("cluster (label)")
    heights = Z[:, 2]
    if (heights > 0).all():
        # The joins of the polish sit at the final width, decades below the
        # critical widths: only a log axis shows both.
        low, high = heights.min() / 1.5, heights.max() * 1.5
        width_axis = ax.xaxis if horizontal else ax.yaxis
        (ax.set_xscale if horizontal else ax.set_yscale)("log")
        limits = (high, low) if orientation in ("left", "bottom") else (low, high)
        (ax.set_xlim if horizontal else ax.set_ylim)(*limits)
        _label_log_widths(width_axis)
    if handles:
        _legend_below(ax, handles=handles, ncols=1)
    ax.set_title(f"Split tree of {n} clusters\n" + _split_counts(estimator, Z))
    return ax


def _draw_tree_links(ax, Z, layout, polish, horizontal, lineage):
    """Draw the links of the dendrogram ``layout`` of ``Z``, leg by leg.

    With ``lineage``, each leg has the colour of the smallest cluster below
    it and each bar that of the group (see :func:`_born`); otherwise each
    link keeps SciPy's colour. The leg that a split of the polish (rows
    ``polish``) splits off is dotted, with a circle at its top. Returns the
    legend's handles (none without ``lineage`` or splits of the polish).
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    n = Z.shape[0] + 1
    palette = _palette(n)
    # The x of each node (leaves at 5, 15, ...; a join midway between its
    # two nodes), to find which row each drawn link is.
    x = {int(leaf): 5.0 + 10.0 * i for i, leaf in enumerate(layout["leaves"])}
    smallest, born = _smallest_below(Z, n), _born(Z, n)
    row_of = {}
    for r, (a, b) in enumerate(Z[:, :2].astype(np.intp)):
        if a in x and b in x:
            x[n + r] = (x[a] + x[b]) / 2
            row_of[(min(x[a], x[b]), max(x[a], x[b]), Z[r, 2])] = (r, a, b)
    solid, solid_colors, dotted, dotted_colors, circles = [], [], [], [], []
    for i, (ic, dc) in enumerate(zip(layout["icoord"], layout["dcoord"])):
        r, a, b = row_of[(ic[0], ic[3], dc[1])]
        left, right = (a, b) if x[a] == ic[0] else (b, a)
        pieces = [
            ([(ic[0], dc[0]), (ic[1], dc[1])], left),
            ([(ic[1], dc[1]), (ic[2], dc[2])], n + r),
            ([(ic[2], dc[2]), (ic[3], dc[3])], right),
        ]
        for points, node in pieces:
            # The top of a leg is where it meets the bar, at the join's width.
            top = (points[0][0], dc[1])
            if horizontal:
                points, top = [(d, i_) for i_, d in points], top[::-1]
            color = palette[smallest[node]] if lineage else layout["color_list"][i]
            if polish[r] and node != n + r and smallest[node] == born[r]:
                # The leg the polish split off: dotted, a circle at its top.
                dotted.append(points)
                dotted_colors.append(color)
                circles.append((top, color))
            else:
                solid.append(points)
                solid_colors.append(color)
    ax.add_collection(LineCollection(solid, colors=solid_colors))
    polish_style = {"linestyle": ":", "linewidth": 1.5}
    marker = {"marker": "o", "markerfacecolor": "w", "linestyle": "none"}
    if dotted:
        ax.add_collection(LineCollection(dotted, colors=dotted_colors, **polish_style))
        for point, color in circles:
            ax.plot(*point, color=color, **marker)
    if not lineage and not dotted:
        return []
    handles = []
    if lineage:
        label = "a cluster, from where it split off (its colour in the annealing path)"
        handles.append(Line2D([], [], color=palette[0], label=label))
    if dotted:
        polish_label = "split off by the polish (at the final width)"
        color = palette[0] if lineage else "k"
        handles.append(
            Line2D([], [], color=color, **polish_style, label=polish_label,
                   marker="o", markerfacecolor="w")
        )  # fmt: skip
    return handles


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
