"""
Choosing the width ``sigma`` with a grid search
===============================================

:class:`~skrbfkmeans.RBFKMeans` has one parameter that ``KMeans`` does not:
the width ``sigma`` of its radial basis functions. Its responsibilities are
the rows of :func:`sklearn.metrics.pairwise.rbf_kernel` between the samples
and the centres, with ``gamma = 1 / (2 sigma**2)``, normalised to sum to one
(softmax), or their sparse counterpart (entmax-1.5).

Like any hyper-parameter, ``sigma`` is chosen by cross-validation against a
score. Which score matters:

- the estimator's own ``score`` is minus the hard K-Means inertia of the
  held-out samples. It measures the centres only, and soft centres pulled
  towards each other never beat hard ones: it favours the smallest width;
- the held-out log-likelihood of the mixture that the softmax
  responsibilities are the posteriors of (equal weights, spherical Gaussians
  of variance ``sigma**2`` at the centres) measures the responsibilities
  too: too small a width makes every sample overconfident, too large a width
  blurs the clusters.
"""

# %%
# Blobs of known spread
# ---------------------
# Five blobs whose samples have a standard deviation of 1.0 around their
# centres in each coordinate.

import warnings

import matplotlib.pyplot as plt
import numpy as np
from scipy.special import logsumexp
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold

from skrbfkmeans import RBFKMeans

X, _ = make_blobs(n_samples=1500, centers=5, cluster_std=1.0, random_state=2)

# The responsibilities are the normalised rows of rbf_kernel.
km = RBFKMeans(n_clusters=5, sigma=1.0, random_state=0).fit(X)
kernel = rbf_kernel(X, km.cluster_centers_, gamma=1 / (2 * km.sigma_**2))
print(
    "predict_proba == normalised rbf_kernel:",
    np.allclose(km.predict_proba(X), kernel / kernel.sum(axis=1, keepdims=True)),
)

# %%
# Two scores, one grid
# --------------------
# ``mixture_log_likelihood`` is a scorer (``scorer(estimator, X)``): the mean
# held-out log-density of the equal-weight spherical mixture at the fitted
# centres and width, computed from ``transform`` (distances to the centres).


def mixture_log_likelihood(estimator, X, y=None):
    sigma = estimator.sigma_
    k, n_features = estimator.cluster_centers_.shape
    sq_dist = estimator.transform(X) ** 2
    log_density = (
        logsumexp(-sq_dist / (2 * sigma**2), axis=1)
        - np.log(k)
        - 0.5 * n_features * np.log(2 * np.pi * sigma**2)
    )
    return float(log_density.mean())


sigmas = np.geomspace(0.1, 10, 13)
cv = KFold(n_splits=5, shuffle=True, random_state=0)
# Above the first critical width the centres merge at the data mean, which
# the fit reports with a ConvergenceWarning: expected at the top of the grid.
warnings.simplefilter("ignore", ConvergenceWarning)
searches = {
    scoring: GridSearchCV(
        RBFKMeans(n_clusters=5, random_state=0),
        {"sigma": sigmas},
        scoring=None if scoring == "score (-inertia)" else mixture_log_likelihood,
        cv=cv,
    ).fit(X)
    for scoring in ["score (-inertia)", "mixture log-likelihood"]
}
for scoring, search in searches.items():
    print(f"{scoring:>24}: best sigma = {search.best_params_['sigma']:.3g}")

# %%
# The mixture log-likelihood peaks near the spread of the blobs (1.0). The
# inertia gets better as the width shrinks towards K-Means and is flat below
# the width at which the blobs stop pulling on each other's centres: its
# "best" width is any of those, a choice among ties.

fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
for ax, (scoring, search) in zip(axes, searches.items()):
    results = search.cv_results_
    ax.errorbar(
        sigmas,
        results["mean_test_score"],
        yerr=results["std_test_score"],
        marker="o",
        capsize=3,
    )
    ax.axvline(search.best_params_["sigma"], color="C3", linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("sigma")
    ax.set_title(f"held-out {scoring}")
plt.show()

# %%
# In practice
# -----------
# ``sigma="auto"`` (the default) takes a quarter of the median distance
# between neighbouring initial centres; it keeps clusters as far apart as
# those centres separate. To tune the width for a task, search it with the
# score of the task (a classifier's accuracy on the responsibilities, a
# held-out likelihood as above), not with ``score``.
print(f"sigma='auto' resolves to {RBFKMeans(5, random_state=0).fit(X).sigma_:.3g}")
