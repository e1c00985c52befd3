"""scikit-learn's own KMeans tests, run against our estimators.

The installed scikit-learn's ``sklearn/cluster/tests/test_k_means.py`` is
loaded twice with ``sklearn.cluster.KMeans`` replaced by a thin subclass of
each of our estimators that takes KMeans's signature: ``RBFKMeans`` at zero
width (K-Means itself) and ``AnnealedRBFKMeans``. Its KMeans tests are
collected here under ``test_sigma0__*`` and ``test_annealed__*``; tests of
MiniBatchKMeans, of KMeans's private helpers and of Elkan-only behaviour are
left out (``_EXCLUDED``), and parametrisations over ``MiniBatchKMeans`` are
skipped. The module skips itself where the file is absent (scikit-learn
installed without its tests).
"""

import importlib.util
import os

import numpy as np
import pytest
import sklearn
import sklearn.cluster

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

_PATH = os.path.join(
    os.path.dirname(sklearn.__file__), "cluster", "tests", "test_k_means.py"
)

# Tests of MiniBatchKMeans, of KMeans's private helpers and of Elkan only.
_EXCLUDED = {
    "test_relocate_empty_clusters",  # _relocate_empty_clusters_* helpers
    "test_euclidean_distance",  # private distance helpers
    "test_inertia",  # private _inertia_* helpers
    "test_is_same_clustering",  # private helper
    "test_k_means_function",  # the k_means function, KMeans's own module
    "test_kmeans_plusplus_wrong_params",  # kmeans_plusplus, a function
    "test_kmeans_plusplus_output",
    "test_kmeans_plusplus_norms",
    "test_kmeans_plusplus_dataorder",
    "test_warning_elkan_1_cluster",  # Elkan-only warning
    "test_kmeans_elkan_iter_attribute",  # Elkan's n_iter_ bookkeeping
    "test_kmeans_init_auto_with_initial_centroids",  # private _n_init
    "test_n_init_auto",  # private _n_init
    "test_sample_weight_init",  # private _init_centroids
    "test_sample_weight_zero",  # private _init_centroids
}


def _with_kmeans_signature(Estimator, **fixed):
    """A subclass of ``Estimator`` named KMeans, taking KMeans's parameters.

    ``fixed`` are our parameters, set whatever KMeans passes (its messages
    name the class, hence the name).
    """

    class KMeans(Estimator):
        def __init__(
            self,
            n_clusters=8,
            *,
            init="k-means++",
            n_init="auto",
            max_iter=300,
            tol=1e-4,
            verbose=0,
            random_state=None,
            copy_x=True,
            algorithm="lloyd",
        ):
            super().__init__(
                n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol,
                verbose=verbose, random_state=random_state, copy_x=copy_x,
                algorithm=algorithm, **fixed,
            )  # fmt: skip

    return KMeans


_STAND_INS = {
    "sigma0": _with_kmeans_signature(RBFKMeans, sigma=0),
    "annealed": _with_kmeans_signature(AnnealedRBFKMeans),
}


def _load(stand_in, name):
    """scikit-learn's test module with ``KMeans`` replaced by ``stand_in``."""
    spec = importlib.util.spec_from_file_location(name, _PATH)
    module = importlib.util.module_from_spec(spec)
    original = sklearn.cluster.KMeans
    sklearn.cluster.KMeans = stand_in
    try:
        spec.loader.exec_module(module)
    finally:
        sklearn.cluster.KMeans = original
    return module


if not os.path.exists(_PATH):
    pytest.skip(
        "scikit-learn's KMeans tests are not installed", allow_module_level=True
    )

for _prefix, _stand_in in _STAND_INS.items():
    _module = _load(_stand_in, f"_sklearn_kmeans_tests_{_prefix}")
    for _name, _test in vars(_module).items():
        if (
            _name.startswith("test_")
            and callable(_test)
            and "minibatch" not in _name
            and _name not in _EXCLUDED
        ):
            globals()[f"test_{_prefix}__{_name[5:]}"] = _test


@pytest.fixture
def global_dtype():
    return np.float64


@pytest.fixture(autouse=True)
def _kmeans_cases_only(request):
    callspec = getattr(request.node, "callspec", None)
    if callspec is None:
        return
    if any(
        value is sklearn.cluster.MiniBatchKMeans for value in callspec.params.values()
    ):
        pytest.skip("a MiniBatchKMeans case")
