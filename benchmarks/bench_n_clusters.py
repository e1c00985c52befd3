"""Choosing the number of clusters: the annealing's count choice against five rules.

``AnnealedRBFKMeans(n_clusters="auto", max_clusters=M)`` chooses the count
whose cumulative lifetime gap over structureless references is largest
(``null gap``: the exploration on the data and on three uniform references
in the box of its principal components), against today's previous rule
(``lifetimes``: the longest-lived count alone, the same exploration without
references) and the usual rules, each given the same range of counts:

- ``silhouette``: the largest silhouette score over ``KMeans(n_init=10)``
  fits for K = 2..M (the scan's time is the fits' plus the scores');
- ``CH``: the largest Calinski-Harabasz score over the same fits (its time
  is the fits' plus its scores);
- ``BIC``: the smallest BIC of ``GaussianMixture`` (full covariances,
  ``n_init=1``, ``random_state=0``) over K = 1..M;
- ``HDBSCAN``: the number of clusters ``sklearn.cluster.HDBSCAN`` finds
  (defaults; noise is not a cluster; no cluster counts as 1);
- ``gap stat``: Tibshirani, Walther and Hastie's gap statistic with
  reference (b) (uniform in the box of the principal components), five
  references, ``KMeans(n_init=3)`` on them and the scan's fits on the data,
  K = 1..M, the smallest K with ``Gap(K) >= Gap(K + 1) - s(K + 1)``.

Benches (``--bench``):

- ``classic``: sixteen sets with an agreed number of clusters: ten
  generated sets of Gaussian blobs whose centres are drawn at least
  ``4 std`` apart (K from 3 to 16, dimensions from 2 to 50, spreads and
  unequal sizes), four uniform squares (clusters that are not Gaussian), two
  Gaussian blobs only 5 std apart, and four real sets with their number of
  classes: iris and wine (standardised), the handwritten digits and the
  breast-cancer data (standardised). Real classes are not always clusters:
  iris's two overlapping species and the digits' ten classes are not
  separated in the Euclidean geometry every rule here works in.
- ``design``: the 78 generated sets the null-gap rule was designed on
  (``count_sets.design_sets``: grids, two levels, mixed spreads, mixed
  sizes, unequal sizes with unequal spreads, anisotropic blobs, close
  blobs, 2 to 50 dimensions, 2 to 12 clusters, and 10 structureless sets),
  in halves ``A`` (where its tolerance was chosen, ``--tune``) and ``B``.
- ``heldout``: four draws of 40 sets each, ``H1`` to ``H4``, each drawn
  after the rule was frozen (``count_sets.heldout_sets``: the same kinds
  with random parameters and other seeds, 8 structureless in each). ``H1``
  showed a structureless 10-d box taken for 2 clusters, and the threshold
  of one cluster (2 standard errors) was set on half ``A`` after it; ``H2``
  showed a uniform square taken for 2, and the threshold's floor (3
  cooling steps) was set on half ``A`` after it; ``H3`` was drawn after.
  Then a share of the largest gap (0.15, inside the range 0 to 0.25 that
  keeps half ``A``'s exact count) joined the tolerance, for blobs whose own
  first split outlived the references' (``H1``'s five spread blobs gave 8);
  ``H4`` was drawn after.

One BLAS/OpenMP thread; times are medians over ``--repeat`` runs. The
summary counts, per half, the sets where each rule found the agreed K,
the structureless sets (K = 1) it reported as such, and the median time
per set. ``--timing`` times the auto fit (today's rule and the null gap)
and the silhouette scan on 10,000 and 20,000 rows. ``--tune`` prints the
exact K of the null-gap rule on half ``A`` for a grid of tolerances (the
cooling steps and the references' standard errors) and the frozen one's on
both halves.

Run: ``python benchmarks/bench_n_clusters.py [--bench classic|design|heldout|all]
[--repeat 1] [--max-clusters 20] [--only NAME] [--tune] [--timing] [--smoke]``;
``--smoke`` runs two small sets (``SMOKE``) with K up to 5: a check that the
script runs, not a measurement.
"""

import argparse
import platform
import time
import warnings
from datetime import date

import numpy as np
from count_sets import HELDOUT_SEEDS, design_sets, heldout_sets
from sklearn.cluster import HDBSCAN, KMeans
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import calinski_harabasz_score, silhouette_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, _count


