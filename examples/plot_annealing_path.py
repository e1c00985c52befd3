"""
The annealing path and its phase transitions
============================================

:class:`~skrbfkmeans.AnnealedRBFKMeans` starts hot, where every centre sits
at the data mean whatever the initialisation, and cools the width ``sigma``.
The centres do not drift apart gradually: they stay together until the width
crosses a *critical* value, then split, like a physical system at a phase
transition (deterministic annealing, Rose 1998).

For softmax responsibilities the first critical width is known in closed
form: ``sigma_c^2 = lambda_max``, the largest eigenvalue of the data's
covariance, and the first split is along its principal axis. Later splits
happen at the critical widths of each group of centres, from the covariance
of the samples it is responsible for.
"""

# %%
# Data with a hierarchy
# ---------------------
# Two groups of three blobs each: the first split separates the groups, the
# later ones the blobs inside each group.

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from skrbfkmeans import AnnealedRBFKMeans
from skrbfkmeans.plotting import plot_annealing_path

centers = [[-6, 0], [-4, 3], [-7, 3], [6, 0], [4, -3], [7, -3]]
X, _ = make_blobs(n_samples=900, centers=centers, cluster_std=0.6, random_state=0)

est = AnnealedRBFKMeans(n_clusters=6, activation="softmax").fit(X)

lambda_max = np.linalg.eigvalsh(np.cov(X, rowvar=False, bias=True)).max()
print(f"theory: first critical width sqrt(lambda_max) = {np.sqrt(lambda_max):.3f}")
print(
    f"run:    start width {est.sigma_path_[0]:.3f}, "
    f"splits at widths {np.array2string(est.critical_sigmas_, precision=3)}"
)
print(
    f"{len(est.sigma_path_)} stages, {est.n_iter_total_} EM iterations; final width "
    f"{est.sigma_:.3g}, certified exact K-Means fixed point: {est.certified_}"
)

# %%
# ``sigma_path_``, ``centers_path_``, ``inertia_path_`` and
# ``n_distinct_centers_path_`` record every stage. Left:
# :func:`~skrbfkmeans.plotting.plot_annealing_path` draws the centres'
# positions along the principal axis against the width (hot on the left),
# each cluster from its birth at the point of the group it splits off, with
# the splits as dashed lines. Middle: the paths in the plane, each of the
# ``n_clusters`` centres from the start (a centre not yet split off sits on
# its group), in the same colours.
# Right: the number of distinct centres and the K-Means distortion of the
# centres after each stage: the distortion drops at each split and is flat
# in between.

fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), layout="constrained")
# Drawn first, so that the legend plot_annealing_path draws lists it.
axes[0].axvline(
    np.sqrt(lambda_max),
    color="C3",
    linestyle=":",
    label=r"$\sqrt{\lambda_{max}}$ (theory)",
)
plot_annealing_path(est, ax=axes[0])

axes[1].scatter(X[:, 0], X[:, 1], s=4, color="0.8")
for j in range(est.n_clusters):
    path = est.centers_path_[:, j, :]
    axes[1].plot(path[:, 0], path[:, 1], ".-", color=f"C{j}", markersize=4)
axes[1].plot(*est.cluster_centers_.T, "ks", markerfacecolor="w")
axes[1].set_title("centre paths in the plane (squares: the end)")
axes[1].set_aspect("equal", adjustable="datalim")

ax = axes[2]
ax.step(est.sigma_path_, est.n_distinct_centers_path_, where="post", color="C0")
ax.set_ylabel("distinct centres", color="C0")
ax.set_xscale("log")
ax.invert_xaxis()
ax.set_xlabel(r"width $\sigma$ (cooling $\rightarrow$)")
twin = ax.twinx()
twin.plot(est.sigma_path_, est.inertia_path_, ".-", color="C1")
twin.set_yscale("log")
twin.set_ylabel("inertia after the stage", color="C1")
for sigma in est.critical_sigmas_:
    ax.axvline(sigma, color="0.6", linestyle="--", linewidth=0.8)
ax.set_title("phase transitions")
plt.show()

# %%
# Entmax-1.5 splits earlier
# -------------------------
# With entmax-1.5 responsibilities the gain at a tie of ``K`` coincident
# centres is ``K ** 0.5`` times softmax's, so a group splitting in two has
# the critical width ``sigma_c^2 = sqrt(2) lambda_max``: the splits move to
# larger widths, by a factor ``2 ** 0.25``.

est15 = AnnealedRBFKMeans(n_clusters=6, activation="entmax15").fit(X)
print(
    f"entmax15: theory first critical width {2**0.25 * np.sqrt(lambda_max):.3f}; "
    f"splits at {np.array2string(est15.critical_sigmas_, precision=3)}"
)
print(
    f"same final inertia: {np.isclose(est15.inertia_, est.inertia_)} "
    f"({est15.inertia_:.2f} and {est.inertia_:.2f})"
)
