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

Run: ``python benchmarks/bench_threads.py [--threads 2] [--repeat 5]``.
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

SHAPES = [(100_000, 16, 64), (200_000, 2, 8), (50_000, 64, 30)]


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
    args = parser.parse_args()
    t = args.threads
    print(
        f"median ms per iteration over {args.repeat} interleaved runs; 1 vs {t} threads"
    )
    print(
        f"{'n x d, k':>16} {'method':>18} {'1 thr':>8} {f'{t} thr':>8} "
        f"{'speed-up':>9} {'/ KMeans':>9}"
    )
    for n, d, k in SHAPES:
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
        for _ in range(args.repeat):
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
    X, _ = make_blobs(20_000, centers=20, n_features=8, random_state=0)
    walls = {}
    for c in (1, t, 1, t):
        with threadpool_limits(c):
            t0 = time.perf_counter()
            AnnealedRBFKMeans(20).fit(X)
            walls.setdefault(c, []).append(time.perf_counter() - t0)
    one, many = min(walls[1]), min(walls[t])
    print(
        f"AnnealedRBFKMeans(20), 20000 x 8: {one:.2f} s at 1 thread, "
        f"{many:.2f} s at {t} ({one / many:.2f}x)"
    )


if __name__ == "__main__":
    main()
