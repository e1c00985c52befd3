"""Tests of AnnealedRBFKMeans: the certified end point, the path, the inputs.

End points against independent NumPy oracles (``_rbf_oracle.py``), the hot
start, path consistency, quality against KMeans, determinism and weights,
float ``sigma_end``, explicit inits, dtypes, bad parameters and degenerate
input. Schedule functions: ``test_schedule.py``; what both estimators share
(transform and the fit shortcuts, every sparse format, bad input, the
caller's arrays, scikit-learn composition): ``test_estimators.py``.
"""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import ACTIVATIONS, DTYPE_IDS, DTYPES, separated_blobs
from _rbf_oracle import (
    dense64,
    distortion,
    free_energy,
    lloyd_step,
    margins,
    responsibilities,
    sq_distances,
)
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.utils._param_validation import InvalidParameterError

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

# The maps, and "auto": softmax while hot, entmax-1.5 at the end.
ANNEALED_ACTIVATIONS = ["auto", *ACTIVATIONS]


def _overlapping(seed):
    # make_blobs's centres lie in [-10, 10]^2: std 4 makes them overlap.
    return make_blobs(200, centers=4, cluster_std=4.0, random_state=seed)


# 200 rows of blobs far apart (KMeans and annealing agree), or overlapping.
DATA = {
    "separated": lambda seed: separated_blobs(seed, 200),
    "overlapping": _overlapping,
}


def _d_rounding(X, centers):
    """Bound on the rounding of a squared distance as the package computes it.

    ``||x||^2 - 2 x.mu + ||mu||^2`` on rows centred at the mean is rounded at
    a few eps times ``||x - mean||^2 + ||mu - mean||^2``.
    """
    X64, C64 = dense64(X), dense64(centers)
    eps = np.finfo(centers.dtype).eps
    mean = X64.mean(axis=0)
    sq = ((X64 - mean) ** 2).sum(axis=1).max() + ((C64 - mean) ** 2).sum(axis=1).max()
    return 64 * eps * sq


def _weighted_top_eigenvalue(X, w):
    """``lambda_max`` of ``sum_i w_i (x_i - m)(x_i - m)^T / W``, m the weighted mean."""
    mean = np.average(X, axis=0, weights=w)
    Xc = X - mean
    return np.linalg.eigvalsh((w[:, None] * Xc).T @ Xc / w.sum())[-1], mean


def _n_distinct(centers):
    return np.unique(centers, axis=0).shape[0]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("data", list(DATA))
