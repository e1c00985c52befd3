"""
Fit time against the number of samples and of clusters
======================================================

Wall time of one fit of :class:`sklearn.cluster.KMeans` (``n_init=10`` and
``n_init=1``), :class:`~skrbfkmeans.RBFKMeans` (softmax at
``sigma="auto"``, one initialisation) and
:class:`~skrbfkmeans.AnnealedRBFKMeans`, with one thread, on blobs in 8-D:
first against the number of samples at 16 clusters, then against the number
of clusters at 4,000 samples. Each point is the best of two runs.

The times depend on the machine and on what else runs on it; the date and
the machine are printed with them. ``benchmarks/bench_tools.py`` measures the
ratios to ``KMeans(n_init=10)`` on eleven harder data sets.
"""

# %%
# Timing
# ------

import datetime
import os
import platform
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

print(
    f"{datetime.date.today()}, {platform.machine()}, {os.cpu_count()} cores "
    "(timed on one thread)"
)

makers = {
    "KMeans(n_init=10)": lambda k: KMeans(k, n_init=10, random_state=0),
    "KMeans(n_init=1)": lambda k: KMeans(k, n_init=1, random_state=0),
    "RBFKMeans()": lambda k: RBFKMeans(k, random_state=0),
    "AnnealedRBFKMeans()": lambda k: AnnealedRBFKMeans(k),
}


def fit_seconds(make, X, k, repeat=2):
    best = np.inf
    for _ in range(repeat):
        est = make(k)
        start = time.perf_counter()
        est.fit(X)
        best = min(best, time.perf_counter() - start)
    return best


def blobs(n, k):
    return make_blobs(n, n_features=8, centers=k, cluster_std=2.0, random_state=0)[0]


n_grid = [1000, 4000, 16000]
k_grid = [4, 16, 64]
with threadpool_limits(1):
    by_n = {
        m: [fit_seconds(f, blobs(n, 16), 16) for n in n_grid] for m, f in makers.items()
    }
    by_k = {
        m: [fit_seconds(f, blobs(4000, k), k) for k in k_grid]
        for m, f in makers.items()
    }

for title, grid, table in [("n_samples", n_grid, by_n), ("n_clusters", k_grid, by_k)]:
    print(f"\nseconds against {title}: " + ", ".join(map(str, grid)))
    ref = np.array(table["KMeans(n_init=10)"])
    for method, seconds in table.items():
        ratios = ", ".join(f"{r:.2g}" for r in np.array(seconds) / ref)
        print(f"{method:>20}: {np.round(seconds, 3)}  (x KMeans(n_init=10): {ratios})")

# %%
# Plot
# ----

fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for ax, grid, table, xlabel in [
    (axes[0], n_grid, by_n, "n_samples (n_clusters=16)"),
    (axes[1], k_grid, by_k, "n_clusters (n_samples=4000)"),
]:
    for method, seconds in table.items():
        ax.loglog(grid, seconds, marker="o", label=method)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fit time (s), one thread")
axes[0].legend()
plt.show()

# %%
# All four grow about linearly with the number of samples. One
# ``RBFKMeans`` fit (one initialisation, soft iterations) costs less than ten
# KMeans restarts; the annealing costs a few to ten times
# ``KMeans(n_init=10)``: it runs many soft iterations near the critical
# widths, then Lloyd and the polish, in exchange for one deterministic,
# certified run without restarts.
