"""The number of clusters for ``n_clusters="auto"``: the longest-lived count.

``anneal_auto`` runs the annealing schedule of ``_anneal`` as for
``max_clusters + 1`` clusters and records the counts of distinct centres
until more than ``max_clusters`` exist; ``_anneal.count_lifetimes`` measures
how long each count lived, ``choose_count`` picks one and ``anneal`` fits
that many clusters. ``count_attributes`` turns the choice into the fitted
attributes and warns when no count stood out.
"""

from typing import NamedTuple

import numpy as np

from ._anneal import _Path, _run_stages, _schedule, anneal, count_lifetimes, counted
from ._validation import warn_user


class CountChoice(NamedTuple):
    """What ``anneal_auto`` measured to choose the number of clusters."""

    lifetimes: np.ndarray
    # How long the chosen count outlives the runner-up, in cooling steps.
    margin: float


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


def anneal_auto(rows, max_clusters, settings, *, sigma_start, random_state=None):
    """Anneal, choose the number of clusters by lifetime, fit with it.

    The schedule runs from the weighted mean as for ``max_clusters + 1``
    clusters and stops at the first stage with more than ``max_clusters``
    distinct centres (or when no group can split). Up to there its path is
    the path of every fit with at least that many clusters (the split
    decisions do not depend on the number of clusters). ``count_lifetimes``
    measures each count on it, ``choose_count`` picks one, and ``anneal``
    fits that many clusters; its result is returned with the exploration's
    lifetimes, and its iterations added to ``n_iter``.
    """
    sched = _schedule(rows, max_clusters + 1, settings, None, sigma_start)
    path = _Path()
    n_explore, _, _ = _run_stages(
        sched, path, settings, T_end=None, max_count=max_clusters
    )
    stopped = path.n[-1] > max_clusters  # else no group could split further
    lifetimes = count_lifetimes(path.sigma, path.n, max_clusters, open_end=not stopped)
    # One cooling step in log-width: sigma^2 is multiplied by ``cooling``.
    step = -0.5 * np.log(settings.cooling)
    k = choose_count(lifetimes, step)
    rounding = lifetime_rounding(path.sigma, path.n, max_clusters)
    margin = count_margin(lifetimes, k, step, rounding)
    if settings.verbose:
        steps = "cooling step" if margin == 1 else "cooling steps"
        print(
            f"Chose {counted(k, 'cluster')}{settings.rows_note}, the longest-lived "
            f"count (by {margin:.3g} {steps} over the runner-up); annealing "
            f"with {k}."
        )
    result = anneal(
        rows, k, settings, init_centers=None, sigma_start=sigma_start, sigma_end=None
    )
    return result._replace(
        n_iter=result.n_iter + n_explore,
        count_lifetimes=lifetimes,
        count_choice=CountChoice(lifetimes, margin),
    )


def count_attributes(choice, n_clusters):
    """Return the fitted attributes of the count choice; warn if no count stands out.

    ``choice`` is ``anneal_auto``'s ``CountChoice`` (``None`` when the
    number of clusters was given: no attributes). The margin is how much the
    chosen count (``n_clusters``) outlives the runner-up, in cooling steps;
    the schedule sees the counts only at its stages, so a margin of one step
    or less says no count stood out.
    """
    if choice is None:
        return {}
    margin = choice.margin
    if margin <= 1.0:
        warn_user(
            f"n_clusters='auto': no count of clusters outlived the others "
            f"by more than one cooling step (the chosen {n_clusters} "
            f"by {margin:.3g}); the choice is a fallback, not a structure "
            "of the data. Look at cluster_count_lifetimes_ (for example "
            "with skrbfkmeans.plotting.plot_cluster_lifetimes) and pass "
            "n_clusters.",
            UserWarning,
        )
    return {"cluster_count_margin_": margin}