def test_auto_end_is_certified_lloyd_fixed_point(
    data, dtype, activation, weighted, global_random_seed
):
    # Check the end point of sigma_end="auto" (doc/theory.rst, "The margin
    # certificate") against independent NumPy computations: a Lloyd step leaves
    # the centres where they are, labels_ are the nearest centres, every margin
    # d_(2) - d_(1) is at least 4 sigma_^2, and certified_ is True, on
    # separated and on overlapping data alike. With entmax-1.5 at the end,
    # predict_proba of the training data is then exactly one-hot; softmax is
    # one-hot up to (k - 1) exp(-margin / (2 sigma^2)).
    X, _ = DATA[data](global_random_seed)
    X = X.astype(dtype)
    rng = np.random.RandomState(global_random_seed)
    w = rng.uniform(0.5, 2.0, X.shape[0]) if weighted else None
    km = AnnealedRBFKMeans(4, activation=activation).fit(X, sample_weight=w)
    C = km.cluster_centers_
    assert C.shape == (4, 2) and C.dtype == dtype
    assert km.certified_ is True
    assert km.converged_ is True
    # To rounding: the cell mean rounded to the dtype, after a float64 sum
    # in centred coordinates (measured: under 3 eps x scale over 30 seeds).
    scale = np.abs(X).max()
    atol = 16 * np.finfo(dtype).eps * scale
    assert_allclose(lloyd_step(X, C, w), C, rtol=0, atol=atol)

    d = sq_distances(X, C)
    rounding = _d_rounding(X, C)
    chosen = d[np.arange(X.shape[0]), km.labels_]
    assert_allclose(chosen, d.min(axis=1), rtol=0, atol=rounding)
    m = margins(X, C)
    clear = m > rounding
    assert_array_equal(km.labels_[clear], d.argmin(axis=1)[clear])
    assert km.labels_.dtype == np.int32
    assert_array_equal(km.labels_, km.predict(X))
    assert (m >= 4.0 * km.sigma_**2 - rounding).all()

    P = km.predict_proba(X)
    assert P.dtype == dtype
    if km.activation_path_[-1] == "entmax15":
        assert_array_equal(P, np.eye(4, dtype=dtype)[km.labels_])
    else:
        bound = 3 * np.exp(-m / (2.0 * km.sigma_**2))
        eps = np.finfo(dtype).eps
        assert (1.0 - P[np.arange(X.shape[0]), km.labels_] <= bound + 8 * eps).all()


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_start_above_first_critical_width(activation, global_random_seed):
    # Check the high-temperature start (doc/theory.rst, critical widths): with
    # sigma_start="auto" the first width is sigma^2 = 0.55 c lambda_max of the
    # weighted covariance (c = 2 softmax, 2 sqrt(2) entmax-1.5: the docstring),
    # every stage wider than the first critical width sigma_c (softmax:
    # sigma_c^2 = lambda_max) keeps all k centres at the weighted mean, and
    # the first split happens at the first stage below sigma_c.
    X, _ = make_blobs(200, n_features=3, centers=4, random_state=global_random_seed)
    w = np.random.RandomState(global_random_seed).uniform(0.2, 3.0, X.shape[0])
    km = AnnealedRBFKMeans(4, activation=activation).fit(X, sample_weight=w)
    lam, mean = _weighted_top_eigenvalue(X, w)
    c = 2.0 * np.sqrt(2.0) if activation == "entmax15" else 2.0
    assert km.sigma_path_[0] ** 2 == pytest.approx(0.55 * c * lam, rel=1e-10)
    sigma_c = np.sqrt(0.5 * c * lam)
    assert km.sigma_path_[0] > sigma_c
    scale = np.abs(X).max()
    hot = km.sigma_path_ > sigma_c
    assert hot.sum() >= 1
    for centers in km.centers_path_[hot]:
        assert_allclose(centers, np.tile(mean, (4, 1)), rtol=0, atol=1e-12 * scale)
    assert_array_equal(km.n_distinct_centers_path_[hot], 1)
    assert km.critical_sigmas_[0] <= sigma_c
    assert km.critical_sigmas_[0] == km.sigma_path_[~hot].max()


