"""The estimators' shared base: parameters, validation, working units, prediction.

``RBFKMeans`` and ``AnnealedRBFKMeans`` share KMeans's parameters and
methods; this module validates the data and weights, makes the rows of a
fit in working units (``_rows.fit_rows``, ``_dask.dask_rows``), sets the
fitted attributes of every fit at once (``_set_fitted``, after its
warnings), and predicts (``_rows.NewRows``, ``_dask.NewDaskRows``). Every
public method runs under the thread policy of ``_policy``; every fitting
method is all or nothing (``all_or_nothing``).
"""

import functools
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
)
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning, InconsistentVersionWarning
from sklearn.metrics.pairwise import euclidean_distances, pairwise_distances_argmin
from sklearn.utils import check_array, check_random_state, gen_batches
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _is_arraylike_not_scalar,
    check_is_fitted,
    validate_data,
)

from . import _dask
from ._policy import one_blas_thread
from ._rows import NewRows, fit_rows, seeding_rows, tolerance, working_rows
from ._scaling import Units
from ._validation import check_n_samples, check_sample_weight, warn_user
from ._version import __version__


class FitSetup(NamedTuple):
    """What every run of a fit shares, resolved once before the runs.

    ``rows`` in working units, ``init`` in them, the number of runs, the
    random state and ``runs``: the estimator's own settings
    (its ``_prepare_runs``, a frozen record too).
    """

    rows: object
    init: object
    n_init: int
    random_state: object
    runs: object


