"""RBFKMeans: soft and sparse K-Means at a fixed width."""

from numbers import Real
from typing import NamedTuple

import numpy as np
from sklearn.base import (
    _fit_context,
)
from sklearn.utils import check_array, check_random_state
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import (
    _is_arraylike_not_scalar,
)

from . import _dask
from ._base import _auto_sigma, _BaseRBFKMeans, all_or_nothing
from ._finish import kmeans, single_moves
from ._iterations import ACTIVATIONS, em_fixed_sigma
from ._policy import one_blas_thread
from ._rows import fit_units, working_rows
from ._stream import batch_summary, online_em_step
from ._validation import check_n_samples, check_sample_weight


class _Runs(NamedTuple):
    """The settings of every run of an ``RBFKMeans`` fit (working units).

    The initialisation's rows and weights, the scaled tolerance, the width,
    and the first run's initial centres (drawn to resolve ``sigma="auto"``;
    None otherwise).
    """

    Xs: object
    ws: np.ndarray
    tol: float
    sigma: float
    first_centers: np.ndarray


class _Run(NamedTuple):
    """One run: its key (the objective), centres, iterations and final pass."""

    key: float
    centers: np.ndarray
    n_iter: int
    converged: bool
    counts: np.ndarray
    inertia: float


class RBFKMeans(_BaseRBFKMeans):
    """K-Means as an RBF network at a fixed width: soft or sparse K-Means.

    Each sample ``x_i`` gets responsibilities ``r_i`` over the centres from
    the scores ``-||x_i - mu_j||^2 / (2 sigma^2)`` through softmax or
    entmax-1.5, and the centres are the responsibility-weighted means (EM).
    As ``sigma -> 0`` this is Lloyd's algorithm; entmax-1.5 reaches it
    exactly at a finite width. It has the parameters, attributes and methods
    of :class:`sklearn.cluster.KMeans` and also gives ``predict_proba``; at
    ``sigma=0`` its fit is KMeans's.

    Parameters
    ----------
    n_clusters : int, default=8
        The number of centres.
    sigma : float or "auto", default="auto"
        The width of the radial basis functions, in the units of ``X``
        (temperature ``2 sigma^2``): softmax responsibilities are the rows of
        ``sklearn.metrics.pairwise.rbf_kernel(X, cluster_centers_, gamma=1 /
        (2 sigma^2))`` normalised to sum to one. Samples within about
        ``4 sigma^2`` (in squared distance) of a boundary between two
        clusters are shared between them; above the first critical width
        (``sigma^2`` larger than the largest variance of ``X`` along a
        direction, for softmax) every centre collapses to the data mean.
        To tune it, search a grid with the score of the task the clustering
        serves: ``score`` (minus the hard inertia) favours small widths.
        ``"auto"`` takes a quarter of the median distance between each
        initial centre and its nearest other initial centre (of the first
        initialisation; centres whose nearest rows weigh at most 1% of the
        mean per centre, a few far rows, left out): clusters as far apart as
        the initial centres stay apart, and a sample at a centre has an
        entmax margin of at least ``4 sigma^2``. The resolved value is
        ``sigma_``. ``0`` is the zero-width limit, K-Means itself: the fit
        is Lloyd's algorithm as :class:`~sklearn.cluster.KMeans` runs it
        (``algorithm="lloyd"``: the same iterations, ``tol`` scaled by the
        mean feature variance, strict convergence when no label changes,
        empty clusters relocated to the farthest samples, the same
        ``n_iter_`` and verbose lines), and
        ``predict_proba`` is one-hot. On dask input ``0`` runs the engine's
        hard EM instead: the same iterations on ordinary data, but samples
        exactly tied between two centres are shared, and an empty cluster
        keeps its centre.
    activation : {"softmax", "entmax15"}, default="softmax"
        The map from scores to responsibilities. ``"entmax15"`` gives sparse
        responsibilities with exact zeros, exactly one-hot for samples whose
        two nearest centres differ in squared distance by ``4 sigma^2``.
    init : {"k-means++", "random"}, callable or array-like of shape \
            (n_clusters, n_features), default="k-means++"
        Initial centres, as in :class:`sklearn.cluster.KMeans`.
    n_init : "auto" or int, default="auto"
        Number of initialisations; the run with the lowest free energy is
        kept (at ``sigma=0`` that is the inertia, as in KMeans). ``"auto"``:
        1 for "k-means++" or an array, 10 otherwise, as in KMeans.
    max_iter : int, default=300
        Maximum number of EM iterations per run (Lloyd iterations at
        ``sigma=0``), as in KMeans. At a positive width a run stopped by it
        sets ``converged_`` to False and raises a ``ConvergenceWarning``; at
        ``sigma=0`` neither, as KMeans is silent.
    tol : float, default=1e-4
        A run stops when the summed squared shift of the centres in one
        iteration is at most ``tol`` times the mean feature variance of
        ``X``, as in KMeans (at a positive width the variance is weighted by
        ``sample_weight``). At ``sigma=0`` a run also stops, as KMeans's
        does, when no label changes.
    verbose : int, default=0
        Print one line per iteration when positive.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation.
    copy_x : bool, default=True
        Kept for compatibility with KMeans. ``X`` is never modified nor
        copied whole: dense rows are centred block by block.
    algorithm : {"lloyd", "elkan", "hartigan"}, default="lloyd"
        ``"lloyd"`` and ``"elkan"`` are accepted for compatibility with
        KMeans, with its validation: the two algorithms of KMeans give the
        same result and differ in speed only, and the fit does not depend on
        this choice. ``"hartigan"`` goes beyond KMeans: at ``sigma=0``, after
        Lloyd's run, single samples move between clusters while a move lowers
        the inertia (Hartigan's method; :func:`kmeans_hartigan`), so that
        each run ends on a solution no one sample can improve, never with a
        higher inertia than Lloyd's, within ``max_iter`` passes of moves: a
        run whose last pass still moved a sample sets ``converged_`` to
        False and raises a ``ConvergenceWarning``, and one whose moves end
        is converged, whatever stopped Lloyd's run before them. It needs
        the rows in memory (NumPy or sparse input) and has no effect at a
        positive width.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The centres (the dtype of ``X``).
    labels_ : ndarray of shape (n_samples,)
        Nearest centre of each training sample (int32); equals
        ``predict(X)``. After :meth:`partial_fit`, as in
        :class:`~sklearn.cluster.MiniBatchKMeans`, those of the last batch
        at the centres as they now are: ``predict(batch)``.
    inertia_ : float
        Hard K-Means distortion ``sum_i w_i min_j ||x_i - mu_j||^2``,
        ``-score(X, sample_weight=sample_weight)``; after
        :meth:`partial_fit`, that of the last batch with its weights at the
        current centres.
    objective_ : float
        Free energy at ``sigma_`` (see Notes), the quantity EM decreases; of
        the same rows and centres as ``inertia_``.
    sigma_ : float
        The width used.
    n_iter_ : int
        Number of EM iterations of the kept run (Lloyd iterations at
        ``sigma=0``, counted as KMeans counts them).
    converged_ : bool
        Whether the kept run met the tolerance before ``max_iter`` (with
        ``algorithm="hartigan"`` at ``sigma=0``: whether its single-sample
        moves ended, no sample gaining by a move).
    n_steps_ : int
        Number of online EM steps taken by :meth:`partial_fit` since the
        centres were last set (by its first call or by :meth:`fit`). Set
        only by :meth:`partial_fit`, which, like
        :class:`~sklearn.cluster.MiniBatchKMeans`'s, sets ``labels_`` and
        ``inertia_`` (and ``objective_``) of its batch, and leaves
        ``n_iter_`` and ``converged_`` to describe the last :meth:`fit`
        (they are not set by a stream that no fit started).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column
        names.

    See Also
    --------
    AnnealedRBFKMeans : Anneal the width down to a certified K-Means solution.
    kmeans_polish : The best hard solution near ``cluster_centers_`` (this
        estimator's solution is soft by design).
    rbf_kmeans_loss : The free energy and its gradients as a function.
    sklearn.cluster.KMeans : Hard K-Means; ``sigma=0`` is the same fit.
    sklearn.cluster.MiniBatchKMeans : Hard K-Means on mini-batches, the
        counterpart of :meth:`partial_fit`.
    sklearn.mixture.GaussianMixture : Fits a weight and a covariance per
        component and a density; softmax responsibilities here are the
        posteriors of equal-weight spherical Gaussians of variance
        ``sigma^2`` at the centres, not fitted.

    Notes
    -----
    With ``T = 2 sigma^2`` and ``d_ij = ||x_i - mu_j||^2``, EM decreases the
    free energy. For softmax it is
    ``F(mu) = -T sum_i w_i log(mean_j exp(-d_ij / T))``, which is the
    free energy ``-T sum_i w_i logsumexp_j(-d_ij / T)`` plus the constant
    ``T W log k``; for entmax-1.5 it is
    ``sum_i w_i min_r (<r, d_i> + T (H_max - H_1.5(r)))`` with the Tsallis
    entropy ``H_1.5`` and its maximum ``H_max``. Measured this way the
    objective lies between ``inertia_`` and the weighted mean distance to all
    centres, and tends to ``inertia_`` as ``sigma -> 0``; it stays finite at
    every width.

    The E-step and M-step run over blocks of rows and only accumulate the
    sufficient statistics ``N_j = sum_i w_i r_ij`` and
    ``S_j = sum_i w_i r_ij x_i``; ``predict_proba`` is the only method that
    returns an ``n_samples x n_clusters`` array. The same sums make
    :meth:`partial_fit` (online EM) and dask input possible.

    Dask arrays and DataFrames (the ``dask`` extra) are never gathered: each
    EM iteration runs the block pass on every row chunk and one ``compute``
    of the summed statistics. The initialisation (k-means++, "random" or a
    callable) and ``sigma="auto"`` use a uniform sample of
    ``min(n_samples, max(10000, 100 n_clusters))`` rows with their weights
    (all rows, in order, when there are no more: the fit then equals the
    NumPy fit to rounding). ``labels_``, ``predict``, ``predict_proba`` and
    ``transform`` are lazy dask arrays.

    References
    ----------
    .. [1] F. de J. Felix Arredondo, M. A. Ucan-Puc, C. Astengo Noguez,
       "K-Means as a Radial Basis function Network: a Variational and
       Gradient-based Equivalence", arXiv:2603.04625, 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import RBFKMeans
    >>> X = np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 0.0],
    ...               [10.0, 2.0], [10.0, 4.0], [10.0, 0.0]])
    >>> km = RBFKMeans(n_clusters=2, activation="entmax15", random_state=0).fit(X)
    >>> km.labels_
    array([1, 1, 1, 0, 0, 0], dtype=int32)
    >>> km.cluster_centers_
    array([[10.,  2.],
           [ 1.,  2.]])
    >>> km.predict_proba([[0.0, 0.0], [12.0, 3.0]])
    array([[0., 1.],
           [1., 0.]])
    """

    _parameter_constraints: dict = {
        **_BaseRBFKMeans._parameter_constraints,
        "sigma": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "activation": [StrOptions(set(ACTIVATIONS))],
        # "hartigan" goes beyond KMeans: left out of the error message, which
        # stays KMeans's word for word.
        "algorithm": [
            StrOptions({"lloyd", "elkan"}),
            Hidden(StrOptions({"hartigan"})),
        ],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        sigma="auto",
        activation="softmax",
        init="k-means++",
        n_init="auto",
        max_iter=300,
        tol=1e-4,
        verbose=0,
        random_state=None,
        copy_x=True,
        algorithm="lloyd",
    ):
        self.n_clusters = n_clusters
        self.sigma = sigma
        self.activation = activation
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm

    def _final_activation(self):
        return self.activation

    @_fit_context(prefer_skip_nested_validation=True)
    @all_or_nothing
    @one_blas_thread
    def fit(self, X, y=None, sample_weight=None):
        """Compute the soft K-Means clustering at width ``sigma``.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            Training instances. Sparse input is used in CSR format; dask
            arrays and DataFrames are processed chunk by chunk.
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples (not all zero); integer
            weights are equivalent to repeating rows. As in KMeans, they
            are not used by a callable or array ``init``.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        return self._fit(X, sample_weight)

    def _check_dask_fit(self):
        if self.algorithm == "hartigan" and self.sigma == 0:
            raise ValueError(
                "algorithm='hartigan' moves single samples between clusters "
                "and needs the rows in memory: pass a NumPy array or a "
                "sparse matrix, or use algorithm='lloyd' for dask input."
            )

    def _prepare_runs(self, rows, init, random_state):
        """Return the settings of every run: ``_Runs``, resolved once.

        The initialisation and ``sigma="auto"`` use ``Xs, ws``: all rows in
        memory, a sample of dask rows. At ``sigma=0`` the tolerance follows
        KMeans's rule (the variance without the weights). ``sigma="auto"``
        is resolved from the first run's initial centres, drawn here (the
        first run starts from them).
        """
        Xs, ws, tol = rows.init_sample(
            self.n_clusters, random_state, self.tol, kmeans_rule=self.sigma == 0
        )
        first_centers = None
        if self.sigma == "auto":
            first_centers = self._init_centroids(Xs, init, random_state, ws)
            sigma = _auto_sigma(first_centers, Xs, ws)
        else:
            sigma = rows.units.to_working_length(self.sigma)
        return _Runs(Xs, ws, tol, sigma, first_centers)

    def _run_once(self, setup, first):
        """One run from new initial centres: KMeans's at ``sigma=0``, else EM."""
        rows, runs = setup.rows, setup.runs
        if first and runs.first_centers is not None:
            centers = runs.first_centers
        else:
            centers = self._init_centroids(
                runs.Xs, setup.init, setup.random_state, runs.ws
            )
        if self.verbose:
            print("Initialization complete")
        if self.sigma == 0:
            centers, n_iter, converged = kmeans(
                rows, centers, self.activation, self.max_iter, runs.tol, self.verbose
            )
            if self.algorithm == "hartigan":
                centers, _, settled = single_moves(rows, centers, self.max_iter)
                converged = converged if settled is None else settled
        else:
            centers, n_iter, converged = em_fixed_sigma(
                rows,
                centers,
                runs.sigma,
                self.activation,
                max_iter=self.max_iter,
                tol=runs.tol,
                verbose=self.verbose,
            )
        counts, inertia, objective = rows.final(centers, runs.sigma, self.activation)
        return _Run(objective, centers, n_iter, converged, counts, inertia)

    def _fitted(self, setup, run):
        """Return the keywords of ``_set_fitted`` for the best run."""
        return dict(
            centers=run.centers,
            counts=run.counts,
            inertia=run.inertia,
            objective=run.key,
            n_iter=run.n_iter,
            converged=run.converged,
            sigma=float(setup.rows.units.to_user_length(setup.runs.sigma)),
            # A fit ends the stream of partial_fit: the next call starts one.
            drop=("_stream", "n_steps_"),
        )

    @_fit_context(prefer_skip_nested_validation=True)
    @all_or_nothing
    @one_blas_thread
    def partial_fit(self, X, y=None, sample_weight=None):
        """Update the centres with one online EM step on a batch of samples.

        The first call initialises: ``init`` on the first batch (k-means++
        by default, so the first batch needs at least ``n_clusters``
        samples), the width (``sigma="auto"`` is resolved from those
        centres) and the centring offset (the first batch's weighted mean).
        After :meth:`fit`, the first call continues from the fitted centres
        (with ``n_clusters`` unchanged: another value raises a
        ``ValueError``). Following :class:`sklearn.cluster.MiniBatchKMeans`,
        ``labels_``, ``inertia_`` and ``objective_`` then describe the batch
        at the updated centres: ``labels_`` is ``predict(X)``, ``inertia_``
        is ``-score(X, sample_weight=sample_weight)``. For a dask array,
        the batch is its last block; the rows of the others are labelled by
        :meth:`predict`.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            A batch of training instances. A dask array or DataFrame gives
            one step per row block, each block computed in turn (as
            ``dask_ml.wrappers.Incremental`` feeds its blocks).
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples of the batch (not all zero
            in any step).

        Returns
        -------
        self : object
            The updated estimator.

        Notes
        -----
        Stepwise online EM [1]_: with the batch's normalised statistics
        ``n_j^b = N_j^b / W^b`` and ``s_j^b = S_j^b / W^b`` (responsibilities
        at the current centres, ``W^b`` the batch's total weight), the
        running statistics move by the step
        ``rho_t = ((t + 19) / 20)^{-0.6}`` of the ``t``-th call,

        ``n_j <- (1 - rho_t) n_j + rho_t n_j^b``,
        ``s_j <- (1 - rho_t) s_j + rho_t s_j^b``,

        and the centres are their M-step ``mu_j = s_j / n_j`` (in coordinates
        centred on the first batch's mean). The first step is ``rho_1 = 1``
        (one EM iteration on the first batch); the step stays near 1 for the
        first few tens of batches, so that the centres move as fast as with
        EM while they are far from a fixed point, then decays as
        ``t^{-0.6}``. As ``sum rho_t = inf`` and ``sum rho_t^2 < inf``,
        several passes over the batches approach a fixed point of EM on all
        of them; the memory is ``k x (d + 1)`` statistics, whatever the
        number of batches.

        References
        ----------
        .. [1] O. Cappé, E. Moulines, "On-line expectation-maximization
           algorithm for latent data models", J. R. Stat. Soc. B 71(3), 2009.

        Examples
        --------
        >>> import numpy as np
        >>> from skrbfkmeans import RBFKMeans
        >>> X = np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 0.0],
        ...               [10.0, 2.0], [10.0, 4.0], [10.0, 0.0]])
        >>> km = RBFKMeans(n_clusters=2, init=X[[0, 3]], sigma=0.5)
        >>> for _ in range(5):
        ...     for batch in (X[[1, 2, 3]], X[[0, 4, 5]]):
        ...         km = km.partial_fit(batch)
        >>> km.n_steps_
        10
        >>> km.cluster_centers_
        array([[ 1.,  2.],
               [10.,  2.]])
        >>> km.labels_  # of the last batch, X[[0, 4, 5]]
        array([0, 1, 1], dtype=int32)
        """
        has_centers = hasattr(self, "cluster_centers_")
        if has_centers:
            self._check_stream_clusters()
        if _dask.is_dask_collection(X):
            # One step per row block, each block computed in turn; the last
            # block is the batch that labels_ and inertia_ describe.
            X = _dask.as_dask_array(self, X, reset=not has_centers)
            last = None
            for Xb, wb in _dask.computed_blocks(X, sample_weight):
                Xb = check_array(Xb, dtype=[np.float64, np.float32], order="C")
                last = self._partial_fit_batch(Xb, wb)
            if last is not None:
                self.__dict__.update(self._describe_batch(*last))
            return self
        X = self._validate_X(X, reset=not has_centers)
        self.__dict__.update(
            self._describe_batch(*self._partial_fit_batch(X, sample_weight))
        )
        return self

    def _check_stream_clusters(self):
        """Raise when ``n_clusters`` is not the number of the fitted centres."""
        fitted = self.cluster_centers_.shape[0]
        if self.n_clusters != fitted:
            raise ValueError(
                f"n_clusters={self.n_clusters} but the fitted model has "
                f"{fitted} centres, and partial_fit continues it. Set "
                f"n_clusters={fitted} to continue the model; for a stream of "
                f"{self.n_clusters} clusters, call partial_fit on "
                "sklearn.base.clone(estimator), or fit first."
            )

    def _describe_batch(self, X, sample_weight, units):
        """Return ``labels_``, ``inertia_`` and ``objective_`` of a batch.

        ``X`` and ``sample_weight`` are the batch of the last step (working
        ``units``), described at the centres as the model now returns and
        predicts with them: ``labels_`` is ``predict`` of the batch and
        ``inertia_`` is ``-score`` of it.
        """
        centers = self._centers_as(X)
        labels, inertia, objective = batch_summary(
            X, sample_weight, centers, units.to_working_length(self.sigma_),
            self.activation, self._offset.astype(X.dtype, copy=False),
        )  # fmt: skip
        return dict(
            labels_=labels,
            inertia_=float(units.to_user_energy(inertia)),
            objective_=float(units.to_user_energy(objective)),
        )

    def _partial_fit_batch(self, X, sample_weight):
        """One online EM step on a validated batch (see ``partial_fit``).

        The step's state (centres, running statistics, step count; on the
        first call the width, the offset and the units) is computed into
        locals and assigned at once at the end. Returns the batch in working
        units, its weights and the units, for ``_describe_batch``.
        """
        fitted = hasattr(self, "cluster_centers_")
        state = {}
        if fitted:
            X = X.astype(self.cluster_centers_.dtype, copy=False)
        sample_weight = check_sample_weight(sample_weight, X)
        if fitted:
            units, offset, sigma = self._units_of_fit(), self._offset, self.sigma_
            X = working_rows(units, X)
            centers = self._centers_as(X)
        else:
            check_n_samples(
                X.shape[0], self.n_clusters, " in the first call to partial_fit"
            )
            init_is_array = _is_arraylike_not_scalar(self.init)
            init = self._check_init_array(X) if init_is_array else self.init
            # The first batch sets the working units of the whole stream.
            X, offset, init, units = fit_units(X, sample_weight, init)
            random_state = check_random_state(self.random_state)
            centers = self._init_centroids(X, init, random_state, sample_weight)
            sigma = (
                float(units.to_user_length(_auto_sigma(centers, X, sample_weight)))
                if self.sigma == "auto"
                else float(self.sigma)
            )
            state.update(sigma_=sigma, _offset=offset, _units=units)
        # The running statistics belong to the centres they produced: after a
        # fit or a change of the centres, the stream starts again. The check
        # compares values, so that the stream survives pickle, joblib and
        # deepcopy (which keep the values, not always the objects).
        stream = getattr(self, "_stream", None)
        if stream is None or not np.array_equal(
            stream[2], getattr(self, "cluster_centers_", None)
        ):
            n_steps = 1
            stream = (np.zeros(self.n_clusters), np.zeros(centers.shape), None)
        else:
            n_steps = self.n_steps_ + 1
        centers, stats = online_em_step(
            X,
            sample_weight,
            centers,
            units.to_working_length(sigma),
            self.activation,
            offset,
            stream[:2],
            n_steps,
        )
        centers = units.to_user_points(centers)
        state.update(
            cluster_centers_=centers,
            n_steps_=n_steps,
            _stream=(*stats, centers.copy()),
            _n_features_out=centers.shape[0],
        )
        self.__dict__.update(state)
        return X, sample_weight, units