@pytest.mark.parametrize("sigma_end", ["auto", 0.3], ids=["auto", "float"])
@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_path_attributes_consistent(activation, sigma_end, global_random_seed):
    # Check that the path attributes agree with each other, with the final
    # state and with independent computations: lengths and shapes, strictly
    # decreasing widths ending at sigma_, the last centres, inertia and
    # objective, the distinct-centre counts, the maps, the split widths and
    # the iteration count.
    X, _ = make_blobs(200, n_features=2, centers=5, random_state=global_random_seed)
    w = np.random.RandomState(global_random_seed).uniform(0.5, 2.0, X.shape[0])
    km = AnnealedRBFKMeans(5, activation=activation, sigma_end=sigma_end)
    km.fit(X, sample_weight=w)
    sigmas = km.sigma_path_
    n_stages = sigmas.shape[0]
    assert n_stages >= 2
    assert (np.diff(sigmas) < 0).all()
    assert sigmas[-1] == km.sigma_
    assert km.centers_path_.shape == (n_stages, 5, 2)
    for name in ("objective_path_", "inertia_path_", "n_distinct_centers_path_"):
        assert getattr(km, name).shape == (n_stages,), name
    assert km.activation_path_.shape == (n_stages,)
    assert_array_equal(km.centers_path_[-1], km.cluster_centers_)
    assert km.objective_path_[-1] == km.objective_
    assert_allclose(km.inertia_path_[-1], km.inertia_, rtol=1e-12)
    # Each stage's inertia is the hard distortion of its centres; the free
    # energy (mass-constrained or not) is never below it.
    for i in range(n_stages):
        expected = distortion(X, km.centers_path_[i], w)
        assert_allclose(km.inertia_path_[i], expected, rtol=1e-10)
    assert (km.objective_path_ >= km.inertia_path_ * (1 - 1e-12)).all()
    final_act = km.activation_path_[-1]
    expected = free_energy(X, km.cluster_centers_, km.sigma_, final_act, w)
    assert_allclose(km.objective_, expected, rtol=1e-10)

    counts = [_n_distinct(c) for c in km.centers_path_]
    assert_array_equal(km.n_distinct_centers_path_, counts)
    assert km.n_distinct_centers_path_[-1] == _n_distinct(km.cluster_centers_)
    assert km.n_distinct_centers_path_[0] == 1

    assert set(km.activation_path_) <= {"softmax", "entmax15"}
    if activation != "auto":
        assert (km.activation_path_ == activation).all()
    else:
        assert km.activation_path_[0] == "softmax"
        assert sigma_end != "auto" or km.activation_path_[-1] == "entmax15"

    crit = km.critical_sigmas_
    assert ((crit >= sigmas.min()) & (crit <= sigmas.max())).all()
    if _n_distinct(km.cluster_centers_) == 5:
        assert crit.shape[0] >= 4
    assert km.n_iter_total_ >= n_stages
    assert 1 <= km.n_iter_ <= min(km.max_iter, km.n_iter_total_)


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_inertia_path_decreases_at_the_end(activation, global_random_seed):
    # Check that the final Lloyd phase does not increase the inertia of the
    # last annealing stage (Lloyd is monotone), and that the end point is at
    # least as good as every stage once all k centres exist.
    X, _ = make_blobs(300, centers=5, cluster_std=1.5, random_state=global_random_seed)
    km = AnnealedRBFKMeans(5, activation=activation).fit(X)
    ip = km.inertia_path_
    assert ip[-1] <= ip[-2] * (1 + 1e-12)
    full = np.flatnonzero(km.n_distinct_centers_path_ == 5)[0]
    assert ip[-1] <= ip[full:].min() * (1 + 1e-12)
    assert ip[-1] < ip[0]


def test_matches_best_kmeans_on_separated_blobs(global_random_seed):
    # Check that on well-separated blobs the single annealing run reaches the
    # inertia of the best of 10 KMeans restarts (the global optimum here).
    X, _ = separated_blobs(global_random_seed, 300)
    km = AnnealedRBFKMeans(4).fit(X)
    best = KMeans(4, n_init=10, random_state=global_random_seed).fit(X)
    assert km.inertia_ == pytest.approx(best.inertia_, rel=1e-9)


def test_beats_single_kmeans_on_most_seeds(global_random_seed):
    # Check that one annealing run is at least as good as one KMeans run
    # (k-means++, n_init=1) on most of ten blob data sets: annealing starts
    # from the mean and needs no restart. (Measured: 19 of 20 seeds.)
    wins = 0
    for s in range(global_random_seed, global_random_seed + 10):
        X, _ = make_blobs(200, centers=5, cluster_std=1.5, random_state=s)
        km = AnnealedRBFKMeans(5).fit(X)
        single = KMeans(5, n_init=1, random_state=s).fit(X)
        wins += km.inertia_ <= single.inertia_ * (1 + 1e-12)
    assert wins >= 7


