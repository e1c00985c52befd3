"""What a KMeans user's code sees: the same parameters, errors and warnings.

The oracle is scikit-learn's ``KMeans`` itself: each case runs it and our
estimators on the same input and compares the exception or warning type and
text, with the class name substituted.
"""

import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.cluster import KMeans

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

ESTIMATORS = [RBFKMeans, AnnealedRBFKMeans]
X = np.random.RandomState(0).rand(60, 3)


def _outcome(Estimator, **params):
    """``(error type, text)`` or ``(warning types and texts)`` of one fit."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            Estimator(3, **params).fit(X)
        except Exception as exc:  # noqa: BLE001 - the oracle decides
            return type(exc).__name__, str(exc).replace(Estimator.__name__, "EST")
    return sorted(
        (w.category.__name__, str(w.message).replace(Estimator.__name__, "EST"))
        for w in caught
        if issubclass(w.category, (RuntimeWarning, UserWarning))
    )


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize(
    "params",
    [
        {"init": X[:2]},  # too few centres
        {"init": X[:3, :2]},  # too few features
        {"init": X[:3], "n_init": 5},  # explicit init with several runs
        {"algorithm": "auto"},  # no longer a KMeans option
        {"algorithm": "full"},
    ],
    ids=["init-rows", "init-features", "init-n_init", "algorithm-auto", "algo-full"],
)
def test_same_errors_and_warnings_as_kmeans(Estimator, params):
    # Check that KMeans's messages come back word for word.
    expected = _outcome(KMeans, **params)
    assert _outcome(Estimator, **params) == expected


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("algorithm", ["lloyd", "elkan"])
def test_algorithm_is_accepted_and_changes_nothing(Estimator, algorithm):
    # Check that KMeans's algorithm parameter is accepted and, as for
    # KMeans, does not change the result.
    ref = Estimator(3, random_state=0).fit(X)
    est = Estimator(3, random_state=0, algorithm=algorithm).fit(X)
    assert est.get_params()["algorithm"] == algorithm
    np.testing.assert_array_equal(est.cluster_centers_, ref.cluster_centers_)


@pytest.mark.parametrize("Estimator", ESTIMATORS)
def test_every_kmeans_parameter_is_accepted(Estimator):
    # Check that KMeans's constructor parameters exist with KMeans's names.
    ours = set(Estimator().get_params())
    missing = set(KMeans().get_params()) - ours
    assert not missing, missing


def test_anneal_init_with_several_runs_warns():
    # Check the deterministic init="anneal" with n_init > 1: one run and a
    # RuntimeWarning that says why.
    with pytest.warns(RuntimeWarning, match=re.escape("init='anneal' is determ")):
        est = AnnealedRBFKMeans(3, n_init=4).fit(X)
    assert est.certified_


@pytest.mark.parametrize(
    "make, category",
    [
        (lambda: RBFKMeans(3, sigma=0.1, max_iter=1), "ConvergenceWarning"),
        (lambda: AnnealedRBFKMeans(3, init=X[:3], max_iter=1), "ConvergenceWarning"),
        (lambda: RBFKMeans(3, init=X[:3], n_init=3), "RuntimeWarning"),
        (lambda: AnnealedRBFKMeans(3, init=X[:3], n_init=3), "RuntimeWarning"),
        (lambda: AnnealedRBFKMeans(3, n_init=3), "RuntimeWarning"),
    ],
)
def test_warnings_name_the_callers_line(make, category):
    # Check that a warning of fit is attributed to the line that called fit
    # (this file), not to a frame inside the package or scikit-learn's
    # fit wrapper, whatever the depth of the call that issued it.
    est = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    mine = [w for w in caught if w.category.__name__ == category]
    assert mine, [str(w.message) for w in caught]
    assert {w.filename for w in mine} == {__file__}


def test_distinct_clusters_warning_names_the_callers_line():
    # Check the same for the warning about duplicate points, issued after
    # the fit's iterations (RBFKMeans at zero width, as KMeans).
    X_dup = np.repeat(X[:2], 10, axis=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RBFKMeans(3, sigma=0, n_init=1, random_state=0).fit(X_dup)
    mine = [w for w in caught if "distinct clusters" in str(w.message)]
    assert mine and {w.filename for w in mine} == {__file__}


@pytest.mark.parametrize("Estimator", ESTIMATORS)
@pytest.mark.parametrize("init, runs", [("k-means++", 1), ("random", 10)])
def test_n_init_auto_follows_kmeans(Estimator, init, runs, monkeypatch):
    # Check that n_init="auto" makes KMeans's number of runs: one for
    # k-means++, ten for "random" (counted as initialisations drawn), and
    # that the fit equals the one with that n_init.
    draws = []
    original = Estimator._init_centroids

    def counting(self, *args, **kwargs):
        draws.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Estimator, "_init_centroids", counting)
    auto = Estimator(3, init=init, n_init="auto", random_state=0).fit(X)
    assert len(draws) == runs
    explicit = Estimator(3, init=init, n_init=runs, random_state=0).fit(X)
    assert_array_equal(auto.cluster_centers_, explicit.cluster_centers_)
