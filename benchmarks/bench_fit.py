"""Cost of one fixed-width RBFKMeans iteration vs one Lloyd iteration.

For each shape, one iteration of each method from the same centres:
scikit-learn's Lloyd kernel (``lloyd_iter_chunked_dense``, the loop body of
``KMeans.fit``, one thread) and one E-step plus M-step of ``RBFKMeans``
(``em_fixed_sigma`` with ``max_iter=1``, softmax and entmax-1.5) at the
default width ``sigma="auto"``. Validation, initialisation and the per-fit
``||x||^2`` are outside the timed calls for both. Rounds are interleaved,
one BLAS/OpenMP thread, and the table gives medians and the ratio to Lloyd
measured in the same rounds.

Two kinds of data: ``normal`` (one standard Gaussian, no cluster structure:
at the default width almost every score is within ``log(2k/eps)`` of its
row's maximum, so every one needs an ``exp``) and ``blobs`` (k Gaussian
clusters of unit spread in a box of side 20: most rows are one-hot to
working precision and their far scores are skipped). ``near`` is that
fraction of scores at the initial centres, and ``exp`` the time of one
NumPy ``exp`` over n x k values of the dtype (the floor of a dense softmax
iteration without any other work), with its ratio to Lloyd.

Run: ``python benchmarks/bench_fit.py [--repeat 5] [--large] [--smoke]``
(``--large`` adds n = 1e6; ``--smoke`` runs every shape at n = 2000 once, a
check that the script runs, not a measurement).
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.cluster._k_means_lloyd import lloyd_iter_chunked_dense
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skrbfkmeans import RBFKMeans
from skrbfkmeans._engine.passes import data_offset, squared_norms
from skrbfkmeans._iterations import em_fixed_sigma
from skrbfkmeans._rows import MemoryRows


def default_sigma(X, C):
    """The width ``sigma="auto"`` resolves to from the initial centres ``C``."""
    with warnings.catch_warnings():
        # One iteration is enough to resolve the width: it stops at max_iter.
        warnings.simplefilter("ignore", ConvergenceWarning)
        return RBFKMeans(C.shape[0], init=C, n_init=1, max_iter=1).fit(X).sigma_


def near_fraction(X, C, sigma):
    """Fraction of scores within ``log(2 k / eps)`` of their row's maximum."""
    k = C.shape[0]
    cut = np.log(2.0 * k / np.finfo(X.dtype).eps)
    near = 0
    for start in range(0, X.shape[0], 4096):
        Xb = X[start : start + 4096].astype(np.float64)
        d = ((Xb[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        u = (d.min(axis=1, keepdims=True) - d) / (2.0 * sigma**2)
        near += np.count_nonzero(u > -cut)
    return near / (X.shape[0] * k)


def exp_time(n, k, dtype, repeat):
    """Median time of one ``exp`` over ``n x k`` values of ``dtype``."""
    rng = np.random.default_rng(1)
    block = rng.uniform(-30.0, 0.0, (max(1, (1 << 17) // k), k)).astype(dtype)
    out = np.empty_like(block)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(-(-n // block.shape[0])):
            np.exp(block, out=out)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--large", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="n = 2000, one round (a check)"
    )
    args = parser.parse_args()
    n, repeat = (2000, 1) if args.smoke else (100_000, args.repeat)

    shapes = [
        (n, 16, 64, np.float64, "normal"),
        (n, 16, 64, np.float64, "blobs"),
        (n, 16, 64, np.float32, "normal"),
        (n, 16, 64, np.float32, "blobs"),
        (n, 2, 8, np.float64, "normal"),
        (n, 2, 8, np.float64, "blobs"),
        (n, 64, 8, np.float64, "normal"),
        (n, 64, 8, np.float64, "blobs"),
        (n, 16, 256, np.float64, "normal"),
        (n, 16, 256, np.float64, "blobs"),
    ]
    if args.large and not args.smoke:
        shapes.append((1_000_000, 16, 64, np.float64, "normal"))
        shapes.append((1_000_000, 16, 64, np.float64, "blobs"))

    print(
        f"ms per iteration, medians of {repeat} interleaved rounds, "
        "1 BLAS thread; x = ratio to Lloyd"
    )
    print(
        f"{'n':>9} {'d':>3} {'k':>4} {'dtype':>8} {'data':>7} {'near':>6} "
        f"{'lloyd':>7} {'softmax':>8} {'x':>6} {'entmax15':>9} {'x':>6} "
        f"{'exp':>7} {'x':>6}"
    )
    rng = np.random.default_rng(0)
    for n, d, k, dtype, kind in shapes:
        if kind == "normal":
            X = rng.standard_normal((n, d)).astype(dtype)
        else:
            X = make_blobs(n, d, centers=k, random_state=0)[0].astype(dtype)
        C = X[rng.choice(n, k, replace=False)].copy()
        sigma = default_sigma(X, C)
        near = near_fraction(X, C, sigma)
        w = np.ones(n, dtype=dtype)
        offset = data_offset(X, w)
        x_sq = squared_norms(X, offset)
        # One iteration each from the same centres at the default width
        # (sigma="auto", resolved from them): scikit-learn's Lloyd kernel on
        # one thread, and our E-step plus M-step.
        buffers = (
            np.empty_like(C),
            np.empty(k, dtype=dtype),
            np.empty(n, dtype=np.int32),
            np.empty(k, dtype=dtype),
        )

        def lloyd_iteration():
            lloyd_iter_chunked_dense(X, w, C, *buffers[:3], buffers[3], 1)

        rows = MemoryRows(X, w, offset, x_sq)

        def em_iteration(activation):
            em_fixed_sigma(rows, C, sigma, activation, max_iter=1, tol=0.0)

        steps = {
            "lloyd": lloyd_iteration,
            "softmax": lambda: em_iteration("softmax"),
            "entmax15": lambda: em_iteration("entmax15"),
        }
        per_iter = {name: [] for name in steps}
        with threadpool_limits(1):
            for _ in range(repeat):
                for name, step in steps.items():
                    t0 = time.perf_counter()
                    step()
                    per_iter[name].append(time.perf_counter() - t0)
            t_exp = 1e3 * exp_time(n, k, dtype, repeat)
        med = {name: 1e3 * np.median(v) for name, v in per_iter.items()}
        lloyd = med["lloyd"]
        print(
            f"{n:>9} {d:>3} {k:>4} {np.dtype(dtype).name:>8} {kind:>7} "
            f"{near:>6.3f} {lloyd:>7.1f} {med['softmax']:>8.1f} "
            f"{med['softmax'] / lloyd:>6.2f} {med['entmax15']:>9.1f} "
            f"{med['entmax15'] / lloyd:>6.2f} {t_exp:>7.1f} {t_exp / lloyd:>6.2f}"
        )


if __name__ == "__main__":
    main()
