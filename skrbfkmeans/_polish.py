"""kmeans_polish: a deterministic split/merge local search on a K-Means solution.

doc/theory.rst, "The split/merge polish": annealing
resolves the data's natural clusters first and can end with centres spent on
the wrong ones. Moving one centre from where it matters least to the cluster
that gains most from a second centre, then running Lloyd, closes that gap.

Boundary moves (``boundary_moves``, doc/theory.rst, "Boundary moves") split
two neighbouring clusters' union afresh, or shift a share of one cluster's
samples across to the other, and run Lloyd from there: the final phase of
``AnnealedRBFKMeans`` tries them, within a budget of Lloyd iterations, once
split/merge and single-sample moves have stopped.
"""

from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import (
    Hidden,
    Interval,
    StrOptions,
    validate_params,
)

from ._engine.assign import nearest
from ._engine.blas import matmul
from ._engine.passes import labels_inertia, labels_margins
from ._hartigan import hartigan
from ._lloyd import IncrementalLloyd
from ._policy import one_blas_thread
from ._rows import MemoryRows, working_units
from ._validation import check_data_centers, check_n_samples, warn_user

# Candidate (remove j, split l) pairs tried per pass when k (k - 1) exceeds it.
MAX_PAIRS = 24

# Boundary moves: the shares of a cluster's weight moved across one of its
# boundaries (the rows nearest it), in the order tried.
BOUNDARY_SHARES = (0.125, 0.25, 0.5)


def _dense_rows(X, idx):
    """Rows ``idx`` of ``X`` (dense or CSR) as a dense float64 array."""
    Xi = X[idx]
    return np.asarray(Xi.toarray() if sp.issparse(Xi) else Xi, dtype=np.float64)


# From this many rows on, the 2-means's steps are bounded (``_two_means``).
BOUNDED_SPLIT_ROWS = 2000

# Relative room of the bounds for the rounding of explicit distances.
_SPLIT_ROOM = 1e-9


