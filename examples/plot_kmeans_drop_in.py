"""
In place of KMeans in a pipeline
================================

:class:`~skrbfkmeans.RBFKMeans` and :class:`~skrbfkmeans.AnnealedRBFKMeans`
take :class:`sklearn.cluster.KMeans`'s parameters and have its methods and
attributes, so they fit wherever ``KMeans`` does: here as a feature
transformer inside a :class:`~sklearn.pipeline.Pipeline` whose number of
clusters :class:`~sklearn.model_selection.GridSearchCV` tunes. The interface
is KMeans's; the fit is not, unless ``sigma=0``: ``RBFKMeans`` runs soft
K-Means at its width ``sigma_``, so its centres, and the distances
``transform`` returns, differ from KMeans's.

As in scikit-learn's own "KMeans as preprocessing" idiom, ``transform``
returns the Euclidean distance of each sample to each centre, and a logistic
regression classifies the handwritten digits from those distances.
"""

# %%
# One pipeline, two clusterers
# ----------------------------
# The only line that changes between the two searches is the clusterer; the
# grid of ``RBFKMeans`` also searches its map from distances to
# responsibilities, a parameter ``KMeans`` does not have.

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import RBFKMeans

X, y = load_digits(return_X_y=True)
n_clusters_grid = [10, 20, 40]
cv = StratifiedKFold(n_splits=3, shuffle=True, random_state=0)


def make_pipeline(clusterer):
    return Pipeline(
        [
            ("cluster", clusterer),
            ("scale", StandardScaler()),
            ("classify", LogisticRegression(max_iter=1000)),
        ]
    )


searches = {
    "KMeans": GridSearchCV(
        make_pipeline(KMeans(n_init=1, random_state=0)),
        {"cluster__n_clusters": n_clusters_grid},
        cv=cv,
    ),
    "RBFKMeans": GridSearchCV(
        make_pipeline(RBFKMeans(random_state=0)),
        {
            "cluster__n_clusters": n_clusters_grid,
            "cluster__activation": ["softmax", "entmax15"],
        },
        cv=cv,
    ),
}
for name, search in searches.items():
    start = time.perf_counter()
    search.fit(X, y)
    print(
        f"{name:>9}: best {search.best_params_}, CV accuracy "
        f"{search.best_score_:.3f} ({time.perf_counter() - start:.1f} s)"
    )

# %%
# The fitted pipeline is used as any other
# ----------------------------------------
# ``best_estimator_`` is refitted on all the data; its clusterer has the
# attributes of ``KMeans`` and, unlike ``KMeans``, responsibilities.

best = searches["RBFKMeans"].best_estimator_
rbf = best.named_steps["cluster"]
resp = rbf.predict_proba(X)
print(
    f"{rbf.activation}, n_clusters={rbf.n_clusters}: inertia_ = {rbf.inertia_:.4g}, "
    f"sigma_ = {rbf.sigma_:.3g}, n_iter_ = {rbf.n_iter_}"
)
print(
    f"predict_proba: rows sum to 1: {np.allclose(resp.sum(axis=1), 1)}; "
    f"median largest responsibility {np.median(resp.max(axis=1)):.2f}; "
    f"accuracy on the training data {best.score(X, y):.3f}"
)

# %%
# Accuracy against the number of clusters
# ---------------------------------------

fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
results = searches["KMeans"].cv_results_
ax.errorbar(
    n_clusters_grid,
    results["mean_test_score"],
    yerr=results["std_test_score"],
    marker="o",
    capsize=3,
    label="KMeans",
)
results = searches["RBFKMeans"].cv_results_
for activation, marker in [("softmax", "s"), ("entmax15", "^")]:
    rows = results["param_cluster__activation"] == activation
    ax.errorbar(
        np.asarray(results["param_cluster__n_clusters"][rows], dtype=int),
        results["mean_test_score"][rows],
        yerr=results["std_test_score"][rows],
        marker=marker,
        capsize=3,
        label=f"RBFKMeans ({activation})",
    )
ax.set_xscale("log")
ax.set_xticks(n_clusters_grid, n_clusters_grid)
ax.minorticks_off()
ax.set_xlabel("n_clusters")
ax.set_ylabel("cross-validated accuracy")
ax.set_title("digits: distances to the centres as features")
ax.legend()
plt.show()
