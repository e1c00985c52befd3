"""AnnealedRBFKMeans: the estimator around the annealing schedule of ``_anneal``."""

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ._anneal import (
    Settings,
    anneal,
    counted,
    first_critical_sigma,
    kmeans_from_init,
    start_and_final_activations,
)
from ._base import _BaseRBFKMeans, all_or_nothing
from ._count import anneal_auto, count_attributes
from ._finish import finish_on_every_row
from ._iterations import ACTIVATIONS
from ._policy import one_blas_thread
from ._rows import tolerance
from ._validation import warn_user


def _mass_unit(sample_weight):
    """Weight of one sample in the split and drop rules of the annealing.

    Integer weights are counts (so they are equivalent to repeated rows);
    other weights are measured in units of their mean positive value.
    """
    if np.all(sample_weight == np.round(sample_weight)):
        return 1.0
    return float(sample_weight[sample_weight > 0].mean())


def _check_width(name, width, units):
    """Return the width parameter ``name`` in working units, or raise if out of range.

    The schedule computes with the temperature ``T = 2 sigma^2`` (float64,
    whatever the data's dtype): a working width above ``sqrt(max / 2)``
    overflows it and one below ``sqrt(tiny / 2)`` leaves the normal
    numbers (``T`` loses precision, then rounds to 0 and every width of
    the path with it), ``max`` and ``tiny`` of ``np.finfo(np.float64)``.
    The bounds are reported in the user's units.
    """
    working = units.to_working_length(width)
    finfo = np.finfo(np.float64)
    low, high = np.sqrt(finfo.tiny / 2), np.sqrt(finfo.max / 2)
    if low <= working <= high:
        return working
    low_user, high_user = units.to_user_length([low, high])
    if working > high:
        hint = (
            "every width above the first critical width starts from the same "
            "state: sigma_start='auto' starts just above it"
            if name == "sigma_start"
            else "a float sigma_end is a width for the soft solution, below sigma_start"
        )
        raise ValueError(
            f"{name}={width:.6g} is too large: the annealing computes with "
            f"2 sigma^2 in float64, which overflows above {name}={high_user:.6g} "
            f"in the units of X; {hint}."
        )
    hint = (
        "sigma_end='auto' ends at the hard (K-Means) solution"
        if name == "sigma_end"
        else "to start at the end, without annealing, pass an init other than "
        "'anneal' with sigma_start='auto'"
    )
    raise ValueError(
        f"{name}={width:.6g} is too small: the annealing computes with "
        f"2 sigma^2 in float64, which leaves the normal numbers below {name}="
        f"{low_user:.6g} in the units of X (it loses precision, then rounds "
        f"to 0); {hint}."
    )


class _Runs(NamedTuple):
    """The settings of every run of an ``AnnealedRBFKMeans`` fit.

    The rows the runs use (the rows, or a sample of many) and ``init`` in
    their units; whether the runs anneal from the data mean
    (``anneal_init``) or start with KMeans's run from an explicit init
    (``from_init``); the widths in those units; KMeans's tolerance and the
    certificate's largest width of ``from_init``; the annealing's
    ``Settings``.
    """

    rows: object
    init: object
    anneal_init: bool
    from_init: bool
    sigma_start: float
    sigma_end: float
    kmeans_tol: float
    sigma_cap: float
    settings: Settings


class _Run(NamedTuple):
    """One run: its key (the final inertia, or objective) and its result."""

    key: float
    result: object