def _split_distances(Xl, centers):
    """Squared distances of the rows to the two centres, by explicit differences."""
    return ((Xl[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)


def _two_means(Xl, wl, max_iter=100):
    """Weighted 2-means of one cluster, seeded along its principal axis.

    The rows are split by the sign of their projection on the principal axis
    of the weighted covariance (deterministic), then Lloyd runs on the two
    halves (``_split_lloyd``). Where one row alone gains more than that
    split, Lloyd runs from the row alone too, and the lower SSE is kept:
    a light row far out (weight 2 at 2600 among rows of weight 1e5 within 1
    of one another) sets the principal axis, but the two halves it seeds
    end on the heavy rows, with the far row still in one of them.
    Returns the two centres and the SSE of the split.
    """
    W = wl.sum()
    mu = wl @ Xl / W
    Y = Xl - mu
    cov = (Y * wl[:, None]).T @ Y / W
    _, vecs = np.linalg.eigh(cov)
    centers, sse = _split_lloyd(
        Xl, wl, (Y @ vecs[:, -1] > 0).astype(np.intp), mu, max_iter
    )
    # Hartigan's gain of taking row i out of the cluster on its own:
    # w_i W / (W - w_i) ||x_i - mu||^2.
    rest = W - wl
    d_mu = np.einsum("ij,ij->i", Y, Y)
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(rest > 0, wl * d_mu * W / rest, 0.0)
    i = int(np.argmax(alone))
    if float(wl @ d_mu) - alone[i] < sse:
        labels = np.zeros(Xl.shape[0], dtype=np.intp)
        labels[i] = 1
        found = _split_lloyd(Xl, wl, labels, mu, max_iter)
        if found[1] < sse:
            centers, sse = found
    return centers, sse


def _split_lloyd(Xl, wl, labels, mu, max_iter):
    """Lloyd's 2-means of the rows from ``labels``; the centres and the SSE.

    From ``BOUNDED_SPLIT_ROWS`` rows on, each row keeps bounds on its
    distances to its own centre (above) and the other (below), moved by
    the centres' shifts (the triangle inequality); only the rows whose
    bounds no longer separate them get their distances again (Elkan's rule
    for two centres), and a last full pass gives the SSE. The distances of
    a row do not depend on the others, so the labels, centres and SSE are
    those of the plain steps. A side left empty takes ``mu``, the rows' mean.
    """
    centers = np.zeros((2, Xl.shape[1]))
    bounded = Xl.shape[0] >= BOUNDED_SPLIT_ROWS
    rows = np.arange(Xl.shape[0])
    own = other = None
    stale = False  # rows left out: their distances are not the last centres'
    for _ in range(max_iter):
        before = centers.copy()
        for c in (0, 1):
            mask = labels == c
            mass = wl[mask].sum()
            centers[c] = wl[mask] @ Xl[mask] / mass if mass > 0 else mu
        if own is None:
            d = _split_distances(Xl, centers)
            idx = rows
        else:
            shift = np.sqrt(((centers - before) ** 2).sum(axis=1))
            own += shift[labels]
            other -= shift[1 - labels]
            idx = np.flatnonzero(own * (1 + _SPLIT_ROOM) >= other * (1 - _SPLIT_ROOM))
            d[idx] = _split_distances(Xl[idx], centers)
            stale = idx.size < rows.size
        # A row left out keeps its label, the argmin of its last distances.
        new = np.argmin(d, axis=1)
        if bounded:
            if own is None:
                own, other = np.empty(rows.size), np.empty(rows.size)
            own[idx] = np.sqrt(d[idx, new[idx]])
            other[idx] = np.sqrt(d[idx, 1 - new[idx]])
        if np.array_equal(new, labels):
            break
        labels = new
    if stale:
        d = _split_distances(Xl, centers)
    sse = float(wl @ d[rows, labels])
    return centers, sse


class Splits:
    """2-means splits of sets of ``rows`` (``_two_means``), kept from pass to pass.

    A pass of the polish splits every cluster, a boundary search the union
    of every neighbouring pair; after a kept move most of them hold the
    same rows as in the pass before, and a split is a function of its rows
    alone. ``split`` takes it from the last two passes where it can
    (``next_pass`` starts a pass; older entries are forgotten), keyed by the
    rows' indices themselves (8 bytes a row). One instance serves one kind
    of search on one ``rows``: the polish's clusters, or the boundary
    searches' unions. None for fewer than two rows or identical rows:
    nothing to split.
    """

    def __init__(self, rows):
        self.X, self.w = rows.X, rows.w
        self.current, self.previous = {}, {}

    def next_pass(self):
        self.previous, self.current = self.current, {}

    def split(self, idx):
        """Return the 2-means of rows ``idx`` (of positive weight): centres, SSE."""
        key = idx.tobytes()
        if key in self.current:
            return self.current[key]
        if key in self.previous:
            found = self.previous[key]
        elif idx.size < 2:
            found = None
        else:
            Xl = _dense_rows(self.X, idx)
            found = None
            if np.ptp(Xl, axis=0).max() > 0:  # identical rows: no split
                found = _two_means(Xl, self.w[idx].astype(np.float64))
        self.current[key] = found
        return found


def _candidates(rows, centers, splits):
    """Ranked (remove j, split l) pairs with their children, for one pass.

    ``R_j = sum_{i in I_j} w_i (d_i(2) - d_i(1))`` is what removing centre j
    costs if its samples move to their second-nearest centre;
    ``G_l = SSE(I_l) - SSE_2-means(I_l)`` is what splitting cluster l gains.
    Pairs come in decreasing order of the estimate ``G_l - R_j``, whatever
    its sign: Lloyd after the move usually recovers far more than ``R_j``.
    """
    k, w = centers.shape[0], rows.w
    labels, margins, nearest = labels_margins(rows.X, centers, rows.offset)
    d1 = np.maximum(rows.x_sq + nearest, 0.0)
    removal = np.bincount(labels, weights=w * margins, minlength=k)
    gain = np.full(k, -np.inf)
    children = {}
    for c in range(k):
        rows = np.flatnonzero((labels == c) & (w > 0))
        split = splits.split(rows)
        if split is None:
            continue  # fewer than two rows, or identical: nothing to split
        kids, sse2 = split
        gain[c] = float(w[rows] @ d1[rows]) - sse2
        children[c] = kids
    # Every valid pair's estimate G_c - R_j, best first, ties by (j, c).
    # Estimates equal but for rounding (coincident centres, symmetric
    # clusters) are ties: they are ranked on a grid of 1e-9 of the
    # distortion, so that the order does not depend on the data's units.
    valid = np.isfinite(removal)[:, None] & np.isfinite(gain)[None, :]
    np.fill_diagonal(valid, False)
    j, c = np.nonzero(valid)
    values = gain[c] - removal[j]
    # Python floats: a zero distortion's tiny quantum raises no underflow.
    quantum = 1e-9 * max(float(matmul(w, d1)), float(np.finfo(np.float64).tiny))
    with np.errstate(over="ignore"):  # a zero distortion: every pair ties
        key = -np.round(values / quantum)
    order = np.lexsort((c, j, key))[:MAX_PAIRS]
    pairs = [(values[i], int(j[i]), int(c[i])) for i in order]
    return pairs, children


def _boundary_pairs(X, w, centers, offset):
    """Cluster pairs ``(a, b)``, most shared boundary first.

    A pair's boundary is the weight of the rows of ``a`` whose second-nearest
    centre is ``b`` (one pass of partial distances); pairs that share none
    are left out, ties go by ``(a, b)``.
    """
    k = centers.shape[0]
    first, _, second, _ = nearest(X, centers, offset, second=True)
    shared = np.bincount(first * k + second, weights=w, minlength=k * k)
    order = np.lexsort((np.arange(k * k), -shared))
    return [divmod(int(p), k) for p in order if shared[p] > 0]


def _resplit_trial(state, a, b, splits):
    """Return a trial state with ``a`` and ``b``'s union split afresh, or None.

    The union's 2-means, seeded along its principal axis (``splits``),
    gives the two centres; ``state`` is left as it is. None for a union of
    fewer than two rows of positive weight, or of identical rows.
    """
    rows = state.rows
    idx = np.flatnonzero(np.isin(state.labels, (a, b)) & (rows.w > 0))
    split = splits.split(idx)
    if split is None:
        return None
    kids, _ = split
    trial = state.copy()
    trial.centers[a], trial.centers[b] = kids.astype(state.centers.dtype)
    return trial


def _boundary_trials(state, a, b):
    """Yield a trial state per share of ``BOUNDARY_SHARES``: ``a``'s rows to ``b``.

    The rows of ``a`` nearest ``b`` (smallest ``d_b - d_a``, i.e. largest
    projection on ``mu_b - mu_a``) move, at least one and never all: the two
    centres become the means of the clusters so changed. The rows are ranked
    once for all shares; ``state`` is left as it is. Yields nothing when
    ``a`` has fewer than two rows of positive weight.
    """
    rows = state.rows
    idx = np.flatnonzero((state.labels == a) & (rows.w > 0))
    if idx.size < 2:
        return
    Xa = _dense_rows(rows.X, idx) - rows.offset
    toward = (state.centers[b] - state.centers[a]).astype(np.float64)
    order = np.argsort(-(Xa @ toward), kind="stable")
    wa = rows.w[idx].astype(np.float64)
    dtype = state.centers.dtype
    for share in BOUNDARY_SHARES:
        m = min(max(int(round(share * idx.size)), 1), idx.size - 1)
        group = order[:m]
        W, S = wa[group].sum(), wa[group] @ Xa[group]
        trial = state.copy()
        trial.centers[a] = (rows.offset + (state.S[a] - S) / (state.N[a] - W)).astype(
            dtype
        )
        trial.centers[b] = (rows.offset + (state.S[b] + S) / (state.N[b] + W)).astype(
            dtype
        )
        yield trial


def _all_trials(state, splits):
    """Every boundary move of ``state``, in the order tried.

    First each neighbouring pair's union split afresh (``_resplit_trial``,
    once per unordered pair), then the shares of ``_boundary_trials``; pairs
    in the order of ``_boundary_pairs``. Lazily: a search that stops early
    builds no more trials than it ran.
    """
    rows = state.rows
    pairs = _boundary_pairs(rows.X, rows.w, state.centers, rows.offset)
    unordered = dict.fromkeys((min(a, b), max(a, b)) for a, b in pairs)
    for a, b in unordered:
        trial = _resplit_trial(state, a, b, splits)
        if trial is not None:
            yield a, b, trial
    for a, b in pairs:
        for trial in _boundary_trials(state, a, b):
            yield a, b, trial


def polish(
    rows,
    centers,
    *,
    max_moves=None,
    max_iter=300,
    single_moves=False,
    budget=None,
    splits=None,
):
    """Run the split/merge search: centres, inertia, moves and iterations.

    Returns the centres, their inertia (from the search's last full pass),
    the moves kept (pairs ``(j, c)``: centre ``j`` left its cluster, and
    centres ``c`` and ``j`` took the two halves of cluster ``c``), every
    Lloyd iteration of the search, those of the run that produced the
    centres (the first, or the last kept move's), the single-sample moves
    made and whether the centres are a fixed point of the last moves run
    (Lloyd's, and with ``single_moves`` the single-sample moves'), not
    stopped by ``max_iter``.

    Every Lloyd run is incremental (``_lloyd.IncrementalLloyd``): a trial
    move starts from the current labels, and an iteration recomputes only
    the samples a moved centre can take or lose. Its result is that of
    plain Lloyd on all rows; on small data a hopeless trial is abandoned
    (``_lloyd.HOPELESS``) and not kept.

    ``single_moves`` runs single-sample moves (``_hartigan``) from the
    starting Lloyd fixed point and after every kept move, so that each pass
    of trials starts from a state that no single sample improves: the
    search then ends on a fixed point of both moves, with one pass that
    keeps nothing. ``budget`` (None: no bound) stops the search once its
    trials have spent that many Lloyd iterations (the trial that crosses
    it finishes). ``splits`` (a ``Splits`` of ``rows``; None: a new one)
    keeps the clusters' 2-means from pass to pass, and from call to call.
    """
    splits = Splits(rows) if splits is None else splits
    state = IncrementalLloyd(rows, centers)
    n_iter, settled = state.run(max_iter)
    n_iter_last, n_single = n_iter, 0

    def settle(state):
        # Single-sample moves, then Lloyd from their means (rounding can
        # leave a sample nearer another mean): the same state if none.
        # Their fixed point is Lloyd's: settled even where Lloyd was not.
        nonlocal n_iter, n_iter_last, n_single, settled
        moved_centers, _, n_moved, settled = hartigan(
            rows, state.centers, max_iter=max_iter
        )
        if not n_moved:
            return state
        n_single += n_moved
        state = IncrementalLloyd(rows, moved_centers)
        it, converged = state.run(max_iter)
        settled = settled and converged
        n_iter += it
        n_iter_last = it
        return state

    if single_moves:
        state = settle(state)
    inertia, ceiling = state.inertia(), state.ceiling()
    moves = []
    k = centers.shape[0]
    spent = 0
    while k > 1 and (max_moves is None or len(moves) < max_moves):
        if budget is not None and spent >= budget:
            break
        splits.next_pass()
        pairs, children = _candidates(rows, state.centers, splits)
        for _, j, c in pairs:
            if budget is not None and spent >= budget:
                break
            trial = state.copy()
            trial.centers[c], trial.centers[j] = children[c].astype(centers.dtype)
            it, converged = trial.run(
                max_iter, moved=[j, c], ceiling=ceiling, incumbent=state.labels
            )
            n_iter += it
            spent += it
            # Kept only when the gain is above the inertias' rounding: a
            # gain within it can be noise, and a search that keeps noise
            # need never end (float32 duplicates: a move and its inverse
            # both "lower").
            if trial.below(ceiling):
                state, n_iter_last, settled = trial, it, converged
                moves.append((j, c))
                if single_moves:
                    state = settle(state)
                inertia, ceiling = state.inertia(), state.ceiling()
                break
        else:
            break  # a whole pass kept nothing
    return state.centers, inertia, moves, n_iter, n_iter_last, n_single, settled


def boundary_moves(rows, centers, *, budget, max_iter=300, splits=None):
    """Boundary moves from a Lloyd fixed point, within ``budget`` iterations.

    ``centers`` must be a Lloyd fixed point of ``rows`` (the final phase's).
    A move redraws the boundary between two clusters: their union split
    afresh by 2-means, or a share of one cluster's rows
    (``BOUNDARY_SHARES``), those nearest the other cluster, moved across;
    Lloyd runs from the two new centres (``_all_trials`` gives the order).
    The search stops at the first move that lowers the inertia, or once
    ``budget`` Lloyd iterations are spent. Returns the centres, their
    inertia, whether a move was kept, the Lloyd iterations of the kept
    move's run and all the iterations spent. The centres come back
    unchanged when no move lowers the inertia. ``splits`` (a ``Splits`` of
    ``rows``, for the unions) as in ``polish``.
    """
    splits = Splits(rows) if splits is None else splits
    splits.next_pass()
    state = IncrementalLloyd(rows, centers)
    state.run(max_iter)
    inertia, ceiling = state.inertia(), state.ceiling()
    spent = 0
    for a, b, trial in _all_trials(state, splits):
        if spent >= budget:
            break
        it, _ = trial.run(
            max_iter, moved=[a, b], ceiling=ceiling, incumbent=state.labels
        )
        spent += it
        if trial.below(ceiling):  # beyond rounding, as in polish
            return trial.centers, trial.inertia(), True, it, spent
    return centers, inertia, False, 0, spent


@validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "centers": ["array-like"],
        "sample_weight": ["array-like", None],
        "max_moves": [Interval(Integral, 0, None, closed="left"), None],
        "random_state": ["random_state", Hidden(StrOptions({"deprecated"}))],
    },
    prefer_skip_nested_validation=True,
)
@one_blas_thread
def kmeans_polish(
    X, centers, *, sample_weight=None, max_moves=None, random_state="deprecated"
):
    """Improve a K-Means solution by deterministic split/merge moves.

    One move removes a centre where it matters least and splits the cluster
    that gains most from a second centre, then runs Lloyd to label
    stability; it is kept only if the weighted inertia strictly drops.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The data.
    centers : array-like of shape (n_clusters, n_features)
        A K-Means solution (any centres: Lloyd runs first).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the samples.
    max_moves : int, default=None
        Stop after this many accepted moves; ``None`` stops when a pass
        keeps no move.
    random_state : int, RandomState instance or None, default="deprecated"
        Has no effect: the search makes no random draw, and the result is
        the same for every value.

        .. deprecated:: 0.1
           ``random_state`` is deprecated and will be removed in 0.2; passing
           it raises a ``FutureWarning``.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The improved centres, a Lloyd fixed point (dtype of ``X``).
    labels : ndarray of shape (n_samples,)
        Nearest centre of each sample (int32).
    inertia : float
        Weighted K-Means distortion of the result, never above that of the
        input centres after Lloyd.
    n_moves : int
        Number of accepted moves.

    See Also
    --------
    AnnealedRBFKMeans : Runs this search after annealing (``polish=True``).
    sklearn.cluster.KMeans : Its ``cluster_centers_`` can be polished.

    Notes
    -----
    For every pair (j, l) the estimate ``G_l - R_j`` ranks the move, with the
    removal cost ``R_j = sum_{i in I_j} w_i (d_i(2) - d_i(1))`` and the split
    gain ``G_l = SSE(I_l) - SSE_2-means(I_l)`` (2-means seeded by the sign of
    the projection on the principal axis of ``I_l``, so the move is
    deterministic). Pairs are tried in decreasing order of the estimate
    whatever its sign, because Lloyd after the move recovers more than
    ``R_j`` counts. A pass tries at most 24 pairs (all of them for
    ``n_clusters <= 5``) and ends at the first accepted move.

    Cost per pass: one pass over the data for the margins, a weighted
    2-means of every cluster (``O(n d^2 + n d)`` with a few iterations), and
    one Lloyd run per tried pair. A trial starts from the current labels and
    each of its iterations recomputes only the samples that a moved centre
    can take or lose (``O(n m d + n_m k d)`` for ``m`` moved centres holding
    ``n_m`` samples, instead of ``O(n k d)``); the labels are those of plain
    Lloyd, so the moves kept do not depend on it. On small data a trial
    whose inertia is above the current one by more than 20 times its last
    iteration's decrease is abandoned (a winner that gains that slowly is
    rare, but possible).

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import kmeans_polish
    >>> X = np.array([[0.0], [0.1], [5.0], [5.1], [10.0], [10.1]])
    >>> centers = np.array([[0.05], [0.06], [7.55]])  # two centres on one cluster
    >>> centers, labels, inertia, n_moves = kmeans_polish(X, centers)
    >>> np.sort(centers.ravel())
    array([ 0.05,  5.05, 10.05])
    >>> n_moves
    1
    """
    if not (isinstance(random_state, str) and random_state == "deprecated"):
        warn_user(
            "The parameter 'random_state' of kmeans_polish has no effect (the "
            "search makes no random draw); it is deprecated in 0.1 and will "
            "be removed in 0.2. Remove it from the call.",
            FutureWarning,
        )
    X, centers, sample_weight = check_data_centers(X, centers, sample_weight)
    check_n_samples(X.shape[0], centers.shape[0])
    # In working units (centred, and rescaled where squared distances would
    # leave the dtype's range); lengths and the inertia are mapped back.
    X, offset, centers, units = working_units(X, sample_weight, centers)
    rows = MemoryRows(X, sample_weight, offset, units=units)
    centers, _, moves, *_ = polish(rows, centers, max_moves=max_moves)
    labels, inertia = labels_inertia(X, sample_weight, centers, offset, explicit=True)
    inertia = float(units.to_user_energy(inertia))
    return units.to_user_points(centers), labels, inertia, len(moves)