def all_or_nothing(method):
    """Run a fitting method so that it completes or leaves the estimator as it was.

    A fit computes its result into locals and assigns every fitted attribute
    at once, after its warnings (``_set_fitted``); validation sets a few
    attributes before the work (``n_features_in_``, ``feature_names_in_``).
    Whatever interrupts the method (an error, a ``KeyboardInterrupt``, a
    warning raised as an error), the attributes it had before are put back,
    so that a failed refit keeps the previous model. The attributes are
    restored as objects (the fit never writes into a fitted array), in one
    assignment of the saved namespace: CPython delivers a signal (a second
    ``KeyboardInterrupt``) only at a call or a loop's jump, and an
    attribute store makes neither, so no interrupt can fall between
    emptying the namespace and filling it again.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = self.__dict__.copy()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__ = before
            raise

    return wrapper


class SavedVersionWarning(InconsistentVersionWarning):
    """A model saved by another version of skrbfkmeans was loaded."""

    def __init__(self, estimator_name, current_version, original_version):
        super().__init__(
            estimator_name=estimator_name,
            current_sklearn_version=current_version,
            original_sklearn_version=original_version,
        )

    def __str__(self):
        return (
            f"Trying to unpickle estimator {self.estimator_name} from "
            f"skrbfkmeans version {self.original_sklearn_version} when using "
            f"version {self.current_sklearn_version}. This might lead to "
            "breaking code or invalid results: refit the model with this "
            "version, or load it with the version that saved it."
        )


# sigma="auto" leaves out the initial centres whose nearest rows weigh at most
# this fraction of the mean weight per centre: a few far rows, which
# k-means++ draws first (``_auto_sigma``).
LIGHT_CENTRE = 0.01


def _auto_sigma(centers, X, sample_weight):
    """Default width: a quarter of the median spacing of the initial centres.

    Each distinct centre's spacing is the distance to its nearest other
    distinct centre (coincident initial centres, from duplicate points, do
    not shrink the width to zero). A sample at a centre of typical spacing
    ``s`` then has the entmax margin ``s^2 >= 4 sigma^2 = s^2 / 4``: clusters
    as far apart as the centres stay apart. The median leaves out the light
    centres, whose nearest rows weigh at most ``LIGHT_CENTRE`` of the mean
    weight per centre (while two or more remain): k-means++ draws far rows
    first, and a few far rows that took half the centres made the width
    theirs (3 rows at 1000 times the spread of 1000 rows in 5 blobs, k=5:
    widths of 44-170 instead of 1.3-3.6, and 4 to 30 times KMeans's
    inertia). With a single distinct centre the width falls back to the
    root mean feature variance, then to 1.
    """
    # Relative to one of them: far from the origin, the distances between
    # centres cancel (and the first centre, unlike the weighted mean, is the
    # same for weights and repeated rows).
    distinct, which = np.unique(centers - centers[0], axis=0, return_inverse=True)
    if distinct.shape[0] > 1:
        d2 = euclidean_distances(distinct, squared=True)
        np.fill_diagonal(d2, np.inf)
        spacing = np.sqrt(d2.min(axis=1))
        # The rows nearest each distinct centre (those of its copies too);
        # dense rows centred as the centres, a batch at a time.
        if sp.issparse(X):
            nearest = pairwise_distances_argmin(X, centers)
        else:
            seeds = centers - centers[0]
            nearest = np.concatenate(
                [
                    pairwise_distances_argmin(X[batch] - centers[0], seeds)
                    for batch in gen_batches(X.shape[0], 4096)
                ]
            )
        nearest = which.ravel()[nearest]
        w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        mass = np.bincount(nearest, weights=w, minlength=distinct.shape[0])
        # Light centres stand for a few far rows: their spacing is not one
        # the other rows see.
        kept = mass > LIGHT_CENTRE * mass.sum() / distinct.shape[0]
        spacing = float(np.median(spacing[kept] if kept.sum() > 1 else spacing))
        if spacing > 0 and np.isfinite(spacing):
            return 0.25 * spacing
    scale = float(np.sqrt(tolerance(X, sample_weight, 1.0)))
    return scale if scale > 0 and np.isfinite(scale) else 1.0


class _BaseRBFKMeans(
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    ClusterMixin,
    BaseEstimator,
):
    """Shared parameters, validation and prediction of the RBF estimators."""

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "init": [StrOptions({"k-means++", "random"}), callable, "array-like"],
        "n_init": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "verbose": ["verbose"],
        "random_state": ["random_state"],
        "copy_x": ["boolean"],
        "algorithm": [StrOptions({"lloyd", "elkan"})],
    }

    # -- validation -------------------------------------------------------

    def _validate_X(self, X, reset=True):
        return validate_data(
            self,
            X,
            accept_sparse="csr",
            dtype=[np.float64, np.float32],
            order="C",
            accept_large_sparse=True,
            reset=reset,
        )

    def _validate_fit_data(self, X, sample_weight):
        X = self._validate_X(X)
        n_clusters, name = self._requested_clusters()
        check_n_samples(X.shape[0], n_clusters, name=name)
        return X, check_sample_weight(sample_weight, X)

    def _requested_clusters(self):
        """Return the most clusters the fit may need, and the parameter asking."""
        return self.n_clusters, "n_clusters"

    def _check_test_data(self, X):
        return validate_data(
            self,
            X,
            accept_sparse="csr",
            reset=False,
            dtype=[np.float64, np.float32],
            order="C",
            accept_large_sparse=True,
        )

    def _check_init_array(self, X):
        init = check_array(self.init, dtype=X.dtype, copy=True, order="C")
        self._check_center_shape(init, X)
        return init

    def _check_center_shape(self, init, X):
        # KMeans's messages, word for word.
        if init.shape[0] != self.n_clusters:
            raise ValueError(
                f"The shape of the initial centers {init.shape} does not "
                f"match the number of clusters {self.n_clusters}."
            )
        if init.shape[1] != X.shape[1]:
            raise ValueError(
                f"The shape of the initial centers {init.shape} does not "
                f"match the number of features of the data {X.shape[1]}."
            )

    def _init_centroids(self, X, init, random_state, sample_weight):
        n_clusters = self.n_clusters
        if isinstance(init, np.ndarray):
            return init.copy()
        if isinstance(init, str) and init == "k-means++":
            _, seeds = kmeans_plusplus(
                seeding_rows(X, sample_weight),
                n_clusters,
                sample_weight=sample_weight,
                random_state=random_state,
            )
            centers = X[seeds]
        elif isinstance(init, str) and init == "random":
            positive = np.flatnonzero(sample_weight > 0)
            p = sample_weight[positive] / sample_weight[positive].sum()
            seeds = random_state.choice(
                positive,
                size=n_clusters,
                replace=positive.size < n_clusters,
                p=p,
            )
            centers = X[seeds]
        else:
            centers = init(X, n_clusters, random_state=random_state)
            centers = check_array(centers, dtype=X.dtype, copy=True, order="C")
            self._check_center_shape(centers, X)
        if sp.issparse(centers):
            centers = centers.toarray()
        return np.ascontiguousarray(centers, dtype=X.dtype)

    # -- the fit ------------------------------------------------------------

    def _fit(self, X, sample_weight):
        """Prepare, run ``n_init`` times, keep the best run, apply it at once.

        The skeleton of both estimators' ``fit``, on NumPy, sparse and dask
        input alike: ``_prepare_fit`` validates and returns the fit's
        ``FitSetup`` (every setting resolved once, before the runs); each
        estimator's ``_run_once(setup, first)`` returns one run with a
        ``key`` (the lowest wins, the first on ties); its
        ``_fitted(setup, run)`` returns the keywords of ``_set_fitted``,
        which assigns every fitted attribute in one step.
        """
        setup = self._prepare_fit(X, sample_weight)
        best = None
        for i in range(setup.n_init):
            run = self._run_once(setup, first=i == 0)
            if best is None or run.key < best.key:
                best = run
        self._set_fitted(setup.rows, **self._fitted(setup, best))
        return self

    def _prepare_fit(self, X, sample_weight):
        """Validate the data and parameters of a fit; return its ``FitSetup``.

        NumPy and sparse data are validated and brought into working units
        (``_rows.fit_rows``); a dask collection becomes ``_dask.DaskRows``
        (``_dask.dask_rows``: validated chunk by chunk, in the user's units).
        An array ``init`` is checked against the data (KMeans's messages).
        The estimator's ``_n_init`` and ``_prepare_runs`` (its own settings,
        resolved) complete the setup.
        """
        init_is_array = _is_arraylike_not_scalar(self.init)
        if _dask.is_dask_collection(X):
            self._check_dask_fit()
            # Every block's values are checked at once by the rows' summary.
            X = _dask.as_dask_array(self, X, reset=True, check_finite=False)
            n_clusters, name = self._requested_clusters()
            check_n_samples(X.shape[0], n_clusters, name=name)
            rows = _dask.dask_rows(X, sample_weight, type(self).__name__)
            init = self._check_init_array(rows.X) if init_is_array else self.init
        else:
            X, sample_weight = self._validate_fit_data(X, sample_weight)
            init = self._check_init_array(X) if init_is_array else self.init
            rows, init = fit_rows(X, sample_weight, init)
        n_init = self._n_init(init_is_array)
        random_state = check_random_state(self.random_state)
        runs = self._prepare_runs(rows, init, random_state)
        return FitSetup(rows, init, n_init, random_state, runs)

    def _check_dask_fit(self):
        """Raise for the settings a fit on dask input cannot work with."""

    def _n_init(self, init_is_array, default_n_init=10):
        """Return the number of runs: ``n_init`` as KMeans resolves and warns."""
        if self.n_init == "auto":
            n_init = 1 if init_is_array or self.init == "k-means++" else None
            n_init = default_n_init if n_init is None else n_init
        else:
            n_init = self.n_init
        if init_is_array and n_init != 1:
            warn_user(
                "Explicit initial center position passed: performing only one "
                f"init in {self.__class__.__name__} instead of n_init={n_init}.",
                RuntimeWarning,
            )
            n_init = 1
        return n_init

    def _set_fitted(
        self,
        rows,
        centers,
        *,
        counts,
        inertia,
        sigma,
        objective,
        n_iter,
        converged,
        subject="",
        drop=(),
        **own,
    ):
        """Set every fitted attribute of a fit (NumPy or dask) at once.

        ``centers`` (and ``inertia``, ``objective``) are in the working
        units of ``rows`` (``rows.units``); ``sigma`` and ``own``, the
        estimator's own attributes, in the user's. Sets
        ``cluster_centers_``, ``labels_`` (lazy for dask rows), ``inertia_``,
        ``sigma_``, ``objective_``, ``n_iter_`` and ``converged_``, emits
        the warnings (not converged, with ``subject``; empty clusters), then
        assigns everything in one step: a warning raised as an error leaves
        the previous model whole. The attributes named in ``drop`` are
        removed. ``counts`` and ``inertia`` come from a final pass when the
        fit made one; None: one pass gives the labels and the inertia.
        Returns nothing.
        """
        units = rows.units
        user_centers = units.to_user_points(centers)
        # The labels and the inertia are those of the centres as returned:
        # brought back into working units (as predict and score do) they can
        # differ from ``centers`` by the rounding of the conversion (data far
        # from the origin), and a row near a tie can change side.
        returned = units.returned_points(centers)
        if returned is not None:
            centers, inertia = returned, None
        if inertia is None:
            counts, inertia = rows.labels_inertia(centers)
        fitted = dict(
            own,
            cluster_centers_=user_centers,
            labels_=rows.labels(centers),
            inertia_=float(units.to_user_energy(inertia)),
            sigma_=sigma,
            objective_=float(units.to_user_energy(float(objective))),
            n_iter_=n_iter,
            converged_=converged,
            _n_features_out=centers.shape[0],
            _offset=rows.offset,
            _units=units,
        )
        if not converged:
            self._warn_not_converged(subject)
        self._warn_distinct(int(np.count_nonzero(counts)), sigma, centers.shape[0])
        self.__dict__.update(fitted)
        for name in drop:
            self.__dict__.pop(name, None)

    def _warn_distinct(self, distinct, sigma, n_clusters):
        if distinct < n_clusters:
            warn_user(
                f"Number of distinct clusters ({distinct}) found smaller than "
                f"n_clusters ({n_clusters}). Possibly due to duplicate "
                f"points in X, or to a width (sigma_={sigma:.3g}) at which "
                "centres merge.",
                ConvergenceWarning,
            )

    def _warn_not_converged(self, subject=""):
        """``ConvergenceWarning``: the fit stopped at ``max_iter``."""
        warn_user(
            f"{self.__class__.__name__}{subject} did not converge within "
            f"max_iter={self.max_iter} iterations (tol={self.tol}); increase "
            "max_iter or tol.",
            ConvergenceWarning,
        )

    # -- persistence --------------------------------------------------------

    def __getstate__(self):
        # A copy: for estimators outside scikit-learn, the base class returns
        # the instance's own __dict__.
        state = dict(super().__getstate__(), _skrbfkmeans_version=__version__)
        labels = state.get("labels_")
        if labels is not None and _dask.is_dask_collection(labels):
            # The lazy labels of a dask fit hold the training data's graph
            # (the whole array for from_array input; futures that a new
            # session does not have for persisted input): not saved.
            del state["labels_"]
            state["_labels_not_saved"] = True
        return state

    def __setstate__(self, state):
        version = state.pop("_skrbfkmeans_version", "unknown (before 0.1)")
        if version != __version__:
            warnings.warn(
                SavedVersionWarning(type(self).__name__, __version__, version)
            )
        super().__setstate__(state)

    def __getattr__(self, name):
        # Called only for attributes that are missing.
        if name == "labels_" and self.__dict__.get("_labels_not_saved"):
            raise AttributeError(
                "labels_ of a fit on dask input are lazy (a dask array over "
                "the training data) and are not saved with the model; call "
                "predict on the training data to compute them."
            )
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
        )

    # -- prediction ---------------------------------------------------------

    def fit_predict(self, X, y=None, sample_weight=None):
        """Compute the clustering and return the cluster index of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training instances.
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples; ``None`` gives every sample weight 1.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the nearest centre of each sample (int32).
        """
        return self.fit(X, sample_weight=sample_weight).labels_

    @one_blas_thread
    def predict(self, X):
        """Return the index of the nearest centre of each sample.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            New data; a dask array or DataFrame is processed chunk by chunk.

        Returns
        -------
        labels : ndarray or dask array of shape (n_samples,)
            Index of the nearest centre (int32); lazy for dask input.
        """
        rows = self._new_rows(X)
        return rows.labels(self._centers_as(rows.X))

    @one_blas_thread
    def predict_proba(self, X):
        """Return the responsibilities of the centres for each sample at ``sigma_``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            New data; a dask array or DataFrame is processed chunk by chunk.

        Returns
        -------
        resp : ndarray or dask array of shape (n_samples, n_clusters)
            Soft (softmax) or sparse (entmax15, with exact zeros)
            assignments; each row sums to one. Lazy for dask input.
        """
        rows = self._new_rows(X)
        sigma = self._units_of_fit().to_working_length(self.sigma_)
        return rows.responsibilities(
            self._centers_as(rows.X), sigma, self._final_activation()
        )

    def fit_transform(self, X, y=None, sample_weight=None):
        """Fit, then return the distances of ``X`` to the centres.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training instances.
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_clusters)
            Euclidean distance of each sample to each centre.
        """
        return self.fit(X, sample_weight=sample_weight).transform(X)

    @one_blas_thread
    def transform(self, X):
        """Return the Euclidean distance of each sample to each centre.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            New data; a dask array or DataFrame is processed chunk by chunk.

        Returns
        -------
        X_new : ndarray or dask array of shape (n_samples, n_clusters)
            Distances, as ``sklearn.cluster.KMeans.transform`` returns them;
            lazy for dask input.
        """
        rows = self._new_rows(X)
        distances = rows.distances(self._centers_as(rows.X))
        # In the user's units (tiny data: distances at working precision).
        return self._units_of_fit().to_user_distances(distances)

    @one_blas_thread
    def score(self, X, y=None, sample_weight=None):
        """Opposite of the K-Means objective (hard inertia) of ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            New data; a dask array or DataFrame is processed chunk by chunk.
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the samples.

        Returns
        -------
        score : float
            ``-sum_i w_i min_j ||x_i - mu_j||^2``.
        """
        rows = self._new_rows(X)
        inertia = rows.inertia(self._centers_as(rows.X), sample_weight)
        return -float(self._units_of_fit().to_user_energy(inertia))

    def _centers_as(self, X):
        """Return the centres in the working units of the fit, dtype of ``X``."""
        centers = self.cluster_centers_.astype(X.dtype, copy=False)
        return self._units_of_fit().to_working_points(centers)

    def _new_rows(self, X):
        """Return new rows to predict on, validated, in the fit's working units.

        Shared by the prediction methods: a dask array or DataFrame becomes
        lazy rows (``_dask.NewDaskRows``), anything else is checked like the
        training data (``_rows.NewRows``); both have the same passes.
        """
        check_is_fitted(self)
        if _dask.is_dask_collection(X):
            X, new_rows = _dask.as_dask_array(self, X, reset=False), _dask.NewDaskRows
        else:
            X, new_rows = self._check_test_data(X), NewRows
        X = working_rows(self._units_of_fit(), X)
        # Sparse rows are centred only on the offset's non-zero columns: for a
        # model fitted on sparse data, those its mean dominates.
        return new_rows(X, self._offset.astype(X.dtype, copy=False))

    def _units_of_fit(self):
        # Models fitted before working units existed work in the user's.
        return getattr(self, "_units", Units())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