def separated_blobs(sizes, n_features, stds, seed, min_sep=4.0):
    """Blobs of the given sizes and stds, centres ``min_sep`` max-std apart.

    Centres are drawn uniformly in a box and redrawn until every pair is at
    least ``min_sep`` times the larger of their two stds apart.
    """
    rng = np.random.default_rng(seed)
    K = len(sizes)
    stds = np.broadcast_to(np.asarray(stds, dtype=float), (K,))
    side = 4.0 * min_sep * stds.max() * K ** (1.0 / n_features)
    while True:
        centers = rng.uniform(-side / 2, side / 2, size=(K, n_features))
        d = np.linalg.norm(centers[:, None] - centers[None], axis=2)
        need = min_sep * np.maximum(stds[:, None], stds[None, :])
        np.fill_diagonal(d, np.inf)
        if np.all(d >= need):
            break
    X = np.concatenate(
        [
            c + s * rng.standard_normal((m, n_features))
            for c, s, m in zip(centers, stds, sizes)
        ]
    )
    return X


def uniform_squares(seed):
    """Four uniform squares of side 4 (not Gaussian), 10 apart."""
    rng = np.random.default_rng(seed)
    corners = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    return np.concatenate([c + rng.uniform(0, 4, size=(300, 2)) for c in corners])


def two_close(seed):
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [rng.standard_normal((400, 2)), [5.0, 0.0] + rng.standard_normal((400, 2))]
    )


def datasets():
    """``name -> (make X, agreed K)``."""
    std = StandardScaler().fit_transform
    return {
        "blobs3-2d": (lambda: separated_blobs([200] * 3, 2, 1.0, 1), 3),
        "blobs5-8d": (lambda: separated_blobs([300] * 5, 8, 1.5, 2), 5),
        "blobs8-unequal": (
            lambda: separated_blobs([50, 100, 200, 400, 800, 100, 300, 150], 2, 0.8, 3),
            8,
        ),
        "blobs4-spreads": (
            lambda: separated_blobs([300] * 4, 2, [0.5, 1.0, 2.0, 2.5], 4),
            4,
        ),
        "blobs10-10d": (lambda: separated_blobs([300] * 10, 10, 1.0, 5), 10),
        "blobs6-3d-unequal": (
            lambda: separated_blobs([60, 500, 120, 300, 80, 250], 3, 1.0, 6),
            6,
        ),
        "blobs12-2d": (lambda: separated_blobs([200] * 12, 2, 0.5, 8), 12),
        "blobs7-5d-mixed": (
            lambda: separated_blobs(
                [100, 400, 150, 250, 80, 300, 120],
                5,
                [0.5, 1.0, 1.5, 0.7, 1.2, 0.9, 2.0],
                9,
            ),
            7,
        ),
        "blobs16-2d": (lambda: separated_blobs([150] * 16, 2, 1.0, 10), 16),
        "blobs6-50d": (lambda: separated_blobs([200] * 6, 50, 1.0, 11), 6),
        "squares4-uniform": (lambda: uniform_squares(12), 4),
        "blobs2-5sd": (lambda: two_close(7), 2),
        "iris(std)": (lambda: std(load_iris().data), 3),
        "wine(std)": (lambda: std(load_wine().data), 3),
        "digits": (lambda: load_digits().data, 10),
        "cancer(std)": (lambda: std(load_breast_cancer().data), 2),
    }


# Two small sets, one generated and one real, for --smoke.
SMOKE = ["blobs3-2d", "iris(std)"]


