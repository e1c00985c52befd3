"""
K-Means as a differentiable layer
=================================

:func:`~skrbfkmeans.rbf_kmeans_loss` is the K-Means objective at a width
``sigma``, differentiable in the centres *and in the data*. Put it after a
learnable map and gradient descent shapes the map so that its output
clusters.

Here the map is a linear projection ``Y = X W`` from 10 dimensions to 2.
The data hide four clusters in a plane, and eight noise dimensions with
*more* variance than the clusters: principal component analysis keeps the
noise and loses the clusters. Minimising the K-Means loss of the projection
over ``W`` finds the plane.
"""

# %%
# The data
# --------
# Four blobs in a plane, plus eight Gaussian noise directions with standard
# deviation 4 (the blobs' centres are 3 away from the origin), mixed by a
# random rotation. The data are whitened (every direction gets unit variance)
# so that no projection can lower the loss by shrinking the data, and ``W``
# stays orthonormal.

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from skrbfkmeans import RBFKMeans, rbf_kmeans_loss

rng = np.random.default_rng(0)
n_clusters, n_features = 4, 10
plane, y = make_blobs(
    n_samples=600,
    centers=[[-3, -3], [3, -3], [-3, 3], [3, 3]],
    cluster_std=0.7,
    random_state=0,
)
noise = 4.0 * rng.standard_normal((plane.shape[0], n_features - 2))
rotation, _ = np.linalg.qr(rng.standard_normal((n_features, n_features)))
X = np.hstack([plane, noise]) @ rotation

X = X - X.mean(axis=0)
eigenvalues, eigenvectors = np.linalg.eigh(np.cov(X, rowvar=False))
X_white = X @ eigenvectors / np.sqrt(eigenvalues)


def clustering_ari(Y):
    """Adjusted Rand index of a K-Means clustering of ``Y`` against ``y``."""
    labels = RBFKMeans(n_clusters, random_state=0).fit_predict(Y)
    return adjusted_rand_score(y, labels)


Y_pca = PCA(n_components=2).fit_transform(X)
print(f"PCA projection: ARI of its clustering = {clustering_ari(Y_pca):.2f}")

# %%
# The gradient is exact
# ---------------------
# ``rbf_kmeans_loss(..., return_gradient=True)`` returns the loss and its
# gradients with respect to the centres and to the data. Both follow from
# Danskin's theorem: the loss is a minimum over the responsibilities, so
# they are exact, not approximations. A central finite difference agrees.

sigma = 0.5
W, _ = np.linalg.qr(rng.standard_normal((n_features, 2)))
Y = X_white @ W
centers = RBFKMeans(n_clusters, sigma=sigma, random_state=0).fit(Y).cluster_centers_
loss, grad_centers, grad_Y = rbf_kmeans_loss(
    Y, centers, sigma=sigma, return_gradient=True
)
direction = rng.standard_normal(Y.shape)
h = 1e-5
finite_difference = (
    rbf_kmeans_loss(Y + h * direction, centers, sigma=sigma)
    - rbf_kmeans_loss(Y - h * direction, centers, sigma=sigma)
) / (2 * h)
print(
    f"directional derivative: analytic {np.sum(grad_Y * direction):.8f}, "
    f"finite difference {finite_difference:.8f}"
)

# %%
# Training the projection
# -----------------------
# Each step fits the centres to the current projection (:class:`RBFKMeans`,
# warm-started from the previous centres: EM is gradient descent on the
# centres with the learning rate ``1 / (2 N_j)``), then takes a gradient step
# on ``W``. With the centres at their optimum the gradient of the loss with
# respect to ``W`` is ``X^T dloss/dY`` (Danskin again). After each step ``W``
# is mapped back to the nearest orthonormal matrix (its polar factor).
#
# The loss is not convex in ``W``: a start can settle on a projection that
# keeps one of the two directions that separate the blobs and a noise
# direction. As ``KMeans(n_init=...)`` does, eight random starts are run and
# the lowest final loss wins. The width cools from 0.8 (just below the first
# critical width of whitened data, 1) to 0.3.


def train_projection(X, W, sigmas, learning_rate):
    """Projected gradient descent on ``W``; returns W and the loss per step."""
    n_samples = X.shape[0]
    centers, losses = "k-means++", []
    for sigma in sigmas:
        Y = X @ W
        centers = (
            RBFKMeans(n_clusters, sigma=sigma, init=centers, random_state=0)
            .fit(Y)
            .cluster_centers_
        )
        loss, _, grad_Y = rbf_kmeans_loss(Y, centers, sigma=sigma, return_gradient=True)
        losses.append(loss / n_samples)
        grad_W = X.T @ grad_Y
        # Keep the component tangent to the orthonormal matrices.
        grad_W -= W @ (W.T @ grad_W + grad_W.T @ W) / 2
        U, _, Vt = np.linalg.svd(
            W - learning_rate / n_samples * grad_W, full_matrices=False
        )
        W = U @ Vt
    return W, np.array(losses)


sigmas = np.geomspace(0.8, 0.3, 100)
runs = []
for start in range(8):
    W0, _ = np.linalg.qr(np.random.default_rng(start).standard_normal((n_features, 2)))
    W, losses = train_projection(X_white, W0, sigmas, learning_rate=1.0)
    runs.append((losses[-1], W, W0, losses))
    print(
        f"start {start}: loss per sample {losses[0]:.3f} -> {losses[-1]:.3f}, "
        f"ARI {clustering_ari(X_white @ W0):.2f} -> {clustering_ari(X_white @ W):.2f}"
    )

final_loss, W_best, W0_best, losses_best = min(runs, key=lambda run: run[0])
print(
    f"kept the start with the lowest loss ({final_loss:.3f}): "
    f"ARI {clustering_ari(X_white @ W_best):.2f}"
)

# %%
# The loss goes down, the clusters appear
# ---------------------------------------
# Left: the loss per sample of every start against the step (it also falls
# because the width cools: at a smaller width the loss is closer to the
# K-Means distortion). Right three: the projections coloured by the hidden
# blob labels.

fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), layout="constrained")
for loss, _, _, losses in runs:
    best = loss == final_loss
    axes[0].plot(
        losses,
        color="C3" if best else "0.6",
        lw=2 if best else 1,
        label="kept" if best else None,
    )
axes[0].set_xlabel("gradient step")
axes[0].set_ylabel("rbf_kmeans_loss / n_samples")
axes[0].set_title("training")
axes[0].legend()
for ax, Z, title in [
    (axes[1], Y_pca, "PCA"),
    (axes[2], X_white @ W0_best, "random start"),
    (axes[3], X_white @ W_best, "learned projection"),
]:
    ax.scatter(Z[:, 0], Z[:, 1], c=y, s=6, cmap="tab10", vmax=9)
    ax.set_title(f"{title} (ARI {clustering_ari(Z):.2f})")
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()
