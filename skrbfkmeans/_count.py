"""The number of clusters for ``n_clusters="auto"``: lifetimes against references.

``anneal_auto`` runs the annealing schedule of ``_anneal`` as for
``max_clusters + 1`` clusters and records the counts of distinct centres
until more than ``max_clusters`` exist (``explore``); ``_anneal.count_lifetimes``
measures how long each count lived. The same exploration runs on
structureless references (``reference_lifetimes``: uniform in the box of
``principal_box``, drawn by ``reference_rows``); ``cumulative_gap`` compares
the two, ``choose_count_gap`` picks the count and ``anneal`` fits that many
clusters. ``count_attributes`` turns the choice into the fitted attributes
and warns when no count beat the references or the choice is uncertain.
``choose_count`` and ``count_margin`` are the longest-lived count alone
(``N_REFERENCES = 0``, for the benchmark's comparison).
"""

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from ._anneal import (
    _Path,
    _run_stages,
    _schedule,
    anneal,
    count_lifetimes,
    counted,
    first_critical_sigma,
)
from ._rows import MemoryRows, weight_sample
from ._validation import warn_user

# The references: how many, and how many rows each (at most; the data's
# weight in samples when smaller). No reference (0, benchmarks only) chooses
# the longest-lived count (``choose_count``) alone.
N_REFERENCES = 3
REFERENCE_ROWS = 1000
# The rule's tolerance on the cumulative gap: the largest of this many
# cooling steps, this many standard errors of the references' and
# TOLERANCE_SHARE of the largest gap. The largest gap must exceed the larger
# of NULL_STEPS cooling steps and NULL_SE standard errors, else no count beat
# the references (one cluster).
TOLERANCE_STEPS = 1.0
TOLERANCE_SE = 1.0
# ... and this share of the largest gap: beyond the number of clusters, a
# blob's first split of its own may outlive the references' splits by a few
# steps (Gaussian blobs split otherwise than uniform boxes).
TOLERANCE_SHARE = 0.15
NULL_STEPS = 3.0
NULL_SE = 2.0


class CountChoice(NamedTuple):
    """What ``anneal_auto`` measured to choose the number of clusters.

    The data's lifetimes are the result's ``count_lifetimes``.
    """

    # How far the chosen count's cumulative gap rises above every smaller
    # count's, in cooling steps (``gap_margin``).
    margin: float
    # The references' lifetimes (one row per reference), the cumulative gap
    # per count, the tolerance the choice used and the threshold the
    # largest gap had to exceed (log-width).
    reference_lifetimes: np.ndarray
    gap: np.ndarray
    tolerance: float
    threshold: float


def principal_box(rows, n_sample):
    """Return the data's principal axes and the uniform box of its variances.

    Returns ``(axes, low, high)``: ``axes`` (r x d, orthonormal rows) from
    the weighted covariance of at most ``n_sample`` rows (``weight_sample``'s
    stratified draw: it depends on the data only), and along each axis the
    interval about the weighted mean, ``high = -low = sqrt(3 v)``, in which
    a uniform draw has the variance ``v`` of every row's coordinate
    (weighted): the references have the data's covariance. The gap
    statistic's reference (b) takes the rows' extent along the axes
    instead; where the data's variances are equal along several axes, those
    axes are any rotation of them, and the extent of a uniform cube along
    rotated axes is up to the square root of their number wider than the
    cube (a uniform box 3 x 1 x 1 x 1 x 1 then looked clustered against
    it). Sparse rows are made dense on the sample only.
    """
    X, w = rows.X, np.asarray(rows.w, dtype=np.float64)
    W = float(w.sum())
    mean = np.asarray(X.T @ w, dtype=np.float64).ravel() / W
    if w.shape[0] > n_sample:
        idx, counts = weight_sample(w, n_sample)
        Xs, ws = X[idx], counts.astype(np.float64)
    else:
        Xs, ws = X, w
    Xs = Xs.toarray() if hasattr(Xs, "toarray") else np.asarray(Xs)
    centred = (Xs.astype(np.float64) - mean) * np.sqrt(ws / ws.sum())[:, None]
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    coords = np.asarray(X @ axes.T.astype(X.dtype), dtype=np.float64)
    coords -= mean @ axes.T
    variance = (w @ coords**2) / W
    half = np.sqrt(3.0 * np.maximum(variance, 0.0))
    return axes, -half, half


def reference_rows(box, n_rows, rng, dtype):
    """Rows drawn uniformly in ``box`` (``principal_box``), unit weights.

    The rows are centred on the box's origin (the data's mean): lifetimes
    do not depend on where the data lie.
    """
    axes, low, high = box
    Z = rng.uniform(low, high, size=(n_rows, low.shape[0]))
    X = np.ascontiguousarray(Z @ axes, dtype=dtype)
    return MemoryRows(X, np.ones(n_rows, dtype=dtype), np.zeros(X.shape[1], dtype))


