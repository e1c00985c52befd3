"""Many rows: AnnealedRBFKMeans against KMeans(n_init=10) on 50000 blobs in 16-D.

With more rows than its sample (``max(10000, 100 k)`` rows), the annealed fit
anneals a sample, runs its final phase (the polish, single-sample and boundary
moves) on the sample, then finishes on every row (Lloyd, single-sample moves,
the certificate). For k from 8 to 256 centres on fewer and more blobs than
centres it prints, median over ``--repeat`` interleaved rounds with one
BLAS/OpenMP thread: the time of ``KMeans(n_init=10)``, that of
``AnnealedRBFKMeans(k, random_state=0)`` and their ratio, the inertia
against KMeans's, and the seconds of the two parts of the fit that scale with
the rows: the final phase on the sample and the finish on every row (their
functions are timed in place).

Run: ``python benchmarks/bench_many_rows.py [--repeat 3] [--k 8,32]
[--smoke]``; ``--smoke`` fits 12000 rows (more than the sample) with k = 4
once: a check that the script runs, not a measurement.
"""

import argparse
import collections
import datetime
import platform
import time
import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

import skrbfkmeans
from skrbfkmeans import AnnealedRBFKMeans, _anneal, _annealed_rbf_kmeans

# (centres, blobs): fewer blobs than centres, then more.
CASES = [(8, 4), (8, 16), (32, 16), (32, 64), (128, 64), (128, 256), (256, 64)]

PARTS = collections.Counter()


def timed(module, name, key):
    """Replace ``module.name`` by a wrapper that adds its seconds to ``PARTS``."""
    func = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            PARTS[key] += time.perf_counter() - start

    setattr(module, name, wrapper)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--k", default=None, help="centres to run, e.g. 8,32")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    n_samples, cases, repeat = 50_000, CASES, args.repeat
    if args.smoke:
        n_samples, cases, repeat = 12_000, [(4, 2)], 1
    elif args.k:
        wanted = {int(k) for k in args.k.split(",")}
        cases = [case for case in CASES if case[0] in wanted]
    timed(_anneal, "_final_phase", "final phase (sample)")
    timed(_annealed_rbf_kmeans, "finish_on_every_row", "every row")
    warnings.simplefilter("ignore")
    print(
        f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
        f"{platform.processor() or platform.machine()}; skrbfkmeans "
        f"{skrbfkmeans.__version__}; {n_samples} rows x 16, median of {repeat}, "
        "1 thread"
    )
    header = (
        f"{'k':>4} {'blobs':>5} {'km10 s':>7} {'annealed s':>10} {'x km10':>7} "
        f"{'inertia vs km10':>15} {'final phase s':>13} {'every row s':>11}"
    )
    print(header)
    print("-" * len(header))
    with threadpool_limits(1):
        for k, blobs in cases:
            X, _ = make_blobs(n_samples, n_features=16, centers=blobs, random_state=0)
            times = collections.defaultdict(list)
            for _ in range(repeat):
                start = time.perf_counter()
                km = KMeans(k, n_init=10, random_state=0).fit(X)
                times["km"].append(time.perf_counter() - start)
                PARTS.clear()
                start = time.perf_counter()
                est = AnnealedRBFKMeans(k, random_state=0).fit(X)
                times["annealed"].append(time.perf_counter() - start)
                for key, seconds in PARTS.items():
                    times[key].append(seconds)
            km_s, an_s = np.median(times["km"]), np.median(times["annealed"])
            final = np.median(times["final phase (sample)"] or [0.0])
            every = np.median(times["every row"] or [0.0])
            gap = (est.inertia_ - km.inertia_) / km.inertia_
            print(
                f"{k:>4} {blobs:>5} {km_s:>7.2f} {an_s:>10.2f} {an_s / km_s:>7.2f} "
                f"{gap:>+15.4%} {final:>13.2f} {every:>11.2f}"
            )


if __name__ == "__main__":
    main()