def _fitted_arrays(km):
    names = ["cluster_centers_", "labels_", "sigma_path_", "centers_path_"]
    names += ["objective_path_", "inertia_path_", "n_distinct_centers_path_"]
    names += ["critical_sigmas_"]
    return {name: getattr(km, name) for name in names}


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_deterministic_without_random_draw(activation, global_random_seed):
    # Check that init="anneal" makes no random draw: refits, and fits with
    # any random_state (None included), are bit-identical, and a RandomState
    # instance passed as random_state is left in the state it was given.
    X, _ = make_blobs(150, centers=4, cluster_std=2.0, random_state=global_random_seed)
    ref = AnnealedRBFKMeans(4, activation=activation).fit(X)
    rs = np.random.RandomState(7)
    state = rs.get_state()
    for random_state in (None, 0, 12345, rs):
        km = AnnealedRBFKMeans(4, activation=activation, random_state=random_state)
        km.fit(X)
        for name, value in _fitted_arrays(ref).items():
            assert_array_equal(getattr(km, name), value, err_msg=name)
        assert km.sigma_ == ref.sigma_ and km.n_iter_ == ref.n_iter_
        assert km.n_iter_total_ == ref.n_iter_total_
        assert km.objective_ == ref.objective_ and km.inertia_ == ref.inertia_
    after = rs.get_state()
    assert state[0] == after[0] and state[2:] == after[2:]
    assert_array_equal(state[1], after[1])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_integer_weights_equal_repeated_rows(activation, sparse, global_random_seed):
    # Check that integer weights give the fit of the repeated rows and zero
    # weights that of the removed rows (no random draw, integer weights are
    # counts): centres, widths, labels and responsibilities of the original
    # rows.
    X, _ = make_blobs(120, centers=4, cluster_std=1.5, random_state=global_random_seed)
    w = np.random.RandomState(global_random_seed).randint(0, 4, X.shape[0])
    kept = w > 0

    def fit(data, weights=None):
        data = sp.csr_matrix(data) if sparse else data
        return AnnealedRBFKMeans(4, activation=activation).fit(
            data, sample_weight=weights
        )

    weighted = fit(X, w)
    for other in (fit(np.repeat(X, w, axis=0)), fit(X[kept], w[kept])):
        assert_allclose(other.cluster_centers_, weighted.cluster_centers_, rtol=1e-10)
        assert_array_equal(other.predict(X[kept]), weighted.labels_[kept])
        assert other.sigma_ == pytest.approx(weighted.sigma_, rel=1e-10)
        assert other.certified_ == weighted.certified_
        assert_allclose(other.inertia_, weighted.inertia_, rtol=1e-10)
        assert_allclose(
            other.predict_proba(X), weighted.predict_proba(X), rtol=1e-9, atol=1e-12
        )


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_zero_weight_sample_on_a_boundary_is_ignored(activation):
    # Check that a zero-weight sample changes nothing, even one exactly on
    # the bisector of two centres (margin 0): the certificate and the width
    # concern the data the weights describe, as for the removed row.
    # Two mirrored blobs: the origin is equidistant from both centres.
    rng = np.random.RandomState(0)
    half = rng.normal(size=(30, 2)) * 0.5 + [3.0, 0.0]
    X = np.vstack([half, -half, [[0.0, 0.0]]])
    w = np.ones(X.shape[0])
    w[-1] = 0.0
    removed = AnnealedRBFKMeans(2, activation=activation).fit(X[:-1])
    weighted = AnnealedRBFKMeans(2, activation=activation).fit(X, sample_weight=w)
    assert removed.certified_ is True and removed.converged_ is True
    assert_allclose(weighted.cluster_centers_, removed.cluster_centers_, rtol=1e-12)
    assert weighted.certified_ is True and weighted.converged_ is True
    assert_allclose(weighted.sigma_path_, removed.sigma_path_, rtol=1e-12)
    assert_allclose(weighted.predict_proba(X), removed.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
@pytest.mark.parametrize("factor", [0.05, 0.5], ids=["sigma0.05", "sigma0.5"])
def test_float_sigma_end_is_em_fixed_point(factor, activation, global_random_seed):
    # Check that a float sigma_end ends there exactly (sigma_ and the last
    # width), that the centres are an EM fixed point at that width (one more
    # RBFKMeans step with the final map moves them by at most the stage
    # tolerance: the final EM stops once the summed squared shift is below
    # (30 tol)^2 T, T = 2 sigma^2, and EM steps shrink near a stable fixed
    # point), and that predict_proba is that map at sigma_end (oracle).
    X, _ = separated_blobs(global_random_seed, 200)
    sigma_end = factor * X.std()
    km = AnnealedRBFKMeans(4, sigma_end=sigma_end, activation=activation).fit(X)
    assert km.sigma_ == sigma_end
    assert km.sigma_path_[-1] == sigma_end
    final_act = km.activation_path_[-1]
    if activation != "auto":
        assert final_act == activation
    step = RBFKMeans(4, init=km.cluster_centers_, sigma=sigma_end, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        step.set_params(activation=final_act).fit(X)
    moved = np.linalg.norm(step.cluster_centers_ - km.cluster_centers_)
    T = 2.0 * sigma_end**2
    assert moved <= 30 * km.tol * np.sqrt(T)
    expected = responsibilities(X, km.cluster_centers_, sigma_end, final_act)
    assert_allclose(km.predict_proba(X), expected, rtol=0, atol=1e-10)


def _one_per_blob(X, y):
    return X[[np.flatnonzero(y == j)[0] for j in range(4)]].copy()


def _mass_constrained_em(X, centers, sigma, n_iter=500):
    """EM with responsibilities ``r_ij ~ p_j exp(-d_ij / T)``, ``p_j = N_j / n``.

    The stage iteration of ``skrbfkmeans._anneal`` (module docstring), written
    from the formulas with scipy's softmax; starts from uniform priors.
    """
    T = 2.0 * sigma**2
    p = np.full(centers.shape[0], 1.0 / centers.shape[0])
    for _ in range(n_iter):
        R = softmax(np.log(p) - sq_distances(X, centers) / T, axis=1)
        N = R.sum(axis=0)
        centers, p = (R.T @ X) / N[:, None], N / N.sum()
    return centers


@pytest.mark.parametrize("kind", ["array", "callable"])
def test_array_init_is_kmeans_from_there(kind, global_random_seed):
    # Check that an init array (or callable) with sigma_start="auto" runs
    # KMeans from those centres (no annealing): without the polish, the
    # labels, centres and n_iter_ of KMeans(init=..., n_init=1), a path of
    # one entry, and a certified result.
    X, y = separated_blobs(global_random_seed, 200)
    init = _one_per_blob(X, y)
    arg = init if kind == "array" else (lambda X, k, random_state: init)
    km = AnnealedRBFKMeans(4, init=arg, polish=False, max_iter=300).fit(X)
    ref = KMeans(4, init=init, n_init=1).fit(X)
    assert_array_equal(km.labels_, ref.labels_)
    # Distances and sums are computed in a different order: rounding.
    atol = 1e-13 * np.abs(X).max()
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=0, atol=atol)
    assert km.n_iter_ == ref.n_iter_
    assert km.sigma_path_.shape == (1,) and km.critical_sigmas_.shape == (0,)
    assert km.certified_ is True


def test_array_init_is_polished(global_random_seed):
    # Check that the polish improves KMeans's local optimum from a poor init
    # (two centres splitting one blob, one between two others): lower inertia
    # than KMeans from the same init, the blobs recovered, still certified.
    X, y = separated_blobs(global_random_seed, 200)
    blob = _one_per_blob(X, y)
    init = np.array([blob[0] - [0.5, 0], blob[0] + [0.5, 0], blob[2], blob[1]])
    init[3] = 0.5 * (blob[1] + blob[3])
    ref = KMeans(4, init=init, n_init=1).fit(X)
    km = AnnealedRBFKMeans(4, init=init).fit(X)
    assert km.inertia_ < 0.9 * ref.inertia_
    assert km.n_polish_moves_ >= 1
    assert adjusted_rand_score(y, km.labels_) == 1.0
    assert km.certified_ is True


@pytest.mark.parametrize("kind", ["array", "callable"])
def test_explicit_sigma_start_anneals_from_init(kind, global_random_seed):
    # Check that an init array (or callable) with an explicit sigma_start
    # starts the schedule from those centres at that width: all k centres
    # are distinct at the first stage, and the first stage's centres are the
    # fixed point of the mass-constrained EM started from the array at that
    # width, far from the data mean.
    X, y = separated_blobs(global_random_seed, 200)
    init = _one_per_blob(X, y)
    arg = init if kind == "array" else (lambda X, k, random_state: init)
    d = np.sqrt(sq_distances(init, init))
    np.fill_diagonal(d, np.inf)
    sigma0 = 0.25 * np.median(d.min(axis=1))
    km = AnnealedRBFKMeans(4, init=arg, sigma_start=sigma0).fit(X)
    assert km.sigma_path_[0] == pytest.approx(sigma0, rel=1e-12)
    assert km.n_distinct_centers_path_[0] == 4
    fixed = _mass_constrained_em(X, init, sigma0)
    # A stage stops once no centre moves more than 30 tol sqrt(T).
    tol = 30 * km.tol * np.sqrt(2.0 * sigma0**2)
    assert_allclose(km.centers_path_[0], fixed, rtol=0, atol=tol)
    assert np.linalg.norm(km.centers_path_[0] - X.mean(axis=0), axis=1).min() > 2.0
    assert km.certified_ is True
    # The initial centres are separated from the start: at sigma_start.
    assert km.split_linkage_[:, 2].max() == pytest.approx(sigma0, rel=1e-12)


def test_array_init_with_float_sigma_end_is_em_there(global_random_seed):
    # Check that an init array with sigma_start="auto" and a float sigma_end
    # runs the EM at sigma_end from the array: one stage, at sigma_end.
    X, y = separated_blobs(global_random_seed, 200)
    sigma_end = 0.3 * X.std()
    km = AnnealedRBFKMeans(4, init=_one_per_blob(X, y), sigma_end=sigma_end).fit(X)
    assert_array_equal(km.sigma_path_, [sigma_end])
    assert km.sigma_ == sigma_end


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_kmeans_init_draws_as_kmeans(init, global_random_seed):
    # Check that a KMeans init string starts the schedule from the centres
    # that KMeans draws with the same random_state (k-means++:
    # sklearn.cluster.kmeans_plusplus; "random": rows chosen by
    # RandomState.choice(n, k, replace=False, p=w / W), as in
    # sklearn/cluster/_kmeans.py), i.e. it equals the fit from that array.
    X, _ = separated_blobs(global_random_seed, 200)
    rs = np.random.RandomState(global_random_seed)
    if init == "k-means++":
        centers, _ = kmeans_plusplus(X, 4, random_state=rs)
    else:
        p = np.full(X.shape[0], 1.0 / X.shape[0])
        centers = X[rs.choice(X.shape[0], size=4, replace=False, p=p)]
    km = AnnealedRBFKMeans(4, init=init, random_state=global_random_seed).fit(X)
    ref = AnnealedRBFKMeans(4, init=centers).fit(X)
    for name, value in _fitted_arrays(ref).items():
        assert_array_equal(getattr(km, name), value, err_msg=name)
    assert km.n_distinct_centers_path_[0] >= 2


def test_n_init_keeps_lowest_inertia_and_warns_for_anneal():
    # Check that n_init random starts keep the lowest inertia (never worse
    # than the first start, drawn from the same seed), and that n_init > 1
    # with the deterministic init="anneal" warns and runs once.
    X, _ = make_blobs(150, centers=6, cluster_std=2.0, random_state=3)
    one = AnnealedRBFKMeans(6, init="random", n_init=1, random_state=0).fit(X)
    three = AnnealedRBFKMeans(6, init="random", n_init=3, random_state=0).fit(X)
    assert three.inertia_ <= one.inertia_ * (1 + 1e-12)
    with pytest.warns(RuntimeWarning, match="deterministic"):
        many = AnnealedRBFKMeans(6, n_init=3).fit(X)
    assert_array_equal(
        many.cluster_centers_, AnnealedRBFKMeans(6).fit(X).cluster_centers_
    )


@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_float32_gives_float32_close_to_float64(activation, global_random_seed):
    # Check that float32 input gives float32 centres, paths and outputs,
    # close to the float64 fit of the same data.
    X, _ = separated_blobs(global_random_seed, 200)
    km64 = AnnealedRBFKMeans(4, activation=activation).fit(X)
    X32 = X.astype(np.float32)
    km32 = AnnealedRBFKMeans(4, activation=activation).fit(X32)
    assert km32.cluster_centers_.dtype == np.float32
    assert km32.centers_path_.dtype == np.float32
    for method in ("predict_proba", "transform"):
        assert getattr(km32, method)(X32).dtype == np.float32
    scale = np.abs(X).max()
    assert_allclose(km32.cluster_centers_, km64.cluster_centers_, atol=1e-5 * scale)
    assert_array_equal(km32.labels_, km64.labels_)
    assert_allclose(km32.inertia_, km64.inertia_, rtol=1e-5)


@pytest.mark.parametrize(
    "sigma_start, sigma_end", [(0.5, 0.5), (0.1, 2.0)], ids=["equal", "below"]
)
def test_sigma_start_not_above_sigma_end_raises(sigma_start, sigma_end):
    # Check that sigma_start <= sigma_end raises a ValueError naming both.
    X, _ = make_blobs(30, centers=2, random_state=0)
    km = AnnealedRBFKMeans(2, sigma_start=sigma_start, sigma_end=sigma_end)
    with pytest.raises(ValueError, match=r"sigma_start=.*sigma_end="):
        km.fit(X)


def test_sigma_end_above_the_automatic_start_names_where_it_comes_from():
    # Check that a sigma_end above the first critical width, with
    # sigma_start="auto", says that the start was resolved from X and gives
    # the width (just above the critical one: sigma^2 above the largest
    # variance of X along a direction, computed here with numpy), instead of
    # blaming a sigma_start the user never gave.
    X, _ = make_blobs(60, centers=2, random_state=0)
    top = np.sqrt(np.linalg.eigvalsh(np.cov(X.T, bias=True))[-1])
    km = AnnealedRBFKMeans(2, sigma_end=10 * top)
    with pytest.raises(ValueError, match=r'sigma_end=.*"auto".*critical width') as e:
        km.fit(X)
    start = float(re.search(r'"auto" set to ([0-9.e+-]+),', str(e.value))[1])
    assert top < start < 2 * top


_INVALID = [("cooling", v) for v in (0, 1, -0.5, 1.5)] + [
    ("activation", "sparsemax"),
    ("activation", "Softmax"),
    ("sigma_end", 0.0),
    ("sigma_start", -1.0),
    ("init", "anneals"),
]


@pytest.mark.parametrize("name, value", _INVALID, ids=[f"{k}={v}" for k, v in _INVALID])
def test_invalid_parameters_raise(name, value):
    # Check that out-of-range parameters raise InvalidParameterError (a
    # ValueError) naming the parameter.
    X, _ = make_blobs(30, centers=2, random_state=0)
    with pytest.raises(InvalidParameterError, match=name):
        AnnealedRBFKMeans(2, **{name: value}).fit(X)
    assert issubclass(InvalidParameterError, ValueError)


@pytest.mark.parametrize("sigma_end", ["auto", 0.1], ids=["auto", "float"])
@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_constant_data_warns_and_stays_finite(activation, sigma_end):
    # Check that constant data gives every centre at the point, zero inertia
    # and the KMeans-style ConvergenceWarning, with finite outputs.
    X = np.full((20, 3), 2.5)
    km = AnnealedRBFKMeans(3, activation=activation, sigma_end=sigma_end)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km.fit(X)
    assert_allclose(km.cluster_centers_, 2.5, rtol=1e-15)
    assert km.inertia_ == pytest.approx(0.0, abs=1e-24)
    for value in (km.predict_proba(X), km.transform(X), km.objective_path_):
        assert np.isfinite(value).all()
    assert np.isfinite(km.sigma_) and km.sigma_ > 0


@pytest.mark.parametrize("sigma_end", ["auto", 0.1], ids=["auto", "float"])
@pytest.mark.parametrize("activation", ANNEALED_ACTIVATIONS)
def test_fewer_distinct_points_than_clusters(activation, sigma_end):
    # Check that 3 distinct points (each repeated) with k=5 give the
    # KMeans-style ConvergenceWarning and a finite result in which every
    # point is a centre (inertia 0). The final phase (Lloyd, or EM at
    # sigma_end) converges at once here, so converged_ is True (docstring:
    # it describes the final phase only).
    points = np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0]])
    X = np.repeat(points, 10, axis=0)
    km = AnnealedRBFKMeans(5, activation=activation, sigma_end=sigma_end)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km.fit(X)
    assert np.isfinite(km.cluster_centers_).all()
    assert np.isfinite(km.predict_proba(X)).all()
    assert np.unique(km.labels_).size == 3
    assert sq_distances(points, km.cluster_centers_).min(axis=1).max() < 1e-20
    # Each distance is rounded at _d_rounding by the expansion, clipped at 0.
    n_rounding = X.shape[0] * _d_rounding(X, km.cluster_centers_)
    assert km.inertia_ == pytest.approx(0.0, abs=n_rounding)
    assert km.converged_ is True


