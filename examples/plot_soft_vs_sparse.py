"""
Soft and sparse responsibilities
================================

At a width ``sigma`` every sample has responsibilities over the centres,
computed from the scores ``-||x - mu_j||^2 / (2 sigma^2)``. Softmax gives
every centre a positive share, however far it is. Entmax-1.5 gives exact
zeros to the far centres, and is *exactly* one-hot for a sample whose two
nearest centres differ in squared distance by at least ``4 sigma^2``.

Here the same 2-D data are clustered with both maps at the same width.
"""

# %%
# Fit both maps at one width
# --------------------------

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from skrbfkmeans import RBFKMeans
from skrbfkmeans.plotting import plot_responsibilities

X, _ = make_blobs(n_samples=600, centers=4, cluster_std=1.3, random_state=2)
sigma = 1.5
estimators = {
    activation: RBFKMeans(
        n_clusters=4, sigma=sigma, activation=activation, random_state=0
    ).fit(X)
    for activation in ("softmax", "entmax15")
}
for activation, est in estimators.items():
    resp = est.predict_proba(X)
    support = (resp > 0).sum(axis=1)
    print(
        f"{activation:>8}: {np.mean(resp == 0):5.1%} of the responsibilities are "
        f"exactly 0; {np.mean(support == 1):5.1%} of the samples are one-hot; "
        f"inertia {est.inertia_:.1f}"
    )

# %%
# Each sample is drawn in the mix of its centres' colours, weighted by its
# responsibilities: one-hot samples have their centre's colour, soft ones a
# blend. With softmax (left) the whole border region is blended; with
# entmax-1.5 (middle) only a band of width about ``4 sigma^2`` in squared
# distance is. Right: how many centres share each sample under entmax-1.5.

fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), layout="constrained")
for ax, est in zip(axes[:2], estimators.values()):
    plot_responsibilities(est, X, ax=ax)
support = (estimators["entmax15"].predict_proba(X) > 0).sum(axis=1)
scatter = axes[2].scatter(
    X[:, 0], X[:, 1], c=support, cmap="viridis", s=12, vmin=1, vmax=4
)
fig.colorbar(scatter, ax=axes[2], ticks=[1, 2, 3, 4], label="non-zero responsibilities")
axes[2].set_title("entmax15: size of the support")
axes[2].set_aspect("equal", adjustable="datalim")
plt.show()

# %%
# The margin rule
# ---------------
# Entmax-1.5 is one-hot exactly when the margin ``d_(2) - d_(1)`` (squared
# distance to the second-nearest centre minus that to the nearest) is at
# least ``4 sigma^2``. Softmax's runner-up responsibility only decays like
# ``exp(-margin / (2 sigma^2))``: small, never zero (until it underflows).

est = estimators["entmax15"]
d2 = est.transform(X) ** 2
d2.sort(axis=1)
margin = d2[:, 1] - d2[:, 0]
one_hot = est.predict_proba(X).max(axis=1) == 1
print(
    f"one-hot samples:     smallest margin / (4 sigma^2) = "
    f"{margin[one_hot].min() / (4 * sigma**2):.3f}"
)
print(
    f"soft samples:        largest margin / (4 sigma^2)  = "
    f"{margin[~one_hot].max() / (4 * sigma**2):.3f}"
)

fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
order = np.argsort(margin)
for activation, marker in [("softmax", "."), ("entmax15", "x")]:
    resp = np.sort(estimators[activation].predict_proba(X), axis=1)
    runner_up = resp[:, -2]
    shown = runner_up > 0
    ax.semilogy(
        margin[order][shown[order]] / sigma**2,
        runner_up[order][shown[order]],
        marker,
        label=f"{activation} (non-zero values)",
    )
ax.axvline(4, color="k", linestyle="--", label=r"margin $= 4\sigma^2$")
ax.set_xlabel(r"margin $d_{(2)} - d_{(1)}$, in units of $\sigma^2$")
ax.set_ylabel("second-largest responsibility")
ax.legend()
plt.show()