def explore(rows, max_clusters, settings, sigma_start):
    """Run the exploration; return ``(path, n_iter, lifetimes)``.

    The schedule runs as for ``max_clusters + 1`` clusters until more than
    ``max_clusters`` distinct centres exist, or no group can split (the
    last count then lives for ever).
    """
    sched = _schedule(rows, max_clusters + 1, settings, None, sigma_start)
    path = _Path()
    n_iter, _, _ = _run_stages(
        sched, path, settings, T_end=None, max_count=max_clusters
    )
    stopped = path.n[-1] > max_clusters  # else no group could split further
    lifetimes = count_lifetimes(path.sigma, path.n, max_clusters, open_end=not stopped)
    return path, n_iter, lifetimes


def reference_lifetimes(rows, max_clusters, settings, rng, *, n_references=None,
                        n_rows=None):  # fmt: skip
    """Lifetimes of the exploration on structureless references of the data.

    Each reference is ``n_rows`` rows drawn uniformly in a box along the
    data's principal components (``principal_box``: as the gap statistic's
    reference (b), Tibshirani, Walther and Hastie 2001, with the data's
    variances rather than its extent), at most ``REFERENCE_ROWS`` and no
    more than the data's weight in samples;
    the exploration runs on it with the data's settings from just above its
    own first critical width (no fit after it). Returns an array
    ``(n_references, max_clusters)``; a count that could split no further
    (``inf``) is given the lifetime 0.
    """
    n_references = N_REFERENCES if n_references is None else n_references
    if n_rows is None:
        units = float(np.sum(rows.w)) / settings.mass_unit
        n_rows = int(min(REFERENCE_ROWS, max(max_clusters + 1, round(units))))
    box = principal_box(rows, n_rows)
    ref_settings = settings._replace(verbose=0, mass_unit=1.0)
    out = np.zeros((n_references, max_clusters))
    for b in range(n_references):
        ref = reference_rows(box, n_rows, rng, rows.X.dtype)
        sigma = first_critical_sigma(ref, settings.start_activation)
        _, _, life = explore(ref, max_clusters, ref_settings, sigma)
        out[b] = np.where(np.isinf(life), 0.0, life)
    return out


def cumulative_gap(lifetimes, references):
    """Return the cumulative gap of every count and its standard error.

    ``G(c) = sum_{j=2..c} (L(j) - mean_b R_b(j))`` for ``c = 1 ..
    max_clusters`` (``G(1) = 0``): the log-width the data's exploration
    spends from its first split to the end of count ``c``, beyond the
    references'. ``se(c)`` is the references' standard deviation of
    ``sum_{j=2..c} R_b(j)`` times ``sqrt(1 + 1 / B)`` (as the gap
    statistic's). An infinite lifetime (a count that could split no
    further) makes ``G`` infinite from that count on.
    """
    lifetimes = np.asarray(lifetimes, dtype=np.float64)
    references = np.atleast_2d(np.asarray(references, dtype=np.float64))
    diff = lifetimes.copy()
    diff[0] = 0.0
    diff[1:] -= references[:, 1:].mean(axis=0)
    with np.errstate(invalid="ignore"):
        gap = np.cumsum(diff)
    cum_ref = np.cumsum(references[:, 1:], axis=1)
    B = references.shape[0]
    se = np.zeros(lifetimes.size)
    if B > 1:
        se[1:] = cum_ref.std(axis=0, ddof=1) * np.sqrt(1.0 + 1.0 / B)
    return gap, se


def choose_count_gap(
    gap, se, step, steps=None, se_factor=None, null_steps=None, null_se=None,
    share=None,
):  # fmt: skip
    """Return the smallest count whose gap is within tolerance of the largest.

    The tolerance is the largest of ``steps`` cooling steps (``step`` in
    log-width: the schedule sees counts only at its stages), ``se_factor``
    standard errors of the references at the largest gap and ``share`` of
    the largest gap; a gap short of the largest by the tolerance itself is
    within it. ``G(1) = 0``: one cluster (no structure) is chosen when the
    largest gap does not exceed the *threshold*, the larger of
    ``null_steps`` cooling steps and ``null_se`` standard errors: a
    structureless set's count may outlive its three references' by a step
    or more, and three references estimate their spread poorly. The first
    infinite gap (a count that can split no further) wins. Returns
    ``(count, tolerance, threshold)``.
    """
    steps = TOLERANCE_STEPS if steps is None else steps
    se_factor = TOLERANCE_SE if se_factor is None else se_factor
    null_steps = NULL_STEPS if null_steps is None else null_steps
    null_se = NULL_SE if null_se is None else null_se
    share = TOLERANCE_SHARE if share is None else share
    gap = np.asarray(gap, dtype=np.float64)
    if np.isinf(gap).any():
        return int(np.flatnonzero(np.isinf(gap))[0]) + 1, 0.0, 0.0
    best = int(np.argmax(gap))
    tolerance = max(steps * step, se_factor * float(se[best]), share * gap[best])
    threshold = max(null_steps * step, null_se * float(se[best]))
    if gap[best] <= threshold * (1.0 + 1e-9):
        return 1, tolerance, threshold
    # Lifetimes are sums of whole cooling steps between splits: a gap short
    # of the largest by exactly the tolerance is common, and is within it
    # whatever the rounding of the sums (the slack is far above it and far
    # below a step).
    within = gap >= gap[best] - tolerance * (1.0 + 1e-9)
    return int(np.flatnonzero(within)[0]) + 1, tolerance, threshold


