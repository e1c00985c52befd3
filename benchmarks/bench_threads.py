"""Threads: the speed-up from 1 to more threads, against KMeans's own.

KMeans runs Lloyd on OpenMP threads; the engine runs its row blocks on a
pool of Python threads (NumPy and BLAS release the GIL). For each shape the
table gives the median time of one iteration (fixed ``max_iter``, ``tol=0``,
same initial centres) at 1 and at ``--threads`` threads, for KMeans and for
RBFKMeans (softmax and entmax-1.5 at the default width), the speed-up of
each, and the ratio of RBFKMeans's speed-up to KMeans's, measured side by
side in one process (runs interleaved). Then one AnnealedRBFKMeans fit.
Thread counts are set with ``threadpoolctl.threadpool_limits``, the control
KMeans follows; the results are identical at every count (tests/test_threads.py).

Run: ``python benchmarks/bench_threads.py [--threads 2] [--repeat 5] [--smoke]``;
``--smoke`` runs one shape of 2000 rows and the annealed fit on 1000 rows,
once: a check that the script runs, not a measurement.
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

# (n, d, k) of the iterations, then of the annealed fit.
SHAPES = [(100_000, 16, 64), (200_000, 2, 8), (50_000, 64, 30)]
ANNEALED = (20_000, 8, 20)
SMOKE_SHAPES = [(2000, 16, 8)]
SMOKE_ANNEALED = (1000, 8, 5)


def per_iteration(make, X, n_threads):
    with threadpool_limits(n_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = make()
        t0 = time.perf_counter()
        est.fit(X)
        return (time.perf_counter() - t0) / est.n_iter_


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="small shapes, one round (a check)"
    )
    args = parser.parse_args()
    t = args.threads
    shapes, annealed, repeat = SHAPES, ANNEALED, args.repeat
    if args.smoke:
        shapes, annealed, repeat = SMOKE_SHAPES, SMOKE_ANNEALED, 1
    print(f"median ms per iteration over {repeat} interleaved runs; 1 vs {t} threads")
    print(
        f"{'n x d, k':>16} {'method':>18} {'1 thr':>8} {f'{t} thr':>8} "
        f"{'speed-up':>9} {'/ KMeans':>9}"
    )
    for n, d, k in shapes:
        X, _ = make_blobs(n, centers=k, n_features=d, random_state=0)
        init = X[:k].copy()
        methods = {
            "KMeans": lambda: KMeans(k, init=init, n_init=1, max_iter=20, tol=0),
            "RBFKMeans softmax": lambda: RBFKMeans(
                k, init=init, n_init=1, max_iter=10, tol=0
            ),
            "RBFKMeans entmax": lambda: RBFKMeans(
                k, init=init, n_init=1, max_iter=10, tol=0, activation="entmax15"
            ),
        }
        times = {(m, c): [] for m in methods for c in (1, t)}
        for _ in range(repeat):
            for m, make in methods.items():
                for c in (1, t):
                    times[m, c].append(per_iteration(make, X, c))
        km = np.median(times["KMeans", 1]) / np.median(times["KMeans", t])
        for m in methods:
            one, many = np.median(times[m, 1]), np.median(times[m, t])
            print(
                f"{f'{n} x {d}, {k}':>16} {m:>18} {one * 1e3:>8.2f} {many * 1e3:>8.2f} "
                f"{one / many:>9.2f} {one / many / km:>9.2f}"
            )
    n, d, k = annealed
    X, _ = make_blobs(n, centers=k, n_features=d, random_state=0)
    walls = {}
    for c in (1, t, 1, t):
        with threadpool_limits(c):
            t0 = time.perf_counter()
            AnnealedRBFKMeans(k).fit(X)
            walls.setdefault(c, []).append(time.perf_counter() - t0)
    one, many = min(walls[1]), min(walls[t])
    print(
        f"AnnealedRBFKMeans({k}), {n} x {d}: {one:.2f} s at 1 thread, "
        f"{many:.2f} s at {t} ({one / many:.2f}x)"
    )


if __name__ == "__main__":
    main()
