"""Call chains from an estimator's ``fit`` to the engine's BLAS products.

Not a timing: a count of how deep the code is. Each fit runs under
``sys.setprofile``; at every call of ``skrbfkmeans._engine.blas.matmul``
(the engine's one entry to BLAS) the frames between the estimator's ``fit``
and ``matmul`` form a chain, and the table prints, per fit, the longest
chain (calls = arrows, so ``fit > matmul`` is 1) and how many of its calls
end in each part of ``doc/architecture.rst`` (estimators, algorithms,
rows, engine). "to engine" counts the calls from ``fit`` to the first
engine function of the chain, the measure comparable to scikit-learn's
``KMeans.fit > _kmeans_single_lloyd > lloyd_iter_chunked_dense`` (2 calls to
its compiled kernel, which a profiler does not see into). ``--all`` prints
every distinct chain longer than ``--above``.

Run: ``python benchmarks/call_chains.py [--all] [--above N]``.
"""

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

from sklearn.datasets import load_iris, make_blobs

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

warnings.simplefilter("ignore")

# Parts of doc/architecture.rst by file, for the breakdown.
PARTS = {
    "_base.py": "est",
    "_rbf_kmeans.py": "est",
    "_annealed_rbf_kmeans.py": "est",
    "_rows.py": "rows",
    "_dask.py": "rows",
    "_entmax.py": "engine",
}


def part(filename):
    path = Path(filename)
    if "_engine" in path.parts:
        return "engine"
    return PARTS.get(path.name, "alg")


def chains_of(estimator, X):
    """Count the distinct chains from ``estimator.fit`` to ``matmul``."""
    fit_code = type(estimator).fit
    fit_code = getattr(fit_code, "__wrapped__", fit_code)
    while hasattr(fit_code, "__wrapped__"):
        fit_code = fit_code.__wrapped__
    fit_code = fit_code.__code__
    stack, chains = [], Counter()

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            stack.append(code)
            if code.co_name == "matmul" and code.co_filename.endswith("blas.py"):
                starts = [i for i, c in enumerate(stack) if c is fit_code]
                if starts:
                    chain = tuple(
                        (c.co_name, part(c.co_filename)) for c in stack[starts[-1] :]
                    )
                    chains[chain] += 1
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        estimator.fit(X)
    finally:
        sys.setprofile(None)
    return chains


def cases():
    X, _ = make_blobs(3000, centers=4, random_state=0)
    iris = load_iris().data
    return [
        ("RBFKMeans(sigma=1)", 6, RBFKMeans(4, sigma=1.0, random_state=0), X),
        (
            "RBFKMeans(sigma=1, entmax15)",
            6,
            RBFKMeans(4, sigma=1.0, activation="entmax15", random_state=0),
            X,
        ),
        ("RBFKMeans(sigma='auto')", 6, RBFKMeans(4, random_state=0), X),
        ("RBFKMeans(sigma=0)", 6, RBFKMeans(4, sigma=0, random_state=0), X),
        (
            "RBFKMeans(sigma=0, hartigan)",
            6,
            RBFKMeans(4, sigma=0, algorithm="hartigan", random_state=0),
            X,
        ),
        ("AnnealedRBFKMeans(4), blobs", 8, AnnealedRBFKMeans(4, random_state=0), X),
        ("AnnealedRBFKMeans(6), iris", 8, AnnealedRBFKMeans(6, random_state=0), iris),
        (
            "AnnealedRBFKMeans(6, entmax15), iris",
            8,
            AnnealedRBFKMeans(6, activation="entmax15", random_state=0),
            iris,
        ),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="print every long chain")
    parser.add_argument(
        "--above", type=int, default=None, help="with --all: longer than"
    )
    args = parser.parse_args()
    header = (
        f"{'fit':38} {'longest':>7} {'goal':>4} {'to engine':>9}  est/alg/rows/engine"
    )
    print(header)
    print("-" * len(header))
    longest = []
    for name, goal, estimator, X in cases():
        chains = chains_of(estimator, X)
        chain = max(chains, key=len)
        first_engine = next(i for i, (_, p) in enumerate(chain) if p == "engine")
        counts = Counter(p for _, p in chain[1:])
        split = "/".join(str(counts[p]) for p in ("est", "alg", "rows", "engine"))
        print(f"{name:38} {len(chain) - 1:>7} {goal:>4} {first_engine:>9}  {split}")
        longest.append((name, chain))
        if args.all:
            above = goal if args.above is None else args.above
            for c in sorted(chains, key=len):
                if len(c) - 1 > above:
                    print(f"    {len(c) - 1:>2} " + " > ".join(n for n, _ in c))
    print()
    for name, chain in longest:
        print(f"{name}: " + " > ".join(n for n, _ in chain))


if __name__ == "__main__":
    main()
