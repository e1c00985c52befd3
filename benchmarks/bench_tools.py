"""Which tool when: time and inertia of each clusterer against KMeans(n_init=10).

The README's "which tool when" table quotes this script. On the eleven smaller data
sets of ``bench_quality.py`` (its family ``hard``; with ``--large``, its three
sets of 50000 rows and more too) it fits, with one BLAS/OpenMP thread:

- ``KMeans(n_init=10)``, the reference, and ``KMeans(n_init=1)``;
- ``RBFKMeans()`` (softmax, ``sigma="auto"``) and
  ``RBFKMeans(activation="entmax15")``, one k-means++ initialisation each;
- ``RBFKMeans(sigma=0)``, which is KMeans with one initialisation;
- ``AnnealedRBFKMeans()`` (annealing, polish and certificate), and
  ``AnnealedRBFKMeans(polish=False)``, whose time the final phase's polish
  and boundary moves add to (the row ``final phase added``: the ratio of
  the two times less one);
- ``KMeans(n_init=1)`` followed by ``kmeans_polish``;
- ``GaussianMixture(covariance_type="spherical")`` and
  ``GaussianMixture(covariance_type="full")``, one initialisation each
  (k-means initialisation, scikit-learn's default).

For each fit it records the wall time (median of ``--repeat`` runs, the
methods interleaved in every round so that background load hits them alike)
and the hard inertia of the fitted centres (``means_`` for the mixtures),
both relative to ``KMeans(n_init=10)``. It prints one row per data set and
method, then the summary the README quotes: for the sets of up to 10000
rows and, with ``--large``, for those of 50000 rows and more (annealed on a
sample), per method the median and the range over the sets of the time
ratio and of the inertia difference.
The date, the machine and the library versions head the output.

Run: ``python benchmarks/bench_tools.py [--repeat 3] [--only NAME] [--large]
[--record PATH] [--smoke]``; ``--only`` takes any set of
``bench_quality.py``; ``--record`` writes the summary as JSON
(``benchmarks/results/tools.json`` is the run the README and the user
guide quote, checked by ``tests/test_docs_claims.py``: one source for their
cost figures); ``--smoke`` runs its two small smoke sets once: a check
that the script runs, not a measurement.
"""

import argparse
import datetime
import json
import os
import platform
import time
import warnings

import numpy as np
import scipy
import sklearn
from bench_quality import DATASETS, FAMILIES, SMOKE, PolishedKMeans
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

import skrbfkmeans
from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans


def inertia_of(est, X):
    """Hard K-Means inertia of the centres of a fitted estimator."""
    centers = getattr(est, "cluster_centers_", None)
    if centers is None:
        centers = est.means_
    d = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    return float(d.min(axis=1).sum())


def methods_for(k):
    return {
        "KMeans(n_init=10)": lambda: KMeans(k, n_init=10, random_state=0),
        "KMeans(n_init=1)": lambda: KMeans(k, n_init=1, random_state=0),
        "RBFKMeans(sigma=0)": lambda: RBFKMeans(k, sigma=0, random_state=0),
        "RBFKMeans()": lambda: RBFKMeans(k, random_state=0),
        "RBFKMeans(entmax15)": lambda: RBFKMeans(
            k, activation="entmax15", random_state=0
        ),
        "AnnealedRBFKMeans()": lambda: AnnealedRBFKMeans(k),
        "AnnealedRBFKMeans(polish=False)": lambda: AnnealedRBFKMeans(k, polish=False),
        "KMeans(1)+kmeans_polish": lambda: PolishedKMeans(k),
        "GMM(spherical)": lambda: GaussianMixture(
            k, covariance_type="spherical", random_state=0
        ),
        "GMM(full)": lambda: GaussianMixture(k, covariance_type="full", random_state=0),
    }


def _range(values):
    """Median, minimum and maximum of ``values``, as floats."""
    return [float(np.median(values)), float(np.min(values)), float(np.max(values))]


