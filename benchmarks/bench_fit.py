"""Marginal cost of one fixed-width RBFKMeans iteration vs one Lloyd iteration.

For each shape both estimators start from the same centres with ``tol=0``;
each fit is timed at ``max_iter=a`` and ``max_iter=b`` and the per-iteration
cost is ``(t_b - t_a) / (b - a)``, so validation, initialisation and the
final passes cancel. Runs are interleaved, one BLAS/OpenMP thread, and the
table gives medians and the ratio to scikit-learn's Lloyd iteration measured
in the same rounds.

Run: ``python benchmarks/bench_fit.py [--repeat 5] [--large]``
(``--large`` adds n = 1e6).
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skrbfkmeans import RBFKMeans


def fit_time(make, X, max_iter):
    est = make(max_iter)
    t0 = time.perf_counter()
    est.fit(X)
    elapsed = time.perf_counter() - t0
    return elapsed, est.n_iter_


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--iters", type=int, nargs=2, default=(2, 7))
    args = parser.parse_args()
    a, b = args.iters

    shapes = [
        (100_000, 16, 64, np.float64),
        (100_000, 16, 64, np.float32),
        (100_000, 2, 8, np.float64),
        (100_000, 64, 8, np.float64),
        (100_000, 16, 256, np.float64),
    ]
    if args.large:
        shapes.append((1_000_000, 16, 64, np.float64))

    print(
        f"per-iteration ms, medians of {args.repeat} interleaved rounds, "
        f"marginal over max_iter {a} -> {b}, 1 thread"
    )
    print(
        f"{'n':>9} {'d':>3} {'k':>4} {'dtype':>8} {'lloyd':>8} "
        f"{'softmax':>8} {'x':>6} {'entmax15':>9} {'x':>6}"
    )
    rng = np.random.default_rng(0)
    for n, d, k, dtype in shapes:
        # Overlapping Gaussians: Lloyd does not reach label stability early.
        X = rng.standard_normal((n, d)).astype(dtype)
        C = X[rng.choice(n, k, replace=False)].copy()
        # The default width (sigma="auto", resolved from the initial centres).
        makers = {
            "lloyd": lambda m: KMeans(
                k, init=C, n_init=1, max_iter=m, tol=0, algorithm="lloyd"
            ),
            "softmax": lambda m: RBFKMeans(k, init=C, max_iter=m, tol=0),
            "entmax15": lambda m: RBFKMeans(
                k, activation="entmax15", init=C, max_iter=m, tol=0
            ),
        }
        per_iter = {name: [] for name in makers}
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for _ in range(args.repeat):
                for name, make in makers.items():
                    ta, na = fit_time(make, X, a)
                    tb, nb = fit_time(make, X, b)
                    if nb <= na:
                        raise RuntimeError(f"{name} stopped early ({nb} iterations)")
                    per_iter[name].append((tb - ta) / (nb - na))
        med = {name: 1e3 * np.median(v) for name, v in per_iter.items()}
        print(
            f"{n:>9} {d:>3} {k:>4} {np.dtype(dtype).name:>8} {med['lloyd']:>8.1f} "
            f"{med['softmax']:>8.1f} {med['softmax'] / med['lloyd']:>6.2f} "
            f"{med['entmax15']:>9.1f} {med['entmax15'] / med['lloyd']:>6.2f}"
        )


if __name__ == "__main__":
    main()