def lifetime_rounding(sigmas, counts, n_max):
    """Bound on the rounding error of each count's lifetime (``count_lifetimes``).

    A step ``log(sigmas[s] / sigmas[s + 1])`` carries the rounding of its
    two widths (each ``sqrt(T / 2)``, relative ``eps / 2``), of their ratio
    and of the log, at most ``eps (2 + |step|)``; adding ``n_c`` steps
    costs at most ``n_c eps L_c`` more, where ``L_c`` is the sum of their
    ``|step|``. Count ``c`` is therefore known to ``eps (2 n_c + (n_c + 1)
    L_c)``. Returns an array over the counts ``1 .. n_max``.
    """
    counts = np.asarray(counts, dtype=np.intp)
    steps = np.abs(np.log(np.asarray(sigmas[:-1]) / np.asarray(sigmas[1:])))
    n_c = np.bincount(counts[:-1] - 1, minlength=n_max)[:n_max]
    L_c = np.bincount(counts[:-1] - 1, weights=steps, minlength=n_max)[:n_max]
    return np.finfo(np.float64).eps * (2 * n_c + (n_c + 1) * L_c)


def choose_count(lifetimes, resolution):
    """Return the longest-lived count from 2 up, or 1 if none lived.

    Lifetimes are known to ``resolution`` (one cooling step in log-width:
    the schedule sees the counts only at its stages), so the counts within
    ``resolution`` of the longest are equally long-lived: the smallest of
    them is chosen. One cluster is chosen only when no other count lived
    at all: its own lifetime is measured from the starting width, which the
    schedule sets just above the first critical width, so it says nothing
    about the data.
    """
    if lifetimes.size < 2 or not np.any(lifetimes[1:] > 0):
        return 1
    longest = lifetimes[1:].max()
    if np.isinf(longest):
        return int(np.argmax(lifetimes[1:])) + 2
    return int(np.flatnonzero(lifetimes[1:] >= longest - resolution)[0]) + 2


def count_margin(lifetimes, chosen, resolution, rounding):
    """How much count ``chosen`` outlives the runner-up, in units of ``resolution``.

    The runner-up is the longest-lived other count from 2 up. Returns 0
    when one cluster was chosen (no count lived) or when the two lifetimes
    differ by no more than their rounding (``rounding``, from
    ``lifetime_rounding``: equal lifetimes computed along different stages
    differ by a few ulps, of either sign), and ``inf`` when no other count
    lived at all or the chosen one never split further.
    """
    if chosen < 2:
        return 0.0
    others = np.delete(np.arange(2, lifetimes.size + 1), chosen - 2)
    if others.size == 0:
        return float("inf")
    runner_up = others[np.argmax(lifetimes[others - 1])]
    life, runner_life = lifetimes[chosen - 1], lifetimes[runner_up - 1]
    if np.isinf(life) or runner_life <= 0:
        return float("inf")
    difference = life - runner_life
    if abs(difference) <= rounding[chosen - 1] + rounding[runner_up - 1]:
        return 0.0
    return float(difference / resolution)


def gap_margin(gap, chosen, step):
    """How far the chosen count's cumulative gap rises above every smaller count's.

    In units of ``step`` (one cooling step): ``(G(chosen) - max_{c <
    chosen} G(c)) / step``, with ``G(1) = 0``. Returns 0 when one cluster
    was chosen and ``inf`` when the chosen count could split no further
    (its gap is infinite).
    """
    if chosen < 2:
        return 0.0
    rise = gap[chosen - 1] - np.max(gap[: chosen - 1])
    return float("inf") if np.isinf(rise) else float(rise / step)


