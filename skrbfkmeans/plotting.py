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

    return plt.subplots()[1]


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
    final width.

    Parameters
    ----------
    estimator : AnnealedRBFKMeans
        A fitted estimator (with ``sigma_path_``, ``centers_path_`` and
        ``critical_sigmas_``).
    ax : matplotlib Axes, default=None
        Axes to draw on; a new figure is created when ``None``.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: ``n_clusters`` trajectory lines, then one
        vertical line per critical width, then one at ``sigma_``.

    See Also
    --------
    plot_responsibilities : 2-D data coloured by soft assignment.

    Notes
    -----
    Coincident copies of a centre (before it splits) draw on top of each
    other, so the picture shows the splitting tree. Projecting on the first
    principal axis of the final centres keeps the direction along which they
    are most spread; with one feature the feature itself is drawn.

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
    """
    _check_annealed(estimator, "plot_annealing_path")
    if ax is None:
        ax = _new_axes()
    sigmas = np.asarray(estimator.sigma_path_)
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
            label="centre trajectories" if j == 0 else "_nolegend_",
        )
    for i, sigma in enumerate(np.asarray(estimator.critical_sigmas_)):
        ax.axvline(
            sigma,
            color="0.5",
            linestyle="--",
            linewidth=0.8,
            label="critical widths (splits)" if i == 0 else "_nolegend_",
        )
    certified = getattr(estimator, "certified_", False)
    ax.axvline(
        estimator.sigma_,
        color="k",
        linewidth=0.8,
        label="final width (certified)" if certified else "final width",
    )
    ax.set_xscale("log")
    # Cooling runs left to right.
    if not ax.xaxis_inverted():
        ax.invert_xaxis()
    ax.set_xlabel(r"width $\sigma$ (cooling $\rightarrow$)")
    ax.set_ylabel("centre position on the first principal axis")
    ax.set_title(
        f"{position.shape[1]} centres, {sigmas.size} stages, "
        f"{np.asarray(estimator.critical_sigmas_).size} splits"
    )
    ax.legend(fontsize="small")
    return ax


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
    if estimator.n_clusters == "auto":
        title = f"chosen: {estimator.n_clusters_} clusters, the longest-lived count"
    else:
        title = f"{estimator.n_clusters_} clusters requested"
    ax.set_title(title)
    return ax


def plot_split_tree(estimator, ax=None, **kwargs):
    """Draw the splits of an annealing run as a dendrogram.

    ``split_linkage_`` drawn by :func:`scipy.cluster.hierarchy.dendrogram`:
    leaf ``i`` is cluster ``i`` (label ``i``) and two clusters join at the
    width of the split that separated them (a polish move joins at the
    final width).

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
        labelled with the cluster indices.

    See Also
    --------
    plot_cluster_lifetimes : The lifetime of each count of centres.

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
    """
    _check_annealed(estimator, "plot_split_tree")
    Z = np.asarray(estimator.split_linkage_)
    if Z.shape[0] == 0:
        raise ValueError("plot_split_tree needs at least two clusters; got one.")
    from scipy.cluster.hierarchy import dendrogram

    if ax is None:
        ax = _new_axes()
    kwargs.setdefault("labels", [str(i) for i in range(Z.shape[0] + 1)])
    dendrogram(Z, ax=ax, **kwargs)
    horizontal = kwargs.get("orientation", "top") in ("left", "right")
    width_label = r"width $\sigma$ at which the clusters split"
    (ax.set_xlabel if horizontal else ax.set_ylabel)(width_label)
    (ax.set_ylabel if horizontal else ax.set_xlabel)("cluster (label)")
    return ax


def plot_responsibilities(estimator, X, ax=None):
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

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on: one scatter collection for the samples, then one
        for the centres. The title counts the samples that are not one-hot.

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
    >>> len(ax.collections), ax.get_title()
    (2, 'entmax15, sigma = 2.3: 0 of 6 samples soft')
    """
    check_is_fitted(estimator)
    X = check_array(X, dtype=[np.float64, np.float32])
    if X.shape[1] != 2:
        raise ValueError(
            f"plot_responsibilities draws 2-D data; X has {X.shape[1]} features."
        )
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
    n_soft = int((resp.max(axis=1) < 1).sum())
    ax.set_title(
        f"{activation}, sigma = {estimator.sigma_:.3g}: "
        f"{n_soft} of {X.shape[0]} samples soft"
    )
    names = getattr(estimator, "feature_names_in_", ["feature 0", "feature 1"])
    ax.set_xlabel(str(names[0]))
    ax.set_ylabel(str(names[1]))
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize="small")
    return ax