def test_verbose_prints_stages(capsys):
    # Check that verbose=1 prints "Stage" lines with the widths of
    # sigma_path_ in order (one per stage; the final Lloyd entry of
    # sigma_path_ may have none), and nothing when verbose=0.
    X, _ = make_blobs(100, centers=3, random_state=0)
    km = AnnealedRBFKMeans(3, verbose=1).fit(X)
    lines = [s for s in capsys.readouterr().out.splitlines() if s.startswith("Stage")]
    assert len(lines) >= len(km.sigma_path_) - 1
    for line, sigma in zip(lines, km.sigma_path_):
        assert f"sigma {sigma:.4g}," in line
    AnnealedRBFKMeans(3).fit(X)
    assert capsys.readouterr().out == ""


def test_dropped_group_copies_join_the_nearest_group():
    # Check the copy bookkeeping of drop_light: the copies of a light group
    # go to its nearest group, also when that group comes after it.
    from skrbfkmeans._schedule import Groups

    centers = np.array([[0.0], [990.0], [20.0], [1000.0]])
    groups = Groups(centers.copy(), np.array([5.0, 0.1, 5.0, 5.0]), np.arange(4))
    groups.drop_light(1.0)
    assert_array_equal(groups.centers, [[0.0], [20.0], [1000.0]])
    # Copy 1 (of the group at 990) now belongs to the group at 1000.
    assert_array_equal(groups.expanded().ravel(), [0.0, 1000.0, 20.0, 1000.0])