def _summarise(family, summary, final_added):
    """Print the summary of one family of sets; return it as the record has it."""
    sets = "up to 10000 rows" if family == "small" else "50000 rows and more"
    print()
    print(f"summary over the data sets of {sets} (median [min, max])")
    print(f"{'method':>31} {'time / KMeans(n_init=10)':>30} {'inertia vs km10':>30}")
    record = {}
    for method, rows in summary.items():
        ratio, rel = np.array(rows).T
        record[method] = {"time": _range(ratio), "inertia %": _range(rel)}
        print(
            f"{method:>31} {np.median(ratio):>9.2f} [{ratio.min():5.2f}, "
            f"{ratio.max():6.2f}]     {np.median(rel):>+8.2f}% "
            f"[{rel.min():+7.2f}%, {rel.max():+7.2f}%]"
        )
    print(
        f"{'final phase added':>31} {np.median(final_added):>+9.0%} "
        f"[{final_added.min():+.0%}, {final_added.max():+.0%}] of the time without "
        "polish"
    )
    record["final phase added"] = _range(final_added)
    return record


def machine():
    """CPU model (from /proc/cpuinfo where there is one) and core count."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1] for line in f if "model name" in line]
        model = names[0].strip() if names else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=None)
    parser.add_argument(
        "--large", action="store_true", help="also the sets of 50000 rows and more"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="two small sets, one round (a check)"
    )
    parser.add_argument("--record", default=None, metavar="PATH")
    args = parser.parse_args()
    repeat = 1 if args.smoke else args.repeat
    if args.smoke:
        names = SMOKE
    elif args.only:
        if args.only not in DATASETS:
            raise SystemExit(f"unknown data set {args.only!r}")
        names = [args.only]
    else:
        names = FAMILIES["hard"] + (FAMILIES["large"] if args.large else [])
    now = datetime.datetime.now(datetime.timezone.utc)
    versions = (
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"scipy {scipy.__version__}, scikit-learn {sklearn.__version__}, "
        f"skrbfkmeans {skrbfkmeans.__version__}"
    )
    print(f"date: {now:%Y-%m-%d %H:%M} UTC; machine: {machine()}")
    print(versions)
    print(f"median of {repeat} runs, 1 thread; x km10 = time / KMeans(n_init=10)")
    print(
        f"{'data':>13} {'k':>4} {'method':>24} {'time s':>8} {'x km10':>7} "
        f"{'inertia vs km10':>16}"
    )
    summaries = {}  # family -> (method -> [(time ratio, inertia %)], final added)
    for name in names:
        family = "large" if name in FAMILIES["large"] else "small"
        summary, final_added = summaries.setdefault(family, ({}, []))
        X, _, k = DATASETS[name]()
        X = np.ascontiguousarray(X, dtype=np.float64)
        methods = methods_for(k)
        times = {m: [] for m in methods}
        fitted = {}
        with threadpool_limits(1), warnings.catch_warnings():
            # Mixtures and soft fits may stop at max_iter on the harder sets;
            # the table reports their result as it is.
            warnings.simplefilter("ignore", ConvergenceWarning)
            for _ in range(repeat):
                for method, make in methods.items():
                    est = make()
                    t0 = time.perf_counter()
                    est.fit(X)
                    times[method].append(time.perf_counter() - t0)
                    fitted[method] = est
        ref_time = float(np.median(times["KMeans(n_init=10)"]))
        ref_inertia = inertia_of(fitted["KMeans(n_init=10)"], X)
        added = np.median(times["AnnealedRBFKMeans()"]) / np.median(
            times["AnnealedRBFKMeans(polish=False)"]
        )
        final_added.append(added - 1)
        for method in methods:
            t = float(np.median(times[method]))
            rel = 100 * (inertia_of(fitted[method], X) / ref_inertia - 1)
            summary.setdefault(method, []).append((t / ref_time, rel))
            print(
                f"{name:>13} {k:>4} {method:>24} {t:>8.3f} {t / ref_time:>7.2f} "
                f"{rel:>+15.2f}%"
            )
        print(
            f"{name:>13} {k:>4} {'final phase added':>24} {'':>8} {'':>7} "
            f"{100 * (added - 1):>+15.1f}% of the time without polish"
        )
    record = {}
    for family, (summary, final_added) in summaries.items():
        record[family] = _summarise(family, summary, np.array(final_added))
    if args.record:
        meta = {
            "date": f"{now:%Y-%m-%d}",
            "machine": machine(),
            "versions": versions,
            "repeat": repeat,
            "sets": names,
        }
        with open(args.record, "w", encoding="utf-8") as f:
            json.dump({"run": meta, "summary": record}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
