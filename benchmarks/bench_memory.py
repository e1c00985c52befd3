"""Peak memory of a fit above the data, against KMeans, in fresh processes.

Each measurement runs in its own Python process: it builds the data (float64,
standard normal), records the resident set size, fits one estimator with
``max_iter`` iterations from the same k-means++ seed, and reports

* ``tracemalloc``: the peak of NumPy/Python allocations during the fit,
  measured from the allocations live once the data exist (NumPy reports its
  buffers to ``tracemalloc``);
* ``rss``: the growth of the process's peak resident set size over the
  resident size with the data in memory (``ru_maxrss``; includes BLAS
  buffers and allocator slack).

Goal: ``RBFKMeans(256).fit`` on 1e6 x 16 float64 below
256 MiB above the data (a whole-matrix implementation needs 2-8 GB: the
n x k responsibilities alone are 2 GiB).

Run: ``python benchmarks/bench_memory.py [--n 1000000] [--k 256] [--d 16]
[--anneal] [--smoke]``; ``--smoke`` fits 2000 x 4 rows with k = 8: a check
that the script runs, not a measurement.
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, tracemalloc, warnings
import numpy as np
from threadpoolctl import threadpool_limits
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

name, n, d, k, max_iter = sys.argv[1], *map(int, sys.argv[2:6])
X = np.random.default_rng(0).standard_normal((n, d))
makers = {
    "KMeans": lambda: KMeans(k, n_init=1, max_iter=max_iter, random_state=0),
    "RBFKMeans softmax": lambda: RBFKMeans(k, max_iter=max_iter, random_state=0),
    "RBFKMeans entmax15": lambda: RBFKMeans(
        k, activation="entmax15", max_iter=max_iter, random_state=0
    ),
    "AnnealedRBFKMeans": lambda: AnnealedRBFKMeans(
        k, max_iter=max_iter, random_state=0, polish=False
    ),
}
est = makers[name]()
def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
base_rss = rss_mib()
tracemalloc.start()
base_traced, _ = tracemalloc.get_traced_memory()
with threadpool_limits(1), warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    est.fit(X)
_, peak_traced = tracemalloc.get_traced_memory()
tracemalloc.stop()
peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({
    "traced": (peak_traced - base_traced) / 2**20,
    "rss": peak_rss - base_rss,
    "data": X.nbytes / 2**20,
}))
"""


def measure(name, n, d, k, max_iter):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(n), str(d), str(k), str(max_iter)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--max-iter", type=int, default=3)
    parser.add_argument("--anneal", action="store_true", help="add AnnealedRBFKMeans")
    parser.add_argument(
        "--smoke", action="store_true", help="2000 x 4 rows, k = 8 (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.n, args.d, args.k = 2000, 4, 8
    names = ["KMeans", "RBFKMeans softmax", "RBFKMeans entmax15"]
    if args.anneal:
        names.append("AnnealedRBFKMeans")
    print(
        f"peak memory above the data (MiB), n={args.n}, d={args.d}, k={args.k}, "
        f"float64, max_iter={args.max_iter}, fresh process each"
    )
    print(f"{'estimator':<20} {'data':>8} {'tracemalloc':>12} {'rss':>8}")
    for name in names:
        r = measure(name, args.n, args.d, args.k, args.max_iter)
        print(f"{name:<20} {r['data']:>8.0f} {r['traced']:>12.1f} {r['rss']:>8.1f}")


if __name__ == "__main__":
    main()