class AnnealedRBFKMeans(_BaseRBFKMeans):
    """Anneal RBF K-Means from the data mean to a certified K-Means solution.

    Starts hot, where every centre sits at the weighted mean and no
    initialisation matters, and cools the width ``sigma`` geometrically.
    Centres separate when the width crosses the critical values of the data
    (deterministic annealing); one group splits per cooling step, along the
    principal axis of its posterior covariance. At low temperature softmax
    hands over to entmax-1.5, whose responsibilities become exactly one-hot,
    and the run ends on a Lloyd fixed point certified by the margin test.
    Deterministic: no random draw is made with ``init="anneal"``, except
    that ``n_clusters="auto"`` draws its structureless references from
    ``random_state`` (a fixed seed when it is None).

    Parameters
    ----------
    n_clusters : int or "auto", default=8
        The number of centres. ``"auto"`` chooses it from the annealing path
        against structureless references (see Notes, "Choosing the number
        of clusters"): between 2 and ``max_clusters``, or 1 when no count
        lived longer than on uniform data with the data's variances (or the
        data never split). Needs ``init="anneal"`` and ``sigma_end="auto"``.
    sigma_start : float or "auto", default="auto"
        Initial width. ``"auto"``: just above the first critical width,
        ``sigma^2 = 0.55 c lambda_max`` of the weighted covariance of ``X``,
        where ``c = 2`` for softmax and ``2 sqrt(2)`` for entmax-1.5 (a group
        splitting in two). With an explicit ``init``, ``"auto"`` starts at the
        end, without annealing (see ``init``), and a float anneals from the
        initial centres starting at that width. A float ``w`` must keep
        ``2 w^2`` a normal float64 number (about 1.05e-154 to 9.5e153 for
        data of ordinary scale); outside, the fit raises a ``ValueError``
        that gives the bounds in the units of ``X``.
    sigma_end : float or "auto", default="auto"
        Final width. ``"auto"``: cool until the responsibilities are hard,
        run Lloyd iterations until the labels stop changing (then the polish,
        see ``polish``), and end at the largest width at which every sample's
        entmax-1.5 responsibilities are exactly one-hot (margin
        ``>= 4 sigma^2``): the result is certified to be an exact K-Means
        fixed point. A float stops there instead, with a plain EM at that
        width (and no polish: the solution is soft). A float has the range
        of a float ``sigma_start``.
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
        Maximum number of EM iterations per stage (and of the final Lloyd
        run, and of its passes of single-sample moves). The single-sample
        moves that end a fit without the polish (on every row after a
        sample's fit, or with ``polish=False``) make up to ``max(max_iter,
        300)`` passes: a late pass moves a few samples near the
        boundaries, at a small part of an iteration's cost.
    tol : float, default=1e-4
        A stage ends when no centre moves more than ``30 tol sqrt(T)``
        (``T = 2 sigma^2``). The final Lloyd run ignores it (it runs until
        the labels are stable), except KMeans's run from an explicit
        ``init``, which stops as KMeans's does (summed squared centre shift
        at most ``tol`` times the mean feature variance).
    verbose : int, default=0
        Print one line per stage when positive, each count named for what
        it counts (the final phase's line: the Lloyd run, then the moves
        kept and the Lloyd iterations their trials cost). On a sample of
        many rows, the lines that describe the sample say so.
    random_state : int, RandomState instance or None, default=None
        Seeds a random ``init``, and the references of
        ``n_clusters="auto"`` (None: a fixed seed, so that the fit repeats);
        otherwise unused with ``init="anneal"``.
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
        the polish moves them. After it, boundary moves (two neighbouring
        clusters' union split afresh, or a share of one cluster's samples
        moved to the other, kept when Lloyd from there ends lower); a
        search gives up after a tenth of the annealing's iterations without
        a move kept.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (`n_clusters_`, n_features)
        The centres.
    n_clusters_ : int
        The number of centres: ``n_clusters``, or the count chosen with
        ``n_clusters="auto"``.
    cluster_count_margin_ : float
        Only with ``n_clusters="auto"``: how far the chosen count's
        cumulative gap (``cluster_count_gap_``) rises above that of every
        smaller count (one cluster's is 0), in cooling steps; ``inf`` when
        the chosen count can split no further, 0 when one cluster was
        chosen. At most 1, the choice is uncertain (a ``UserWarning`` says
        so).
    cluster_count_reference_lifetimes_ : ndarray of shape (n_references, max_clusters)
        Only with ``n_clusters="auto"``: the lifetimes (as
        ``cluster_count_lifetimes_``) of the same exploration on each of
        three structureless references: ``min(1000, the data's weight in
        samples)`` rows drawn with ``random_state``, uniformly in a box along
        the data's principal axes with the data's variance along each. A
        count that could split no further has lifetime 0. Shape ``(0,
        max_clusters)`` when the data never split.
    cluster_count_gap_ : ndarray of shape (max_clusters,)
        Only with ``n_clusters="auto"``: entry ``c - 1`` is the cumulative
        gap ``G(c) = sum_{j=2..c} (L(j) - mean_b R_b(j))`` of the data's
        lifetimes over the references' mean (0 for one cluster; ``inf``
        from a count that can split no further). ``n_clusters_`` is the
        smallest count whose gap is within ``cluster_count_gap_tolerance_``
        of the largest, or 1 when the largest does not exceed
        ``cluster_count_gap_threshold_``.
    cluster_count_gap_tolerance_ : float
        Only with ``n_clusters="auto"``: the tolerance of that choice in
        log-width: the largest of one cooling step (``-0.5 log(cooling)``),
        one standard error of the references at the largest gap (the
        standard deviation of their cumulative lifetimes times ``sqrt(1 +
        1/B)``) and 0.15 of the largest gap.
    cluster_count_gap_threshold_ : float
        Only with ``n_clusters="auto"``: the gap a count must exceed to beat
        the references, in log-width: the larger of three cooling steps and
        two standard errors.
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
        Whether the final phase converged within ``max_iter``: with
        ``sigma_end="auto"``, its single-sample moves ended, no sample
        gaining by a move (a fixed point of Lloyd's too, even where
        ``max_iter`` stopped Lloyd's run before them; on dask rows, which
        make no single-sample moves, Lloyd reached stable labels); with a
        float ``sigma_end``, the EM at it met its tolerance. On more rows
        than the annealing's sample, the run on every row. When
        ``max_iter`` stops KMeans's run from an explicit ``init``, its
        result is kept as it is (no polish). Intermediate stages may stop at
        ``max_iter`` near a critical width; the next stage continues from
        there.
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
    that persists over a long range of widths may be a structure of the
    data, but a count also lives long merely from the data's extent and
    shape. With ``n_clusters="auto"`` the schedule runs as for
    ``max_clusters + 1`` clusters until more than ``max_clusters`` distinct
    centres exist; up to that point its path is the one every fit with at
    least that many clusters follows (the split decisions do not depend on
    the number of clusters). The same exploration runs on three
    structureless references (uniform, with the data's variances along its
    principal axes, drawn with ``random_state``). The count chosen is the
    smallest whose cumulative gap of lifetimes over the references
    (``cluster_count_gap_``) is within ``cluster_count_gap_tolerance_`` of
    the largest, or 1 (with a ``UserWarning``) when no gap exceeds
    ``cluster_count_gap_threshold_``. Then the fit with
    ``n_clusters=n_clusters_`` runs: the result, path and all, is that
    fit's, except ``n_iter_total_`` (which includes the explorations) and
    the ``cluster_count_*`` attributes. The rule finds clusters that are
    separated relative to the spread of uniform data of the same shape;
    close clusters of very unequal size and spread can fall below it (the
    user guide, "Choosing the number of clusters").

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
        return self._fit(X, sample_weight)

    def _n_init(self, init_is_array):
        if isinstance(self.init, str) and self.init == "anneal":
            if self.n_init not in (1, "auto"):
                warn_user(
                    "init='anneal' is deterministic: performing one run "
                    f"instead of n_init={self.n_init}.",
                    RuntimeWarning,
                )
            return 1
        # KMeans's rule for "auto", its warning for an array with n_init > 1.
        return super()._n_init(init_is_array)

    def _prepare_runs(self, rows, init, random_state):
        """Return the settings of every run: ``_Runs``, resolved once.

        The runs use ``rows``: the rows themselves, or the sample of many
        rows (``annealing_sample``: NumPy rows with ``init="anneal"``, every
        dask fit), with ``init`` in its units. Widths are in those units:
        ``sigma_start`` is the requested one, else just above the first
        critical width for ``init="anneal"``, else ``sigma_end``. The
        requested activation becomes the one the schedule starts with and
        the one it ends with (``start_and_final_activations``). An explicit
        init with ``sigma_start="auto"`` starts at the end: KMeans's run from
        it (or the EM at a float ``sigma_end``), no annealing; its tolerance
        and the certificate's largest width are set here.
        """
        n_clusters, _ = self._requested_clusters()
        run_rows, init = rows.annealing_sample(n_clusters, init, random_state)
        rows_note = ""
        if run_rows.X.shape[0] < rows.w.shape[0]:
            # The lines of the schedule and of the final phase on the sample
            # say so: their energies and counts are the sample's.
            rows_note = f" (sample of {run_rows.X.shape[0]} rows)"
        if self.verbose and run_rows is not rows:
            print(
                f"Annealing on a sample of {run_rows.X.shape[0]} rows in memory "
                f"(of {rows.w.shape[0]}: the schedule's passes cost the "
                "sample's size); the final phase and the certificate then run "
                "on every row."
            )
        units = run_rows.units
        start, final = start_and_final_activations(self.activation)
        sigma_end = None
        if self.sigma_end != "auto":
            sigma_end = _check_width("sigma_end", self.sigma_end, units)
        anneal_init = isinstance(self.init, str) and self.init == "anneal"
        from_init = not anneal_init and self.sigma_start == "auto"
        if self.sigma_start != "auto":
            sigma_start = _check_width("sigma_start", self.sigma_start, units)
        elif anneal_init:
            sigma_start = first_critical_sigma(run_rows, start)
        else:
            sigma_start = sigma_end
        if sigma_end is not None and not from_init and sigma_start <= sigma_end:
            start_user, end_user = units.to_user_length([sigma_start, sigma_end])
            if self.sigma_start != "auto":
                raise ValueError(
                    f"sigma_start={start_user:.6g} must be larger than "
                    f"sigma_end={end_user:.6g}."
                )
            # The user gave sigma_end only: say where the start came from.
            raise ValueError(
                f"sigma_end={end_user:.6g} must be smaller than sigma_start, "
                f'which "auto" set to {start_user:.6g}, just above the first '
                "critical width of X (at wider widths every centre is the "
                "weighted mean of X). Choose a smaller sigma_end, or give "
                "sigma_start."
            )
        kmeans_tol = sigma_cap = None
        if from_init and sigma_end is None:
            kmeans_tol = tolerance(run_rows.X, np.ones_like(run_rows.w), self.tol)
            sigma_cap = first_critical_sigma(run_rows, start)
        settings = Settings(
            cooling=self.cooling,
            start_activation=start,
            final_activation=final,
            max_iter=self.max_iter,
            tol=self.tol,
            mass_unit=_mass_unit(run_rows.w),
            polish=self.polish,
            verbose=self.verbose,
            rows_note=rows_note,
            units=units,
        )
        return _Runs(
            run_rows, init, anneal_init, from_init, sigma_start, sigma_end,
            kmeans_tol, sigma_cap, settings,
        )  # fmt: skip

    def _run_once(self, setup, first):
        """One run: the annealing, or KMeans's run from an explicit init.

        Its key is the final inertia (the objective at a float ``sigma_end``).
        """
        runs = setup.runs
        rows, sigma_end = runs.rows, runs.sigma_end
        init_centers = None
        if not runs.anneal_init:
            init_centers = self._init_centroids(
                rows.X, runs.init, setup.random_state, rows.w
            )
            if self.verbose:
                print("Initialization complete")
        if runs.from_init and sigma_end is None:
            result = kmeans_from_init(
                rows,
                init_centers,
                runs.settings,
                tol=runs.kmeans_tol,
                sigma_cap=runs.sigma_cap,
            )
        elif self.n_clusters == "auto":
            result = anneal_auto(
                rows,
                self.max_clusters,
                runs.settings,
                sigma_start=runs.sigma_start,
                random_state=self.random_state,
            )
        else:
            result = anneal(
                rows,
                self.n_clusters,
                runs.settings,
                init_centers=init_centers,
                sigma_start=runs.sigma_start,
                sigma_end=sigma_end,
            )
        path = result.inertia_path if sigma_end is None else result.objective_path
        return _Run(path[-1], result)

    def _fitted(self, setup, run):
        """Return the keywords of ``_set_fitted`` for the best run.

        A run on a sample is finished on every row (``_finish.finish_on_every_row``),
        whose final pass gives the label counts, the inertia and the
        objective; a run on every row is the fit itself.
        """
        rows = setup.rows
        result, final = finish_on_every_row(
            rows, setup.runs.rows, run.result, hard=self.sigma_end == "auto",
            max_iter=self.max_iter, tol=self.tol,
        )  # fmt: skip
        user = result.to_user(rows.units)
        if self.verbose and final is not None:
            it = counted(result.n_iter_final, "iteration")
            if self.sigma_end == "auto":
                what = f"Lloyd ({it}) and single-sample moves"
                end = "ended" if result.converged else "stopped at max_iter"
            else:
                what = f"EM at sigma {user.sigma:.4g}"
                end = f"{'converged' if result.converged else 'stopped'} after {it}"
            print(
                f"Every row: {what} {end}, inertia "
                f"{float(rows.units.to_user_energy(final[1])):.6g}, certified "
                f"{result.certified}."
            )
        if final is None:
            counts, inertia, objective = None, None, result.objective_path[-1]
        else:
            counts, inertia, objective = final
        return dict(
            centers=result.centers,
            counts=counts,
            inertia=inertia,
            objective=objective,
            sigma=user.sigma,
            n_iter=result.n_iter_final,
            converged=result.converged,
            subject=": the final phase",
            _activation=result.activation,
            n_iter_total_=result.n_iter,
            certified_=result.certified,
            sigma_path_=user.sigma_path,
            centers_path_=user.centers_path,
            objective_path_=user.objective_path,
            inertia_path_=user.inertia_path,
            n_distinct_centers_path_=result.n_distinct_path,
            activation_path_=result.activation_path,
            critical_sigmas_=user.critical_sigmas,
            n_polish_moves_=result.n_polish_moves,
            n_clusters_=result.centers.shape[0],
            cluster_count_lifetimes_=result.count_lifetimes,
            split_linkage_=user.split_linkage,
            **count_attributes(result.count_choice, result.centers.shape[0]),
        )
