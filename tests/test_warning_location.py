"""Warnings of a fit name the user's line, also through scikit-learn.

A Pipeline, a search and the ``set_output`` wrapper of ``fit_transform``
call the estimator's methods for the user: the warning must name the line
that called them (this file), not a frame of scikit-learn or joblib.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

# Two distinct points, three clusters: "Number of distinct clusters (2)
# found smaller than n_clusters (3)", a ConvergenceWarning, on every fit.
X_DUP = np.repeat([[0.0, 0.0], [1.0, 3.0]], 10, axis=0)


def _distinct_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    found = [
        w
        for w in caught
        if issubclass(w.category, ConvergenceWarning)
        and "distinct clusters" in str(w.message)
    ]
    assert found, [str(w.message) for w in caught]
    return found


def _pipeline(Estimator):
    return make_pipeline(StandardScaler(), Estimator(3, sigma=0, random_state=0))


@pytest.mark.parametrize(
    "method", ["fit", "fit_transform", "fit_predict"], ids=lambda m: m
)
def test_warning_in_a_pipeline_names_the_callers_line(method):
    # Check that the distinct-clusters warning of a fit made by a Pipeline
    # (through fit, fit_transform's set_output wrapper, fit_predict) is
    # attributed to this file, not to sklearn/pipeline.py or
    # sklearn/utils/_set_output.py.
    pipe = _pipeline(RBFKMeans)
    found = _distinct_warnings(lambda: getattr(pipe, method)(X_DUP))
    assert {w.filename for w in found} == {__file__}


def test_warning_of_fit_transform_names_the_callers_line():
    # Check the same for fit_transform called directly: set_output wraps
    # it in scikit-learn's module.
    est = RBFKMeans(3, sigma=0, random_state=0)
    found = _distinct_warnings(lambda: est.fit_transform(X_DUP))
    assert {w.filename for w in found} == {__file__}


def test_warning_in_a_grid_search_names_the_callers_line():
    # Check that the fits of a GridSearchCV, run by joblib inside
    # scikit-learn (on the folds and the refit), warn at this file's line,
    # for a Pipeline too.
    search = GridSearchCV(RBFKMeans(3, random_state=0), {"sigma": [0.0]}, cv=2)
    found = _distinct_warnings(lambda: search.fit(X_DUP))
    assert {w.filename for w in found} == {__file__}
    search = GridSearchCV(_pipeline(RBFKMeans), {"rbfkmeans__n_init": [1, 2]}, cv=2)
    found = _distinct_warnings(lambda: search.fit(X_DUP))
    assert {w.filename for w in found} == {__file__}
    # One line: the call of search.fit.
    assert len({w.lineno for w in found}) == 1


def test_warning_in_cross_validate_of_an_annealing():
    # Check an AnnealedRBFKMeans in a Pipeline under cross_validate.
    pipe = make_pipeline(StandardScaler(), AnnealedRBFKMeans(3))
    found = _distinct_warnings(lambda: cross_validate(pipe, X_DUP, cv=2))
    assert {w.filename for w in found} == {__file__}
