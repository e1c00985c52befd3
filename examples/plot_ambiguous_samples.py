"""
Flagging ambiguous samples with sparse responsibilities
=======================================================

With ``activation="entmax15"``, :meth:`~skrbfkmeans.RBFKMeans.predict_proba`
returns responsibilities with exact zeros. The number of non-zero entries of
a row, its *support*, is a count with a clear meaning: a sample is shared
between clusters exactly when its squared distances to the two nearest
centres differ by less than ``4 sigma**2``. A support of one is a confident
assignment; two or more flags a sample on a boundary, with no threshold to
tune beyond the width itself.

Here the flags go downstream: the ambiguous samples are sent for review and
the rest are labelled automatically.
"""

# %%
# Three overlapping blobs
# -----------------------

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs

from skrbfkmeans import RBFKMeans

X, y = make_blobs(
    n_samples=900,
    centers=[[0, 0], [4, 0], [2, 3.5]],
    cluster_std=1.0,
    random_state=0,
)
km = RBFKMeans(n_clusters=3, activation="entmax15", sigma=0.75, random_state=0)
resp = km.fit(X).predict_proba(X)
support = (resp > 0).sum(axis=1)
for size in range(1, 4):
    print(f"support {size}: {np.sum(support == size):4d} samples")

# %%
# The support is the margin rule
# ------------------------------
# The support is at least two exactly when the margin, the squared distance
# to the second-nearest centre less that to the nearest, is below
# ``4 sigma_**2``.

sq_dist = np.sort(km.transform(X) ** 2, axis=1)
margin = sq_dist[:, 1] - sq_dist[:, 0]
print(
    "support > 1 <=> margin < 4 sigma_**2:",
    np.array_equal(support > 1, margin < 4 * km.sigma_**2),
)

# %%
# Automatic labels and a review queue
# -----------------------------------
# The confident samples keep their label; the accuracy on them is compared
# with that on the flagged ones (cluster labels matched to the generating
# labels by majority).

labels = resp.argmax(axis=1)
mapping = {j: np.bincount(y[labels == j]).argmax() for j in range(3)}
correct = np.array([mapping[j] for j in labels]) == y
confident = support == 1
print(
    f"confident: {confident.sum()} samples, {correct[confident].mean():.1%} correct; "
    f"flagged for review: {(~confident).sum()} samples, "
    f"{correct[~confident].mean():.1%} correct"
)

fig, ax = plt.subplots(figsize=(6, 5), layout="constrained")
for size, marker, color in [(1, ".", "0.6"), (2, "o", "C0"), (3, "s", "C3")]:
    rows = support == size
    ax.scatter(*X[rows].T, s=12, marker=marker, color=color, label=f"support {size}")
ax.scatter(*km.cluster_centers_.T, marker="x", s=120, color="k", label="centres")
ax.set_title("entmax-1.5 support size (sigma = 0.75)")
ax.legend()
plt.show()

# %%
# The width sets how wide the boundary band is: the band of shared samples
# has a squared-distance margin below ``4 sigma**2``. A larger ``sigma``
# flags more samples, ``sigma=0`` none.