def test_n_iter_counts_the_final_lloyd_run():
    # Check n_iter_'s KMeans meaning: the Lloyd iterations from the annealed
    # centres (the path's last stage) to the final ones, at most max_iter;
    # n_iter_total_ counts every stage too.
    from skrbfkmeans._engine.passes import data_offset
    from skrbfkmeans._iterations import em_fixed_sigma
    from skrbfkmeans._rows import MemoryRows

    X, _ = make_blobs(300, centers=5, cluster_std=1.5, random_state=0)
    km = AnnealedRBFKMeans(5, polish=False).fit(X)
    w = np.ones(X.shape[0])
    rows = MemoryRows(X, w, data_offset(X, w))
    # The engine's plain Lloyd: EM with entmax-1.5 at width 0.
    centers, n_iter, converged = em_fixed_sigma(
        rows, km.centers_path_[-2], 0.0, "entmax15", max_iter=km.max_iter, tol=0.0
    )
    assert_allclose(km.cluster_centers_, centers, rtol=1e-12)
    # The final run sums the clusters in another order than the stages did:
    # the first M-step may move a centre by an ulp, which costs the run one
    # more (confirming) iteration than plain Lloyd needs.
    assert n_iter <= km.n_iter_ <= min(n_iter + 1, km.max_iter)
    assert km.n_iter_total_ > km.n_iter_ + len(km.sigma_path_) - 2


def test_split_tree_with_a_numeric_sigma_end():
    # Check that a fit stopped at a numeric sigma_end keeps the split widths
    # of its annealing (they were all 0): each join of split_linkage_ at a
    # critical width the fit recorded, above sigma_end, and the tree that of
    # the same schedule run to a hard end.
    X = make_blobs(120, centers=4, cluster_std=0.6, random_state=0)[0]
    stopped = AnnealedRBFKMeans(3, sigma_end=0.5).fit(X)
    hard = AnnealedRBFKMeans(3).fit(X)
    heights = stopped.split_linkage_[:, 2]
    assert np.all(heights > 0.5)
    assert np.all(np.isin(heights, stopped.critical_sigmas_))
    assert_array_equal(stopped.split_linkage_, hard.split_linkage_)