def timed(func, repeat):
    """``(result of the last call, median time)``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - start)
    return result, float(np.median(times))


def auto_fit(X, M, n_references):
    """The auto fit with ``n_references`` references (0: the lifetimes alone)."""
    saved = _count.N_REFERENCES
    _count.N_REFERENCES = n_references
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return AnnealedRBFKMeans("auto", max_clusters=M, random_state=0).fit(X)
    finally:
        _count.N_REFERENCES = saved


def lifetimes_rule(X, M):
    return auto_fit(X, M, 0).n_clusters_


def kmeans_scan(X, M):
    """``(silhouette K, CH K, fit time, silhouette time, CH time, inertias)``.

    ``inertias[k - 1]`` is the inertia of the scan's fit with k clusters
    (k = 1: the total sum of squares), for the gap statistic.
    """
    fits, sil, ch = 0.0, 0.0, 0.0
    best_sil, best_ch = (-np.inf, None), (-np.inf, None)
    inertias = [float(((X - X.mean(axis=0)) ** 2).sum())]
    for k in range(2, M + 1):
        start = time.perf_counter()
        km = KMeans(k, n_init=10, random_state=0).fit(X)
        labels = km.labels_
        inertias.append(float(km.inertia_))
        mid = time.perf_counter()
        s = silhouette_score(X, labels)
        end = time.perf_counter()
        c = calinski_harabasz_score(X, labels)
        fits, sil, ch = (
            fits + mid - start,
            sil + end - mid,
            ch + time.perf_counter() - end,
        )
        best_sil = max(best_sil, (s, k), key=lambda t: t[0])
        best_ch = max(best_ch, (c, k), key=lambda t: t[0])
    return best_sil[1], best_ch[1], fits, sil, ch, np.array(inertias)


def bic_rule(X, M):
    bics = [
        GaussianMixture(k, n_init=1, random_state=0).fit(X).bic(X)
        for k in range(1, M + 1)
    ]
    return int(np.argmin(bics)) + 1


def hdbscan_rule(X, M):
    labels = HDBSCAN(copy=True).fit(X).labels_
    return max(1, int(np.unique(labels[labels >= 0]).size))


def gap_statistic(X, M, inertias, n_references=5, seed=0):
    """Tibshirani's gap statistic, reference (b); ``inertias`` the data's W_k."""
    rng = np.random.default_rng(seed)
    mean = X.mean(axis=0)
    _, _, axes = np.linalg.svd(X - mean, full_matrices=False)
    Z = (X - mean) @ axes.T
    low, high = Z.min(axis=0), Z.max(axis=0)
    log_ref = np.empty((n_references, M))
    for b in range(n_references):
        R = rng.uniform(low, high, size=Z.shape) @ axes
        log_ref[b, 0] = np.log(((R - R.mean(axis=0)) ** 2).sum())
        for k in range(2, M + 1):
            log_ref[b, k - 1] = np.log(
                KMeans(k, n_init=3, random_state=b).fit(R).inertia_
            )
    gap = log_ref.mean(axis=0) - np.log(np.maximum(inertias, 1e-300))
    s = log_ref.std(axis=0) * np.sqrt(1.0 + 1.0 / n_references)
    for k in range(1, M):
        if gap[k - 1] >= gap[k] - s[k]:
            return k
    return M


RULES = ("lifetimes", "null gap", "silhouette", "CH", "BIC", "HDBSCAN", "gap stat")


def run_set(X, M, repeat):
    """``(found, times, fit)``: each rule's K and time; the null-gap fit."""
    found, times = {}, {}
    found["lifetimes"], times["lifetimes"] = timed(lambda: lifetimes_rule(X, M), repeat)
    fit, times["null gap"] = timed(lambda: auto_fit(X, M, _FROZEN), repeat)
    found["null gap"] = fit.n_clusters_
    (k_sil, k_ch, fits, sil, ch, inertias), _ = timed(lambda: kmeans_scan(X, M), repeat)
    found["silhouette"], times["silhouette"] = k_sil, fits + sil
    found["CH"], times["CH"] = k_ch, fits + ch
    found["BIC"], times["BIC"] = timed(lambda: bic_rule(X, M), repeat)
    found["HDBSCAN"], times["HDBSCAN"] = timed(lambda: hdbscan_rule(X, M), repeat)
    found["gap stat"], t_gap = timed(lambda: gap_statistic(X, M, inertias), repeat)
    times["gap stat"] = t_gap + fits  # the references' fits and the data's
    return found, times, fit


# The number of references of the frozen rule (``_count.N_REFERENCES``).
_FROZEN = _count.N_REFERENCES


def bench_sets(name):
    """``[(name, make, K, half)]`` of a bench."""
    if name == "classic":
        return [(n, make, K, "classic") for n, (make, K) in datasets().items()]
    if name == "design":
        return design_sets()
    return [s for draw in HELDOUT_SEEDS for s in heldout_sets(draw=draw)]


def print_table(rows):
    header = f"{'data':22s} {'n x d':>9s} {'K':>3s} | " + " | ".join(
        f"{name:>12s}" for name in RULES
    )
    print(header)
    print("-" * len(header))
    for name, shape, K, found, times in rows:
        cells = []
        for rule in RULES:
            mark = " " if found[rule] == K else "x"
            cells.append(f"{found[rule]:3d}{mark} {times[rule]:6.2f}s")
        print(f"{name:22s} {shape:>9s} {K:3d} | " + " | ".join(cells))
    print("-" * len(header))


def print_summary(results):
    """Per half: exact K, structureless sets right, median time per set."""
    halves = sorted({half for half, *_ in results})
    print(
        f"{'half':9s} {'sets':>4s} {'K=1':>4s} | "
        + " | ".join(f"{r:>20s}" for r in RULES)
    )
    print(f"{'':9s} {'':>4s} {'':>4s} | " + " | ".join(
        f"{'exact  K=1  median':>20s}" for _ in RULES
    ))  # fmt: skip
    for half in halves:
        rows = [r for r in results if r[0] == half]
        n_none = sum(K == 1 for _, K, _, _ in rows)
        cells = []
        for rule in RULES:
            exact = sum(f[rule] == K for _, K, f, _ in rows)
            none = sum(f[rule] == 1 for _, K, f, _ in rows if K == 1)
            med = float(np.median([t[rule] for *_, t in rows]))
            cells.append(f"{exact:5d} {none:4d} {med:8.2f}s")
        print(f"{half:9s} {len(rows):4d} {n_none:4d} | " + " | ".join(cells))


