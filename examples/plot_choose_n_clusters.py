"""
Choosing the number of clusters from the annealing path
=======================================================

As :class:`~skrbfkmeans.AnnealedRBFKMeans` cools, the number of distinct
centres grows at the critical widths of the data. A count that survives over
a long range of widths may be a structure of the data, but counts also live
long on data without clusters, from its extent and shape alone.
``n_clusters="auto"`` anneals until more than ``max_clusters`` distinct
centres exist and measures how long each count lives (in log-width), does
the same on three structureless references (uniform data with the data's
variances along its principal axes), and fits the count that lives longer
on the data than on them (one cluster when none does): the result is
exactly the fit with ``n_clusters`` set to that count, for the cost of a few
annealing explorations rather than one fit per candidate count.

The usual alternative fits K-Means once per candidate K and scores each fit
(here the silhouette, with ``KMeans(n_init=10)``). Both are run below on data
where the number of clusters is known.
"""

# %%
# Data with a known number of clusters
# ------------------------------------
# Six Gaussian blobs of unequal sizes and spreads, two of them close to each
# other (a pair) and the others spread out.

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from skrbfkmeans import AnnealedRBFKMeans
from skrbfkmeans.plotting import plot_cluster_lifetimes, plot_split_tree

rng = np.random.default_rng(0)
centers = np.array([[0, 0], [6, 0], [16, 2], [2, 14], [15, 15], [-10, 8]], float)
sizes = [300, 150, 400, 120, 250, 200]
spreads = [0.8, 0.6, 1.2, 0.7, 1.0, 1.0]
X = np.concatenate(
    [c + s * rng.standard_normal((m, 2)) for c, s, m in zip(centers, spreads, sizes)]
)
y = np.repeat(np.arange(6), sizes)

start = time.perf_counter()
est = AnnealedRBFKMeans(n_clusters="auto", max_clusters=15).fit(X)
t_auto = time.perf_counter() - start
print(f"n_clusters='auto': {est.n_clusters_} clusters in {t_auto:.2f} s")
print(f"certified K-Means fixed point: {est.certified_}")
print("lifetime of each count (log-width):")
print(np.array2string(est.cluster_count_lifetimes_[:10], precision=2))

# %%
# The silhouette scan, for comparison: one ``KMeans(n_init=10)`` fit and one
# silhouette score per candidate K.

start = time.perf_counter()
scores = {}
for k in range(2, 16):
    labels = KMeans(k, n_init=10, random_state=0).fit_predict(X)
    scores[k] = silhouette_score(X, labels)
t_scan = time.perf_counter() - start
k_sil = max(scores, key=scores.get)
print(f"silhouette scan over K = 2..15: {k_sil} clusters in {t_scan:.2f} s")

# %%
# The lifetimes and the split tree
# --------------------------------
# Left: :func:`~skrbfkmeans.plotting.plot_cluster_lifetimes`, the chosen count
# in red beside the references' lifetimes; counts past the true one live one
# cooling step each (the blobs themselves split as fast as the schedule
# allows). Middle:
# :func:`~skrbfkmeans.plotting.plot_split_tree` draws ``split_linkage_``,
# the splits as a dendrogram whose leaves are the clusters (leaf ``i`` is
# label ``i``) and whose heights are the critical widths, on a log axis:
# the close pair separates last. Each cluster's leg has its colour, up to
# where it split off. Right: the clusters found, in the same colours.

fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), layout="constrained")
plot_cluster_lifetimes(est, ax=axes[0])
plot_split_tree(est, ax=axes[1])
# Cluster i in colour "Ci", as in the tree (up to ten clusters).
axes[2].scatter(X[:, 0], X[:, 1], c=np.asarray(plt.cm.tab10.colors)[est.labels_], s=6)
for i, c in enumerate(est.cluster_centers_):
    axes[2].annotate(str(i), c, fontsize=12, weight="bold", ha="center")
axes[2].set_title(f"{est.n_clusters_} clusters (labels and colours as in the tree)")
axes[2].set_aspect("equal", adjustable="datalim")
plt.show()

# %%
# How the count was chosen
# ------------------------
# Each stage of the annealing has an equilibrium with some number of
# distinct centres; that count holds until the next stage, so count ``c``
# lives the sum of ``log(sigma_s / sigma_{s+1})`` over the stages ``s`` with
# ``c`` distinct centres. The references' explorations give the same
# lifetimes on structureless data of the same shape, and the cumulative gap
# ``G(c)`` (``cluster_count_gap_``) adds up, over the counts 2 to ``c``, how
# much longer each lived on the data than on the references. The chosen
# count is the smallest whose gap is within ``cluster_count_gap_tolerance_``
# of the largest; when no gap exceeds ``cluster_count_gap_threshold_``, no
# count beat structureless data, and one cluster is fitted with a warning.
#
# ``benchmarks/bench_n_clusters.py`` compares the rule with the lifetimes
# alone, the silhouette and Calinski-Harabasz scans, the BIC of Gaussian
# mixtures, HDBSCAN and the gap statistic on generated and classic sets.

agree = np.mean([np.unique(y[est.labels_ == i]).size == 1 for i in range(6)])
print(f"clusters that are one blob each: {agree:.0%}")
