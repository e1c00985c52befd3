"""Choosing the number of clusters: the annealing's lifetimes against four rules.

``AnnealedRBFKMeans(n_clusters="auto", max_clusters=M)`` (one annealing run:
the count of distinct centres that lives over the longest range of widths)
against the usual rules, each given the same range of counts:

- ``silhouette``: the largest silhouette score over ``KMeans(n_init=10)``
  fits for K = 2..M (the scan's time is the fits' plus the scores');
- ``CH``: the largest Calinski-Harabasz score over the same fits (its time
  is the fits' plus its scores);
- ``BIC``: the smallest BIC of ``GaussianMixture`` (full covariances,
  ``n_init=1``, ``random_state=0``) over K = 1..M;
- ``HDBSCAN``: the number of clusters ``sklearn.cluster.HDBSCAN`` finds
  (defaults; noise is not a cluster).

Sixteen data sets with an agreed number of clusters: ten generated sets of
Gaussian blobs whose centres are drawn at least ``4 std`` apart (different
K from 3 to 16, dimensions from 2 to 50, spreads and unequal sizes), four
uniform squares (clusters that are not Gaussian), two Gaussian blobs only
5 std apart (the least separated), and four real sets with their number of
classes: iris and wine (standardised), the handwritten digits and the
breast-cancer data (standardised). Real classes are not always clusters:
iris's two overlapping species and the digits' ten classes are not
separated in the Euclidean geometry every rule here works in.

One BLAS/OpenMP thread; times are medians over ``--repeat`` runs. The last
rows count the sets where each rule found the agreed K and sum the times.

Run: ``python benchmarks/bench_n_clusters.py [--repeat 1] [--max-clusters 20]
[--only NAME] [--smoke]``; ``--smoke`` runs two small sets (``SMOKE``) with
K up to 5: a check that the script runs, not a measurement.
"""

import argparse
import platform
import time
from datetime import date

import numpy as np
from sklearn.cluster import HDBSCAN, KMeans
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import calinski_harabasz_score, silhouette_score
from sklearn.mixture import GaussianMixture
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans


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


def lifetimes_rule(X, M):
    return AnnealedRBFKMeans("auto", max_clusters=M).fit(X).n_clusters_


def kmeans_scan(X, M):
    """``(silhouette K, CH K, fit time, silhouette time, CH time)``."""
    fits, sil, ch = 0.0, 0.0, 0.0
    best_sil, best_ch = (-np.inf, None), (-np.inf, None)
    for k in range(2, M + 1):
        start = time.perf_counter()
        labels = KMeans(k, n_init=10, random_state=0).fit(X).labels_
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
    return best_sil[1], best_ch[1], fits, sil, ch


def bic_rule(X, M):
    bics = [
        GaussianMixture(k, n_init=1, random_state=0).fit(X).bic(X)
        for k in range(1, M + 1)
    ]
    return int(np.argmin(bics)) + 1


def hdbscan_rule(X, M):
    labels = HDBSCAN(copy=True).fit(X).labels_
    return int(np.unique(labels[labels >= 0]).size)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--max-clusters", type=int, default=20)
    parser.add_argument(
        "--only", default=None, help="run the data sets whose name contains this"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="two small sets, K up to 5 (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.max_clusters = 1, 5
    M = args.max_clusters
    print(
        f"bench_n_clusters, {date.today()}, {platform.machine()} "
        f"{platform.processor() or ''}, 1 thread, K = 1..{M} (silhouette, CH: 2..{M})"
    )
    header = f"{'data':18s} {'n x d':>9s} {'K':>3s} | " + " | ".join(
        f"{name:>13s}" for name in ("lifetimes", "silhouette", "CH", "BIC", "HDBSCAN")
    )
    print(header)
    print("-" * len(header))
    rules = ("lifetimes", "silhouette", "CH", "BIC", "HDBSCAN")
    hits = dict.fromkeys(rules, 0)
    total = dict.fromkeys(rules, 0.0)
    n_sets = 0
    with threadpool_limits(1):
        for name, (make, K) in datasets().items():
            if args.only and args.only not in name:
                continue
            if args.smoke and name not in SMOKE:
                continue
            n_sets += 1
            X = make()
            found, times = {}, {}
            found["lifetimes"], times["lifetimes"] = timed(
                lambda: lifetimes_rule(X, M), args.repeat
            )
            (k_sil, k_ch, fits, sil, ch), _ = timed(
                lambda: kmeans_scan(X, M), args.repeat
            )
            found["silhouette"], times["silhouette"] = k_sil, fits + sil
            found["CH"], times["CH"] = k_ch, fits + ch
            found["BIC"], times["BIC"] = timed(lambda: bic_rule(X, M), args.repeat)
            found["HDBSCAN"], times["HDBSCAN"] = timed(
                lambda: hdbscan_rule(X, M), args.repeat
            )
            cells = []
            for rule in rules:
                ok = found[rule] == K
                hits[rule] += ok
                total[rule] += times[rule]
                mark = " " if ok else "x"
                cells.append(f"{found[rule]:3d}{mark} {times[rule]:7.2f}s")
            shape = f"{X.shape[0]}x{X.shape[1]}"
            print(f"{name:18s} {shape:>9s} {K:3d} | " + " | ".join(cells))
    print("-" * len(header))
    print(
        f"{'agreed K found':18s} {'':9s} {'':3s} | "
        + " | ".join(f"{hits[r]:>5d} of {n_sets:<5d}" for r in rules)
    )
    print(
        f"{'total time':18s} {'':9s} {'':3s} | "
        + " | ".join(f"{total[r]:12.2f}s" for r in rules)
    )
    print("x: not the agreed K. Times: medians of --repeat runs, in seconds.")


if __name__ == "__main__":
    main()