def anneal_auto(rows, max_clusters, settings, *, sigma_start, random_state=None):
    """Anneal, choose the number of clusters against references, fit with it.

    The exploration (``explore``) runs from the weighted mean as for
    ``max_clusters + 1`` clusters and stops at the first stage with more
    than ``max_clusters`` distinct centres (or when no group can split). Up
    to there its path is the path of every fit with at least that many
    clusters (the split decisions do not depend on the number of clusters).
    ``count_lifetimes`` measures each count on it; the same exploration on
    ``N_REFERENCES`` structureless references (``reference_lifetimes``,
    drawn with a seed taken once from ``random_state``) gives the lifetimes
    a count has without structure, ``cumulative_gap`` the difference and
    ``choose_count_gap`` the count; ``anneal`` fits that many clusters. Its
    result is returned with the exploration's lifetimes and the choice
    (``CountChoice``), and the exploration's iterations added to
    ``n_iter``.
    """
    path, n_explore, lifetimes = explore(rows, max_clusters, settings, sigma_start)
    # One cooling step in log-width: sigma^2 is multiplied by ``cooling``.
    step = -0.5 * np.log(settings.cooling)
    references = np.zeros((0, max_clusters))
    gap = np.zeros(max_clusters)
    tolerance = threshold = 0.0
    if lifetimes.size < 2 or not np.any(lifetimes[1:] > 0):
        k = 1  # the data never split: nothing to compare
    elif N_REFERENCES == 0:
        k = choose_count(lifetimes, step)  # the longest-lived count alone
    else:
        rng = np.random.default_rng(_reference_seed(random_state))
        references = reference_lifetimes(rows, max_clusters, settings, rng)
        gap, se = cumulative_gap(lifetimes, references)
        k, tolerance, threshold = choose_count_gap(gap, se, step)
    if N_REFERENCES == 0:
        rounding = lifetime_rounding(path.sigma, path.n, max_clusters)
        margin = count_margin(lifetimes, k, step, rounding)
    else:
        margin = gap_margin(gap, k, step)
    if settings.verbose:
        if k == 1:
            print(
                f"Chose 1 cluster{settings.rows_note}: no count's lifetimes "
                f"beat the structureless references' (largest cumulative gap "
                f"{gap.max():.3g} in log-width, threshold {threshold:.3g}); "
                "annealing with 1."
            )
        else:
            print(
                f"Chose {counted(k, 'cluster')}{settings.rows_note}, the "
                f"smallest count whose cumulative gap over the references "
                f"({gap[k - 1]:.3g} in log-width) is within {tolerance:.3g} "
                f"of the largest; annealing with {k}."
            )
    result = anneal(
        rows, k, settings, init_centers=None, sigma_start=sigma_start, sigma_end=None
    )
    return result._replace(
        n_iter=result.n_iter + n_explore,
        count_lifetimes=lifetimes,
        count_choice=CountChoice(margin, references, gap, tolerance, threshold),
    )


def _reference_seed(random_state):
    """One seed for the references, drawn from the estimator's ``random_state``.

    None gives a fixed seed (0), not the global generator: the fit stays one
    deterministic run, as the annealing is.
    """
    if random_state is None:
        return 0
    return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))


def count_attributes(choice, n_clusters):
    """Return the fitted attributes of the count choice; warn if no count stands out.

    ``choice`` is ``anneal_auto``'s ``CountChoice`` (``None`` when the
    number of clusters was given: no attributes). One cluster chosen says
    that no count's lifetimes beat the structureless references' (or that
    the data never split); a warning says so, as it does when the chosen
    count's cumulative gap rises above every smaller count's by one
    cooling step or less (``margin``).
    """
    if choice is None:
        return {}
    margin = choice.margin
    if n_clusters == 1 and choice.reference_lifetimes.shape[0] == 0:
        warn_user(
            "n_clusters='auto': the data never split (constant data, or "
            "max_clusters=1): one cluster fitted.",
            UserWarning,
        )
    elif n_clusters == 1:
        warn_user(
            "n_clusters='auto': no count of clusters lived longer than on "
            "structureless data (uniform, with the data's variances along its "
            "principal axes): one cluster fitted. Look at cluster_count_gap_ "
            "and cluster_count_lifetimes_ beside "
            "cluster_count_reference_lifetimes_ (for example with "
            "skrbfkmeans.plotting.plot_cluster_lifetimes) and pass n_clusters "
            "if you expect clusters.",
            UserWarning,
        )
    elif margin <= 1.0:
        warn_user(
            f"n_clusters='auto': the chosen {n_clusters} clusters' cumulative "
            f"gap over the structureless references rises above every smaller "
            f"count's by {margin:.3g} cooling steps only; the choice is "
            "uncertain. Look at cluster_count_gap_ (for example with "
            "skrbfkmeans.plotting.plot_cluster_lifetimes) and pass n_clusters.",
            UserWarning,
        )
    return {
        "cluster_count_margin_": margin,
        "cluster_count_reference_lifetimes_": choice.reference_lifetimes,
        "cluster_count_gap_": choice.gap,
        "cluster_count_gap_tolerance_": choice.tolerance,
        "cluster_count_gap_threshold_": choice.threshold,
    }
