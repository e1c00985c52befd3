"""Time the entmax family against scipy's softmax on RBF scores.

Scores are ``-||x - c||^2 / (2 sigma^2)`` for 100,000 points in 16-D against
64 centres drawn from the data, at a low temperature (``sigma`` = 0.05 times
the data scale: almost every row is one-hot) and a high one (``sigma`` = 3:
dense rows). Each function is timed in interleaved rounds with one BLAS
thread; the table gives the median time and its ratio to the softmax median
measured in the same rounds.

Run: ``python benchmarks/bench_entmax.py [--repeat 7] [--n-samples 100000]
[--smoke]``; ``--smoke`` runs 2000 points once (a check that the script runs,
not a measurement).
"""

import argparse
import time

import numpy as np
from scipy.special import softmax
from threadpoolctl import threadpool_limits

from skrbfkmeans import entmax15, entmax_bisect, sparsemax


def rbf_scores(n_samples, n_features, n_centers, sigma, dtype, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    C = X[rng.choice(n_samples, n_centers, replace=False)]
    d = (X**2).sum(1)[:, None] - 2 * X @ C.T + (C**2).sum(1)
    np.maximum(d, 0, out=d)
    return (-d / (2 * sigma**2)).astype(dtype)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--n-samples", type=int, default=100_000)
    parser.add_argument(
        "--smoke", action="store_true", help="2000 points, one round (a check)"
    )
    args = parser.parse_args()
    n_samples, repeat = args.n_samples, args.repeat
    if args.smoke:
        n_samples, repeat = 2000, 1

    funcs = {
        "softmax (scipy)": lambda S: softmax(S, axis=1),
        "entmax15": entmax15,
        "entmax_bisect(1.5)": lambda S: entmax_bisect(S, alpha=1.5),
        "sparsemax": sparsemax,
    }
    print(f"n={n_samples}, d=16, k=64, median of {repeat} interleaved runs")
    print(
        f"{'sigma':>6} {'dtype':>8} {'function':>20} {'median ms':>10} "
        f"{'x softmax':>10} {'one-hot rows':>13}"
    )
    with threadpool_limits(1):
        for sigma in (0.05, 3.0):
            for dtype in (np.float64, np.float32):
                S = rbf_scores(n_samples, 16, 64, sigma, dtype)
                times = {name: [] for name in funcs}
                for _ in range(repeat):
                    for name, f in funcs.items():
                        t0 = time.perf_counter()
                        f(S)
                        times[name].append(time.perf_counter() - t0)
                one_hot = np.mean((entmax15(S) > 0).sum(1) == 1)
                base = np.median(times["softmax (scipy)"])
                for name, ts in times.items():
                    med = np.median(ts)
                    print(
                        f"{sigma:>6} {np.dtype(dtype).name:>8} {name:>20} "
                        f"{1e3 * med:>10.1f} {med / base:>10.2f} {one_hot:>13.3f}"
                    )


if __name__ == "__main__":
    main()
