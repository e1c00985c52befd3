"""AnnealedRBFKMeans: the estimator around the annealing schedule of ``_anneal``."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _is_arraylike_not_scalar

from . import _dask

from . import _dask_fit
from ._anneal import (
    anneal,
    anneal_auto,
    certified_at,
    em_at_width,
    first_critical_sigma,
    kmeans_from_init,
)
from ._engine.blocks import ACTIVATIONS
from ._base import _BaseRBFKMeans, _tolerance, all_or_nothing
from ._dask import sample_size
from ._engine.passes import squared_norms
from ._hartigan import hartigan
from ._lloyd import lloyd
from ._rows import MemoryRows, certify, weight_sample
from ._rows import lloyd as rows_lloyd
from ._scaling import Units
from ._engine.threads import one_blas_thread
from ._validation import warn_user


def _mass_unit(sample_weight):
    """Weight of one sample in the split and drop rules of the annealing.

    Integer weights are counts (so they are equivalent to repeated rows);
    other weights are measured in units of their mean positive value.
    """
    if np.all(sample_weight == np.round(sample_weight)):
        return 1.0
    return float(sample_weight[sample_weight > 0].mean())


class AnnealedRBFKMeans(_BaseRBFKMeans):
    """Anneal RBF K-Means from the data mean to a certified K-Means solution.

    Starts hot, where every centre sits at the weighted mean and no
    initialisation matters, and cools the width ``sigma`` geometrically.
    Centres separate when the width crosses the critical values of the data
    (deterministic annealing); one group splits per cooling step, along the
    principal axis of its posterior covariance. At low temperature softmax
    hands over to entmax-1.5, whose responsibilities become exactly one-hot,
    and the run ends on a Lloyd fixed point certified by the margin test.
    Deterministic: no random draw is made with ``init="anneal"``.

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        The number of centres. ``"auto"`` chooses it from the annealing path
        (see Notes, "Choosing the number of clusters"): the count of
        distinct centres that lives over the longest range of widths,
        between 2 and ``max_clusters`` (1 only when the data never split).
        Needs ``init="anneal"`` and ``sigma_end="auto"``.
    sigma_start : float or "auto", default="auto"
        Initial width. ``"auto"``: just above the first critical width,
        ``sigma^2 = 0.55 c lambda_max`` of the weighted covariance of ``X``,
        where ``c = 2`` for softmax and ``2 sqrt(2)`` for entmax-1.5 (a group
        splitting in two). With an explicit ``init``, ``"auto"`` starts at the
        end, without annealing (see ``init``), and a float anneals from the
        initial centres starting at that width.
    sigma_end : float or "auto", default="auto"
        Final width. ``"auto"``: cool until the responsibilities are hard,
        run Lloyd iterations until the labels stop changing (then the polish,
        see ``polish``), and end at the largest width at which every sample's
        entmax-1.5 responsibilities are exactly one-hot (margin
        ``>= 4 sigma^2``): the result is certified to be an exact K-Means
        fixed point. A float stops there instead, with a plain EM at that
        width (and no polish: the solution is soft).
    cooling : float in (0, 1), default=0.9
        Geometric factor applied to ``sigma^2`` after each split. Where no
        group can split the width jumps to just below the next critical
        width; once all centres exist it halves ``sigma^2`` per stage.
    activation : {"auto", "softmax", "entmax15"}, default="auto"
        ``"auto"``: softmax (mass-constrained: coincident centres act as one)
        until it is one-hot to working precision for 99% of the weight (the
        runner-up responsibility ``exp(-margin / T)`` below half an ulp),
        then entmax-1.5. ``"softmax"`` / ``"entmax15"`` force one map.
    init : {"anneal", "k-means++", "random"}, callable or array-like of shape \
            (n_clusters, n_features), default="anneal"
        ``"anneal"`` starts from the weighted mean. Anything else gives the
        initial centres as :class:`sklearn.cluster.KMeans` draws them (the
        same draws for the same ``random_state``), and, with
        ``sigma_start="auto"``, the fit starts at the end: with
        ``sigma_end="auto"`` it is KMeans's run from those centres (the same
        iterations, stopping rules with ``tol`` and ``max_iter``, relocation
        of empty clusters), then Lloyd until the labels are stable, the
        polish and the certificate; with a float ``sigma_end``, the EM at
        that width from those centres. With a float ``sigma_start``, the
        schedule anneals from those centres.
    n_init : int or "auto", default=1
        Number of runs with a random ``init``; the one with the lowest
        inertia (or objective, for a float ``sigma_end``) is kept.
        ``init="anneal"`` and arrays are deterministic: one run. ``"auto"``
        is KMeans's rule: one run for ``"k-means++"``, 10 for ``"random"``
        or a callable.
    max_iter : int, default=100
        Maximum number of EM iterations per stage (and of the final Lloyd).
    tol : float, default=1e-4
        A stage ends when no centre moves more than ``30 tol sqrt(T)``
        (``T = 2 sigma^2``). The final Lloyd run ignores it (it runs until
        the labels are stable), except KMeans's run from an explicit
        ``init``, which stops as KMeans's does (summed squared centre shift
        at most ``tol`` times the mean feature variance).
    verbose : int, default=0
        Print one line per stage when positive.
    random_state : int, RandomState instance or None, default=None
        Seeds a random ``init``; unused with ``init="anneal"``.
    copy_x : bool, default=True
        Kept for compatibility with KMeans; ``X`` is never modified.
    algorithm : {"lloyd", "elkan"}, default="lloyd"
        Accepted for compatibility with KMeans, with its validation: the
        two algorithms of KMeans give the same result and differ in speed
        only, and the fit does not depend on this choice.
    max_clusters : int, default=20
        With ``n_clusters="auto"``, the largest count considered: the
        schedule anneals until more than ``max_clusters`` distinct centres
        exist (or no group can split). At most the number of samples.
        Unused with an integer ``n_clusters``.
    polish : bool, default=True
        With ``sigma_end="auto"``, improve the hard solution by the
        deterministic split/merge moves of :func:`kmeans_polish` before it is
        certified. Annealing resolves the data's natural clusters first and
        may spend centres on the wrong ones (clusters of very unequal sizes);
        the polish moves them.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (`n_clusters_`, n_features)
        The centres.
    n_clusters_ : int
        The number of centres: ``n_clusters``, or the count chosen with
        ``n_clusters="auto"``.
    cluster_count_lifetimes_ : ndarray of shape (n_counts,)
        Entry ``c - 1`` is the lifetime of ``c`` distinct centres: the total
        log-width ``sum log(sigma_s / sigma_{s+1})`` over the stages ``s``
        whose equilibrium had ``c`` distinct centres (each stage's count
        holds until the next stage). The lifetimes add up to the log-range
        of widths annealed. With an integer ``n_clusters`` they are
        measured on ``sigma_path_`` (up to the largest count on it); with
        ``"auto"``, on the exploration up to ``max_clusters`` (a count that
        can no longer split lives for ever: ``inf``).
    split_linkage_ : ndarray of shape (`n_clusters_` - 1, 4)
        The history of splits as a SciPy linkage matrix
        (:func:`scipy.cluster.hierarchy.dendrogram` draws it): leaf ``i``
        is cluster ``i`` (label ``i``), and two clusters join at the width
        of the split that separated their lineages (a critical width in
        ``critical_sigmas_``). Groups that merge back take the larger of
        their two split widths; a group dropped as too light leaves the
        tree. Each move of the polish takes a cluster out of the tree and
        makes it the sibling of the cluster it split, at ``sigma_`` (below
        every width of the schedule). Without annealing (an explicit
        ``init``) all clusters join at the first critical width. Empty,
        of shape (0, 4), for a single cluster.
    labels_ : ndarray of shape (n_samples,)
        Nearest centre of each training sample (int32); equals
        ``predict(X)``.
    inertia_ : float
        Hard K-Means distortion of the final centres.
    objective_ : float
        Free energy at ``sigma_`` with the final activation.
    sigma_ : float
        The final width.
    n_iter_ : int
        As for KMeans, the Lloyd iterations of the final K-Means run, at most
        ``max_iter``: the run from the annealed centres (with an explicit
        ``init``: KMeans's run from it, counted as KMeans counts), or, when
        the polish kept a move, the run after the last kept move. With a
        numeric ``sigma_end``, the EM iterations at ``sigma_end``.
    n_iter_total_ : int
        Every EM and Lloyd iteration of the fit: all stages, the final run
        and every trial of the polish (what the fit cost).
    converged_ : bool
        Whether the final phase converged within ``max_iter``: Lloyd reached
        stable labels (``sigma_end="auto"``) or the EM at ``sigma_end`` met
        its tolerance. When ``max_iter`` stops KMeans's run from an explicit
        ``init``, its result is kept as it is (no polish). Intermediate
        stages may stop at ``max_iter`` near a critical width; the next
        stage continues from there.
    certified_ : bool
        Whether the final centres are proven to be an exact Lloyd fixed
        point that no single-sample move improves: every margin is at least
        ``4 sigma_^2``, a Lloyd step leaves the centres unchanged to
        rounding, and moving any one sample to another cluster does not
        lower the distortion (checked by explicit differences, with a
        rounding bound that can only refuse).
    sigma_path_ : ndarray of shape (n_stages,)
        Width of each stage, strictly decreasing; the last is ``sigma_``.
    centers_path_ : ndarray of shape (n_stages, n_clusters, n_features)
        The k centres after each stage (coincident copies repeated).
    objective_path_ : ndarray of shape (n_stages,)
        The free energy each stage minimised (mass-constrained for softmax).
    inertia_path_ : ndarray of shape (n_stages,)
        Hard distortion of the centres after each stage.
    n_distinct_centers_path_ : ndarray of shape (n_stages,)
        Number of distinct centres after each stage.
    activation_path_ : ndarray of shape (n_stages,)
        The map used at each stage (``"softmax"`` or ``"entmax15"``).
    critical_sigmas_ : ndarray of shape (n_splits,)
        Widths at which a group of centres split.
    n_polish_moves_ : int
        Number of split/merge moves the polish accepted (0 without polish).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when ``X`` has string column
        names.

    See Also
    --------
    RBFKMeans : Soft K-Means at a fixed width.
    kmeans_polish : The split/merge search run when ``polish=True``.
    sklearn.cluster.KMeans : Hard K-Means with random restarts.

    Notes
    -----
    The schedule (module ``skrbfkmeans._anneal``): each stage runs EM at a
    fixed temperature; then groups closer than ``0.05 sqrt(T)`` merge, groups
    lighter than half a sample are dropped, and while fewer than
    ``n_clusters`` groups exist the group that has crossed its critical
    temperature (``T < c lambda_max(C_j)``, ``C_j`` its posterior covariance)
    with the largest ``N_j lambda_max(C_j)`` splits into ``mu_j +- 0.5
    sqrt(lambda_max) v_j``. Splitting one group per cooling step, by that
    score, follows the K-Means objective rather than the data's hierarchy.

    **Choosing the number of clusters.** As the width shrinks, the number of
    distinct centres at equilibrium grows at the critical widths; a count
    that persists over a long range of widths is a structure of the data
    (clusters well apart relative to their spread), a count that lasts one
    cooling step is not. With ``n_clusters="auto"`` the schedule runs as for
    ``max_clusters + 1`` clusters until more than ``max_clusters`` distinct
    centres exist; up to that point its path is the one every fit with at
    least that many clusters follows (the split decisions do not depend on
    the number of clusters). The count with the longest lifetime
    (``cluster_count_lifetimes_``, in log-width) from 2 up is chosen; the
    schedule sees the counts at its stages only, so lifetimes within one
    cooling step (``-0.5 log(cooling)`` in log-width) of the longest count
    as equal, and the smallest of those counts is chosen. Then the fit with
    ``n_clusters=n_clusters_`` runs: the result, path and all, is that
    fit's, except ``n_iter_total_`` (which includes the exploration) and
    ``cluster_count_lifetimes_``. One cluster has no
    lifetime of its own (it starts at ``sigma_start``): it is chosen only
    when the data never split. The rule finds clusters that are separated
    relative to their own spread; it is not a test of clustering tendency.

    **Many rows.** With more than ``max(10000, 100 n_clusters)`` rows
    (``max_clusters`` for ``"auto"``) the schedule, the polish and the
    ``*_path_`` attributes are computed on a sample of that many units of
    weight, and the final phase (Lloyd until the labels are stable, or EM at
    a float ``sigma_end``) and the certificate run on every row:
    ``certified_`` holds for all the data, and ``inertia_`` and
    ``objective_`` are all the data's, while the path's energies are the
    sample's. The sample is stratified by weight (``W / m`` of the total
    weight per stratum, one point drawn in each from a fixed seed, so the
    fit depends on the data only; a row counts as often as it is drawn):
    integer weights and rows repeated in place draw the same rows. A dask
    array or DataFrame (the ``dask`` extra) draws the same sample chunk by
    chunk, so its fit is the NumPy fit to rounding; each iteration of its
    final phase is one ``compute``. With ``init`` other than ``"anneal"``
    NumPy input uses every row throughout, and dask input a uniform sample
    of rows with their weights, drawn with ``random_state``.

    References
    ----------
    .. [1] K. Rose, "Deterministic annealing for clustering, compression,
       classification, regression, and related optimization problems",
       Proc. IEEE 86(11), 1998.
    .. [2] F. de J. Felix Arredondo, M. A. Ucan-Puc, C. Astengo Noguez,
       "K-Means as a Radial Basis function Network: a Variational and
       Gradient-based Equivalence", arXiv:2603.04625, 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import AnnealedRBFKMeans
    >>> X = np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 0.0],
    ...               [10.0, 2.0], [10.0, 4.0], [10.0, 0.0]])
    >>> km = AnnealedRBFKMeans(n_clusters=2).fit(X)
    >>> km.certified_
    True
    >>> np.sort(km.cluster_centers_, axis=0)
    array([[ 1.,  2.],
           [10.,  2.]])
    >>> print(km.n_distinct_centers_path_[0], km.n_distinct_centers_path_[-1])
    1 2

    With ``n_clusters="auto"`` the number of clusters is the count of
    distinct centres that lives longest along the annealing path:

    >>> rng = np.random.default_rng(0)
    >>> blobs = np.concatenate([rng.normal(c, 0.3, size=(30, 2)) for c in (0, 5, 10)])
    >>> auto = AnnealedRBFKMeans(n_clusters="auto", max_clusters=8).fit(blobs)
    >>> auto.n_clusters_, auto.split_linkage_.shape
    (3, (2, 4))
    """

    _parameter_constraints: dict = {
        **_BaseRBFKMeans._parameter_constraints,
        "n_clusters": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "max_clusters": [Interval(Integral, 1, None, closed="left")],
        "sigma_start": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "sigma_end": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "cooling": [Interval(Real, 0, 1, closed="neither")],
        "polish": ["boolean"],
        "activation": [StrOptions({"auto", *ACTIVATIONS})],
        "init": [
            StrOptions({"anneal", "k-means++", "random"}),
            callable,
            "array-like",
        ],
    }

    def __init__(
        self,
        n_clusters=8,
        *,
        sigma_start="auto",
        sigma_end="auto",
        cooling=0.9,
        activation="auto",
        init="anneal",
        n_init=1,
        max_iter=100,
        tol=1e-4,
        verbose=0,
        random_state=None,
        copy_x=True,
        algorithm="lloyd",
        max_clusters=20,
        polish=True,
    ):
        self.n_clusters = n_clusters
        self.sigma_start = sigma_start
        self.sigma_end = sigma_end
        self.cooling = cooling
        self.activation = activation
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.copy_x = copy_x
        self.algorithm = algorithm
        self.max_clusters = max_clusters
        self.polish = polish

    def _final_activation(self):
        return self._activation

    def _requested_clusters(self):
        if self.n_clusters == "auto":
            return self.max_clusters, "max_clusters"
        return self.n_clusters, "n_clusters"

    def _check_auto(self):
        """Raise for the settings ``n_clusters="auto"`` cannot work with."""
        if self.n_clusters != "auto":
            return
        if not (isinstance(self.init, str) and self.init == "anneal"):
            raise ValueError(
                'n_clusters="auto" chooses the count along the annealing '
                'path from the data mean: it needs init="anneal", got '
                f"init={self.init!r}."
            )
        if self.sigma_end != "auto":
            raise ValueError(
                'n_clusters="auto" needs sigma_end="auto" (the count is chosen '
                f"for the hard solution), got sigma_end={self.sigma_end!r}."
            )

    @_fit_context(prefer_skip_nested_validation=True)
    @all_or_nothing
    @one_blas_thread
    def fit(self, X, y=None, sample_weight=None):
        """Anneal from ``sigma_start`` down to a certified K-Means solution.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape \
                (n_samples, n_features)
            Training instances. Sparse input is used in CSR format; dask
            arrays and DataFrames are processed chunk by chunk.
        y : Ignored
            Not used, present for API consistency by convention.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the samples (not all zero). Integer
            weights are counts: equivalent to repeated rows.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        self._check_auto()
        if _dask.is_dask_collection(X):
            rows, result = _dask_fit.fit_annealed(self, X, sample_weight)
            self._apply(rows, Units(), result, *self._final_pass(rows, result))
            return self
        X, sample_weight = self._validate_fit_data(X, sample_weight)
        self._init_is_array = _is_arraylike_not_scalar(self.init)
        anneal_init = isinstance(self.init, str) and self.init == "anneal"
        sample = self._sample(sample_weight) if anneal_init else None
        init = self._check_init_array(X) if self._init_is_array else self.init
        if self._init_is_array:
            n_init = self._resolve_n_init()  # KMeans's warning for n_init > 1
        elif anneal_init:
            if self.n_init not in (1, "auto"):
                warn_user(
                    "init='anneal' is deterministic: performing one run "
                    f"instead of n_init={self.n_init}.",
                    RuntimeWarning,
                )
            n_init = 1
        else:
            n_init = self._resolve_n_init()  # "auto": KMeans's rule
        random_state = check_random_state(self.random_state)
        X, offset, init, units = self._working_units(X, sample_weight, init)
        scale = units.scale
        x_sq = squared_norms(X, offset)
        rows = MemoryRows(X, sample_weight, offset, x_sq)
        # Many rows: the schedule runs on the sample's rows (same units).
        anneal_rows = rows
        if sample is not None:
            idx, counts = sample
            anneal_rows = MemoryRows(X[idx], counts.astype(sample_weight.dtype), offset)
        act = "entmax15" if self.activation == "entmax15" else "softmax"
        sigma_end = None if self.sigma_end == "auto" else float(self.sigma_end) / scale

        # An explicit init with sigma_start="auto" starts at the end: KMeans's
        # run from it (or the EM at a float sigma_end), no annealing.
        from_init = not anneal_init and self.sigma_start == "auto"
        if from_init and sigma_end is None:
            kmeans_tol = _tolerance(X, np.ones_like(sample_weight), self.tol)
            sigma_cap = first_critical_sigma(X, sample_weight, offset, x_sq, act)
        schedule = dict(
            cooling=self.cooling,
            activation=self.activation,
            max_iter=self.max_iter,
            tol=self.tol,
            mass_unit=_mass_unit(anneal_rows.w),
            polish=self.polish,
            verbose=self.verbose,
        )
        best = None
        for _ in range(n_init):
            if anneal_init:
                init_centers = None
                sigma_start = first_critical_sigma(
                    anneal_rows.X, anneal_rows.w, offset, anneal_rows.x_sq, act
                )
            else:
                init_centers = self._init_centroids(
                    X, init, random_state, sample_weight
                )
                if self.verbose:
                    print("Initialization complete")
                sigma_start = sigma_end
            if self.sigma_start != "auto":
                sigma_start = float(self.sigma_start) / scale
            if sigma_end is not None and not from_init and sigma_start <= sigma_end:
                raise ValueError(
                    f"sigma_start={sigma_start * scale:.6g} must be larger than "
                    f"sigma_end={sigma_end * scale:.6g}."
                )
            if from_init and sigma_end is None:
                result = kmeans_from_init(
                    rows,
                    init_centers,
                    max_iter=self.max_iter,
                    tol=kmeans_tol,
                    activation=self.activation,
                    sigma_cap=sigma_cap,
                    polish=self.polish,
                    verbose=self.verbose,
                )
            elif self.n_clusters == "auto":
                result = anneal_auto(
                    anneal_rows, self.max_clusters, sigma_start=sigma_start, **schedule
                )
            else:
                result = anneal(
                    anneal_rows,
                    self.n_clusters,
                    init_centers=init_centers,
                    sigma_start=sigma_start,
                    sigma_end=sigma_end,
                    **schedule,
                )
            key = result.inertia_path[-1] if sigma_end is None else None
            key = result.objective_path[-1] if key is None else key
            if best is None or key < best[0]:
                best = (key, result)

        result = best[1]
        if sample is None:
            self._apply(rows, units, result)
        else:
            result = self._finish_sample_fit(rows, result)
            self._apply(rows, units, result, *self._final_pass(rows, result))
        return self

    def _sample(self, sample_weight):
        """Return the sample of units of weight to anneal on, or None.

        ``(row indices, counts)`` of ``_rows.weight_sample`` when there are more
        rows than ``_dask.sample_size``, unless a few very heavy rows leave
        fewer distinct rows drawn than clusters.
        """
        n_req = self._requested_clusters()[0]
        n_sample = sample_size(sample_weight.shape[0], n_req)
        if n_sample >= sample_weight.shape[0]:
            return None
        idx, counts = weight_sample(sample_weight, n_sample)
        return (idx, counts) if idx.size >= n_req else None

    def _finish_sample_fit(self, rows, result):
        """Finish on every row the fit ``result`` of a sample of them.

        Lloyd's algorithm from the sample's centres until the labels are
        stable (or, with a float ``sigma_end``, EM at that width) and the
        certificate, on ``rows``; ``result`` is an ``AnnealResult`` in the
        units of ``rows``. Returns it with the final state, its path the
        sample's (its energies are the sample's: weights that add up to its
        size).
        """
        act = result.activation
        centers = result.centers
        if self.sigma_end == "auto":
            if isinstance(rows, MemoryRows):
                centers, n_iter, converged = lloyd(rows, centers, self.max_iter)
                # Single-sample moves on every row (a few block passes); dask
                # rows end on Lloyd's fixed point, which the certificate's
                # single-move condition may then refuse.
                centers = hartigan(
                    rows.X, rows.w, centers, rows.offset, rows.x_sq,
                    max_iter=self.max_iter,
                )[0]  # fmt: skip
            else:
                centers, n_iter, converged = rows_lloyd(rows, centers, self.max_iter)
            sigma, certified = certify(rows, centers, result.sigma)
        else:
            sigma = result.sigma
            centers, n_iter, converged = em_at_width(
                rows, centers, sigma, act, self.max_iter, self.tol
            )
            certified = certified_at(rows, centers, sigma)
        return result._replace(
            centers=centers,
            sigma=float(sigma),
            n_iter=result.n_iter + n_iter,
            n_iter_final=n_iter,
            converged=bool(result.converged and converged),
            certified=bool(certified),
        )

    @staticmethod
    def _final_pass(rows, result):
        """``(objective, final)`` of ``_apply`` from one final pass on ``rows``."""
        final = rows.final(result.centers, result.sigma, result.activation)
        return final[2], final

    def _apply(self, rows, units, result, objective=None, final=None):
        """Set the fitted attributes from an ``AnnealResult`` (NumPy or dask).

        ``result`` is in the working ``units``: lengths are multiplied by the
        scale, energies by its square (both exact: the scale is a power of
        4). ``objective`` defaults to the path's last; ``final`` is the label
        counts, inertia and objective of a final pass, when the fit made one.
        Every attribute is assigned at once by ``_set_fitted``, after the
        warnings.
        """
        if objective is None:
            objective = float(result.objective_path[-1])
        split_linkage = result.split_linkage.copy()
        split_linkage[:, 2] = units.lengths(split_linkage[:, 2])
        counts, inertia = (None, None) if final is None else final[:2]
        self._set_fitted(
            rows,
            units,
            result.centers,
            counts,
            inertia,
            subject=": the final phase",
            _activation=result.activation,
            sigma_=float(units.lengths(result.sigma)),
            objective_=float(units.energies(objective)),
            n_iter_=result.n_iter_final,
            n_iter_total_=result.n_iter,
            converged_=result.converged,
            certified_=result.certified,
            sigma_path_=units.lengths(result.sigma_path),
            centers_path_=units.to_user(result.centers_path),
            objective_path_=units.energies(result.objective_path),
            inertia_path_=units.energies(result.inertia_path),
            n_distinct_centers_path_=result.n_distinct_path,
            activation_path_=result.activation_path,
            critical_sigmas_=units.lengths(result.critical_sigmas),
            n_polish_moves_=result.n_polish_moves,
            n_clusters_=result.centers.shape[0],
            cluster_count_lifetimes_=result.count_lifetimes,
            split_linkage_=split_linkage,
        )