def tune(results, fits, step_grid=(0, 0.5, 1, 1.5, 2, 3, 4), se_grid=(0, 0.5, 1, 2)):
    """The null-gap rule's exact K on half A for a grid of tolerances."""
    print(
        "Tolerance of the null-gap rule on half A: exact K for "
        "max(steps cooling steps, se references' standard errors)"
    )
    print(f"{'steps':>6s} | " + " ".join(f"se={s:<4g}" for s in se_grid))
    for steps in step_grid:
        cells = []
        for se_factor in se_grid:
            ok = 0
            for (half, K, _, _), fit in zip(results, fits):
                if half != "A":
                    continue
                ok += _null_gap_count(fit, steps, se_factor) == K
            cells.append(f"{ok:7d}")
        print(f"{steps:6g} | " + " ".join(cells))
    print(
        f"frozen: {_count.TOLERANCE_STEPS:g} steps, "
        f"{_count.TOLERANCE_SE:g} standard errors, {_count.TOLERANCE_SHARE:g} "
        "of the largest gap; one cluster when the "
        f"largest gap is within {_count.NULL_STEPS:g} steps or "
        f"{_count.NULL_SE:g} standard errors"
    )


def _null_gap_count(fit, steps, se_factor):
    life = fit.cluster_count_lifetimes_
    refs = fit.cluster_count_reference_lifetimes_
    if refs.shape[0] == 0:
        return fit.n_clusters_  # never split: 1
    gap, se = _count.cumulative_gap(life, refs)
    step = -0.5 * np.log(fit.cooling)
    return _count.choose_count_gap(gap, se, step, steps, se_factor)[0]


def timing(M):
    """Auto fit (today's rule, the null gap) and silhouette scan on many rows."""
    print(f"{'rows':>6s} {'d':>3s} {'K':>3s} | {'lifetimes':>10s} {'null gap':>10s} "
          f"{'x today':>8s} {'silhouette':>11s}")  # fmt: skip
    for n, d, K in [(10_000, 2, 6), (10_000, 10, 8), (20_000, 5, 6)]:
        X = separated_blobs([n // K] * K, d, 1.0, n + d)
        t0 = time.perf_counter()
        k0 = lifetimes_rule(X, M)
        t1 = time.perf_counter()
        k1 = auto_fit(X, M, _FROZEN).n_clusters_
        t2 = time.perf_counter()
        k_sil, _, fits, sil, _, _ = kmeans_scan(X, M)
        print(
            f"{n:6d} {d:3d} {K:3d} | {t1 - t0:8.2f}s {t2 - t1:8.2f}s "
            f"{(t2 - t1) / (t1 - t0):8.2f} {fits + sil:10.2f}s  (K found: {k0}, "
            f"{k1}, {k_sil})"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-clusters", type=int, default=None)
    parser.add_argument(
        "--bench", default="all", choices=["classic", "design", "heldout", "all"]
    )
    parser.add_argument(
        "--only", default=None, help="run the data sets whose name contains this"
    )
    parser.add_argument("--tune", action="store_true", help="the tolerance grid")
    parser.add_argument("--timing", action="store_true", help="10,000 rows and more")
    parser.add_argument(
        "--smoke", action="store_true", help="two small sets, K up to 5 (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.max_clusters, args.bench = 1, 5, "classic"
    benches = ["classic", "design", "heldout"] if args.bench == "all" else [args.bench]
    print(
        f"bench_n_clusters, {date.today()}, {platform.machine()} "
        f"{platform.processor() or ''}, 1 thread"
    )
    results, fits = [], []
    with threadpool_limits(1):
        if args.timing:
            timing(args.max_clusters or 20)
            return
        for bench in benches:
            # The generated benches go to 15 (their K is at most 12).
            M = args.max_clusters or (20 if bench == "classic" else 15)
            print(f"\n{bench}: K = 1..{M} (silhouette, CH: 2..{M})")
            rows = []
            for name, make, K, half in bench_sets(bench):
                if args.only and args.only not in name:
                    continue
                if args.smoke and name not in SMOKE:
                    continue
                X = make()
                found, times, fit = run_set(X, M, args.repeat)
                results.append((half, K, found, times))
                fits.append(fit)
                rows.append((name, f"{X.shape[0]}x{X.shape[1]}", K, found, times))
            print_table(rows)
    print("x: not the agreed K. Times: medians of --repeat runs, in seconds.\n")
    print_summary(results)
    if args.tune:
        print()
        tune(results, fits)


if __name__ == "__main__":
    main()
