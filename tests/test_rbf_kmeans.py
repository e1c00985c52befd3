"""Tests of the RBFKMeans estimator: fitted attributes, outputs and the maths.

Fitted attributes against independent NumPy oracles (``_rbf_oracle.py``), the
responsibilities, the exact-hardness certificate, the limits sigma -> 0
(Lloyd) and sigma -> inf (weighted mean), EM monotonicity, sample weights,
float32 and n_init. Sparse input and extreme widths live in
``test_rbf_kmeans_input.py``; what both estimators share (transform and the
fit shortcuts, every sparse format, bad input, scikit-learn composition) in
``test_estimators.py``.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _data import ACTIVATIONS, DTYPE_IDS, DTYPES, RTOL, blobs, csr_if, separated_blobs
from _rbf_oracle import (
    distortion,
    free_energy,
    lloyd_fixed_point,
    lloyd_step,
    m_step,
    margins,
    responsibilities,
    sq_distances,
    tsallis15_max,
)
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import RBFKMeans, rbf_kmeans_loss

_IGNORE_CONVERGENCE = pytest.mark.filterwarnings(
    "ignore::sklearn.exceptions.ConvergenceWarning"
)


def _init_rows(X, n_clusters, seed):
    """``n_clusters`` distinct rows of ``X``: no cell is empty at the start."""
    rng = np.random.RandomState(seed)
    return X[rng.choice(X.shape[0], n_clusters, replace=False)].copy()


def _d_rounding(X, centers):
    """Bound on the rounding of a squared distance as the package computes it.

    ``||x||^2 - 2 x.mu + ||mu||^2`` on rows centred at the mean is rounded at
    a few eps times ``||x - mean||^2 + ||mu - mean||^2``.
    """
    Xd = X.toarray() if sp.issparse(X) else X
    eps = np.finfo(Xd.dtype).eps
    X64, C64 = Xd.astype(np.float64), centers.astype(np.float64)
    mean = 0.0 if sp.issparse(X) else X64.mean(axis=0)
    sq = ((X64 - mean) ** 2).sum(axis=1).max() + ((C64 - mean) ** 2).sum(axis=1).max()
    return 64 * eps * sq


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fitted_attributes(activation, dtype, sparse, weighted, global_random_seed):
    # Check the fitted attributes against independent NumPy computations:
    # labels_ (int32, = predict), inertia_ (= -score, the hard distortion),
    # objective_ (the free energy of the Notes, within its bounds), and the
    # bookkeeping attributes.
    X = blobs(global_random_seed, n_samples=120, n_features=3, centers=4)
    X = csr_if(X.astype(dtype), sparse)
    rng = np.random.RandomState(global_random_seed)
    w = rng.uniform(0.5, 2.0, X.shape[0]).astype(dtype) if weighted else None
    n_clusters = 4
    km = RBFKMeans(n_clusters, activation=activation, random_state=global_random_seed)
    km.fit(X, sample_weight=w)

    centers = km.cluster_centers_
    assert centers.shape == (n_clusters, 3)
    assert centers.dtype == dtype
    assert km.labels_.dtype == np.int32
    assert_array_equal(km.labels_, km.predict(X))
    # Each label is a nearest centre (up to the rounding of a near tie).
    d = sq_distances(X, centers)
    chosen = d[np.arange(d.shape[0]), km.labels_]
    assert_allclose(chosen, d.min(axis=1), rtol=0, atol=_d_rounding(X, centers))

    W = X.shape[0] if w is None else float(w.astype(np.float64).sum())
    inertia = distortion(X, centers, w)
    assert_allclose(km.inertia_, inertia, rtol=RTOL[dtype])
    assert -km.score(X, sample_weight=w) == pytest.approx(km.inertia_, rel=1e-12)
    assert_allclose(-km.score(X), distortion(X, centers), rtol=RTOL[dtype])

    sigma = km.sigma_
    assert isinstance(sigma, float) and 0 < sigma < np.inf
    T = 2.0 * sigma**2
    expected = free_energy(X, centers, sigma, activation, w)
    assert_allclose(km.objective_, expected, rtol=RTOL[dtype])
    # Bounds (derived in test_loss.py): J <= F <= J + T W H with H = log k for
    # softmax and H = H_1.5(uniform) = (4/3)(1 - k^-1/2) for entmax-1.5.
    h = np.log(n_clusters) if activation == "softmax" else tsallis15_max(n_clusters)
    slack = RTOL[dtype] * km.objective_
    assert km.inertia_ - slack <= km.objective_ <= km.inertia_ + T * W * h + slack

    assert isinstance(km.n_iter_, int | np.integer) and 1 <= km.n_iter_ <= 300
    assert km.converged_ is True or km.converged_ is np.True_
    assert km.n_features_in_ == 3
    assert not hasattr(km, "feature_names_in_")
    assert_array_equal(
        km.get_feature_names_out(), [f"rbfkmeans{j}" for j in range(n_clusters)]
    )


def test_feature_names_in():
    # Check that a DataFrame's column names are recorded (pandas optional).
    pd = pytest.importorskip("pandas")
    X = blobs(0, n_samples=120, n_features=3, centers=4)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    km = RBFKMeans(3, random_state=0).fit(df)
    assert_array_equal(km.feature_names_in_, ["a", "b", "c"])
    assert_array_equal(
        km.get_feature_names_out(), ["rbfkmeans0", "rbfkmeans1", "rbfkmeans2"]
    )


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_predict_proba_is_the_responsibility_map(
    activation, dtype, sparse, global_random_seed
):
    # Check that predict_proba rows lie on the simplex, keep the dtype and
    # equal an independent softmax / sort-based entmax-1.5 of -d / (2 sigma^2)
    # at the fitted centres, on training and on new data.
    X = blobs(global_random_seed, n_samples=150, n_features=3, centers=4)
    X_new = blobs(global_random_seed + 1, n_samples=40, n_features=3, centers=4)
    X = csr_if(X.astype(dtype), sparse)
    X_new = csr_if(X_new.astype(dtype), sparse)
    km = RBFKMeans(4, activation=activation, random_state=global_random_seed).fit(X)
    eps = np.finfo(dtype).eps
    for data in (X, X_new):
        P = km.predict_proba(data)
        assert P.shape == (data.shape[0], 4)
        assert P.dtype == dtype
        assert np.isfinite(P).all() and (P >= 0).all()
        assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=8 * 4 * eps)
        expected = responsibilities(data, km.cluster_centers_, km.sigma_, activation)
        # Scores are rounded at eps * (||x||^2 + ||mu||^2) / T ~ 1e3 eps here.
        assert_allclose(P, expected, rtol=0, atol=1e4 * eps)
    if activation == "entmax15":
        assert (km.predict_proba(X) == 0).any()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_entmax_one_hot_exactly_when_margin_exceeds_4_sigma2(dtype, global_random_seed):
    # Check that an entmax-1.5 row is exactly one-hot iff the sample's margin
    # d_(2) - d_(1) is >= 4 sigma_^2 (doc/theory.rst: a score gap >= 2),
    # for rows away from the threshold by more than the rounding of d.
    X = blobs(global_random_seed, n_samples=200, n_features=3, centers=4)
    X = X.astype(dtype)
    km = RBFKMeans(4, activation="entmax15", random_state=0).fit(X)
    # New points along the segments between centres: margins from 0 (the
    # bisector) to the full spacing (at a centre), on both sides of 4 sigma^2.
    rng = np.random.RandomState(global_random_seed)
    C = km.cluster_centers_.astype(np.float64)
    a, b = rng.randint(0, 4, (2, 400))
    t = rng.uniform(0, 1, (400, 1))
    X_new = (t * C[a] + (1 - t) * C[b] + rng.normal(0, 0.3, (400, 3))).astype(dtype)
    for data in (X, X_new):
        P = km.predict_proba(data)
        margin = margins(data, C)
        threshold = 4.0 * km.sigma_**2
        one_hot = ((P == 1.0).sum(axis=1) == 1) & ((P == 0.0).sum(axis=1) == 3)
        clear = np.abs(margin - threshold) > _d_rounding(data, C)
        assert_array_equal(one_hot[clear], margin[clear] >= threshold)
        assert_array_equal(P[one_hot].argmax(axis=1), km.predict(data)[one_hot])
    assert (margin[clear] >= threshold).sum() > 20
    assert (margin[clear] < threshold).sum() > 20


def test_exact_hardness_certificate(global_random_seed):
    # Check the certificate (doc/theory.rst): at a K-Means fixed point,
    # entmax-1.5 EM at sigma <= sqrt(min margin / 4) stays exactly on it with
    # one-hot predict_proba; a bit above that width some row is soft.
    X = blobs(global_random_seed, n_samples=300, n_features=2, centers=5)
    km = KMeans(5, init="random", n_init=1, tol=0, random_state=global_random_seed)
    centers, labels = lloyd_fixed_point(X, km.fit(X).cluster_centers_)
    sigma_max = np.sqrt(margins(X, centers).min() / 4.0)
    scale = np.abs(X).max()

    rbf = RBFKMeans(5, activation="entmax15", sigma=0.9 * sigma_max, init=centers)
    rbf.fit(X)
    assert_allclose(rbf.cluster_centers_, centers, rtol=1e-12, atol=1e-13 * scale)
    assert rbf.converged_ and rbf.n_iter_ <= 2
    assert_array_equal(rbf.labels_, labels)
    assert_array_equal(rbf.predict_proba(X), np.eye(5)[labels])
    # One-hot rows: F_i = d_i(1) + T H_max, so objective_ = J + T W H_max.
    T = 2.0 * rbf.sigma_**2
    expected = rbf.inertia_ + T * X.shape[0] * tsallis15_max(5)
    assert_allclose(rbf.objective_, expected, rtol=1e-12)

    rbf_soft = clone(rbf).set_params(sigma=1.1 * sigma_max).fit(X)
    P = rbf_soft.predict_proba(X)
    assert (P.max(axis=1) < 1.0).any()


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
@_IGNORE_CONVERGENCE
def test_small_sigma_em_step_is_lloyd_step(activation, weighted, global_random_seed):
    # Check that one EM step at sigma = 1e-6 x the data scale is one Lloyd
    # step from the same centres: responsibilities are one-hot to working
    # precision (softmax's off-nearest terms are exp(-margin / T) = 0).
    X = blobs(
        global_random_seed, n_samples=120, n_features=3, centers=4, cluster_std=2.0
    )
    w = np.random.RandomState(1).randint(1, 4, X.shape[0]) if weighted else None
    C = _init_rows(X, 4, global_random_seed)
    scale = X.std()
    km = RBFKMeans(4, sigma=1e-6 * scale, activation=activation, init=C, max_iter=1)
    km.fit(X, sample_weight=w)
    expected = lloyd_step(X, C, w)
    assert_allclose(km.cluster_centers_, expected, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_large_sigma_centres_at_weighted_mean(activation, global_random_seed):
    # Check that at sigma = 1e6 x the data scale every centre lands on the
    # weighted data mean: responsibilities are uniform up to O(d / T) = 1e-12.
    X = blobs(global_random_seed, n_samples=120, n_features=3, centers=4)
    w = np.random.RandomState(2).uniform(0.1, 5.0, X.shape[0])
    scale = X.std()
    C = _init_rows(X, 4, global_random_seed)
    km = RBFKMeans(4, sigma=1e6 * scale, activation=activation, init=C)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        km.fit(X, sample_weight=w)
    mean = np.average(X, axis=0, weights=w)
    assert_allclose(
        km.cluster_centers_, np.tile(mean, (4, 1)), rtol=1e-9, atol=1e-9 * scale
    )
    assert km.converged_


@pytest.mark.parametrize("activation", ACTIVATIONS)
@_IGNORE_CONVERGENCE
def test_em_decreases_the_objective(activation, global_random_seed):
    # Check that EM never increases the objective: each E-step minimises it
    # over the responsibilities and each M-step over the centres, so running
    # more iterations from the same init gives a non-increasing objective_.
    X = blobs(
        global_random_seed, n_samples=150, n_features=3, centers=4, cluster_std=2.5
    )
    w = np.random.RandomState(3).uniform(0.5, 2.0, X.shape[0])
    C = _init_rows(X, 5, global_random_seed)
    sigma = 0.5 * X.std()
    objectives = [
        rbf_kmeans_loss(X, C, sigma=sigma, activation=activation, sample_weight=w)
    ]
    for max_iter in (1, 2, 3, 5, 8, 13, 21):
        km = RBFKMeans(5, sigma=sigma, activation=activation, init=C, tol=0)
        km.set_params(max_iter=max_iter).fit(X, sample_weight=w)
        objectives.append(km.objective_)
    objectives = np.array(objectives)
    assert (np.diff(objectives) <= 1e-12 * objectives[:-1]).all(), objectives
    assert objectives[-1] < objectives[0]


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@_IGNORE_CONVERGENCE
def test_integer_weights_equal_repeated_rows(activation, sparse, global_random_seed):
    # Check that sample_weight enters the statistics exactly: integer weights
    # give the fit of the repeated rows, zero weight that of the removed row
    # (fixed array init so that no random draw differs; tol=0 so that both
    # fits run the same iterations).
    X = blobs(
        global_random_seed, n_samples=120, n_features=3, centers=4, cluster_std=2.0
    )
    rng = np.random.RandomState(global_random_seed)
    w = rng.randint(0, 4, X.shape[0])
    w[:4] = 1  # the init rows stay in the data
    C = X[:4].copy()
    params = dict(activation=activation, init=C, tol=0, max_iter=30)
    weighted = RBFKMeans(4, **params).fit(csr_if(X, sparse), sample_weight=w)
    repeated = RBFKMeans(4, **params).fit(csr_if(np.repeat(X, w, axis=0), sparse))
    assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)
    assert weighted.sigma_ == repeated.sigma_
    assert_allclose(weighted.inertia_, repeated.inertia_, rtol=1e-10)
    assert_allclose(weighted.objective_, repeated.objective_, rtol=1e-10)
    kept = w > 0
    removed = RBFKMeans(4, **params).fit(csr_if(X[kept], sparse), sample_weight=w[kept])
    assert_allclose(weighted.cluster_centers_, removed.cluster_centers_, rtol=1e-10)
    assert_allclose(weighted.objective_, removed.objective_, rtol=1e-10)


def test_weights_equal_repeated_rows_at_default_tol():
    # Check that integer weights give the fit of the repeated rows with the
    # default tol too: the stopping threshold (tol x mean feature variance)
    # must be that of the data the weights describe. A data set where the
    # unweighted variance of X and the variance of the repeated rows put
    # the threshold on either side of an iteration's centre shift.
    X = blobs(21, n_samples=150, n_features=3, centers=4, cluster_std=2.0)
    rng = np.random.RandomState(21)
    w = rng.randint(0, 4, X.shape[0])
    C = X[rng.choice(X.shape[0], 4, replace=False)]
    weighted = RBFKMeans(4, init=C).fit(X, sample_weight=w)
    repeated = RBFKMeans(4, init=C).fit(np.repeat(X, w, axis=0))
    assert weighted.n_iter_ == repeated.n_iter_
    assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)


@pytest.mark.parametrize("shift", [1e2, 1e4], ids=["shift1e2", "shift1e4"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_translation_invariance(activation, shift, global_random_seed):
    # Check that translating the data translates the fit, with the default
    # k-means++ init and the same random_state: every step (the k-means++
    # draws included) depends on distances only. Distances at an offset s
    # are rounded at eps * s^2, hence the tolerance.
    X = blobs(global_random_seed, n_samples=120, n_features=3, centers=4)
    ref = RBFKMeans(4, activation=activation, random_state=0).fit(X)
    moved = RBFKMeans(4, activation=activation, random_state=0).fit(X + shift)
    assert_allclose(
        moved.cluster_centers_ - shift, ref.cluster_centers_, rtol=0, atol=1e-10 * shift
    )
    assert_array_equal(moved.labels_, ref.labels_)
    assert moved.sigma_ == pytest.approx(ref.sigma_, rel=1e-8)
    assert_allclose(moved.inertia_, ref.inertia_, rtol=1e-8)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_float32_close_to_float64(activation, global_random_seed):
    # Check that float32 input gives float32 centres and outputs, close to
    # the float64 fit from the same init.
    X = blobs(
        global_random_seed, n_samples=120, n_features=3, centers=4, cluster_std=1.5
    )
    C = _init_rows(X, 4, global_random_seed)
    X32, C32 = X.astype(np.float32), C.astype(np.float32)
    params = dict(activation=activation, sigma=0.8, tol=1e-8)
    km64 = RBFKMeans(4, init=C, **params).fit(X)
    km32 = RBFKMeans(4, init=C32, **params).fit(X32)
    assert km32.cluster_centers_.dtype == np.float32
    for method in ("predict_proba", "transform"):
        out32 = getattr(km32, method)(X32)
        assert out32.dtype == np.float32
        assert_allclose(out32, getattr(km64, method)(X), rtol=1e-4, atol=1e-5)
    scale = np.abs(X).max()
    assert_allclose(km32.cluster_centers_, km64.cluster_centers_, atol=1e-4 * scale)
    assert_allclose(km32.objective_, km64.objective_, rtol=1e-4)
    assert_allclose(km32.inertia_, km64.inertia_, rtol=1e-4)
    assert_array_equal(km32.labels_, km64.labels_)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_auto_sigma_keeps_standardized_blobs_apart(activation, global_random_seed):
    # Check that the default sigma="auto" recovers well-separated
    # standardized blobs, as scikit-learn's KMeans does.
    X, y = separated_blobs(global_random_seed, 600)
    X = StandardScaler().fit_transform(X)
    km = RBFKMeans(4, activation=activation, random_state=global_random_seed).fit(X)
    assert np.unique(km.labels_).size == 4
    assert adjusted_rand_score(y, km.labels_) > 0.99


def _seeds_of_first_run(est, X):
    # The initial centres of the first run: k-means++ from the estimator's
    # random_state, as KMeans draws them (sklearn.cluster.kmeans_plusplus).
    from sklearn.cluster import kmeans_plusplus

    rs = np.random.RandomState(est.random_state)
    return kmeans_plusplus(X, est.n_clusters, random_state=rs)[0]


@pytest.mark.parametrize("seed", range(5))
def test_auto_sigma_leaves_out_centres_of_a_few_far_rows(seed):
    # Check sigma="auto" against its definition computed here: a quarter of
    # the median distance from each initial centre to its nearest other one,
    # over the centres whose nearest rows weigh more than 1% of the mean per
    # centre (brute force). Three rows at 1000 times the spread of 1000 rows
    # in five blobs take most k-means++ seeds: the median over every seed
    # was their spacing (widths of 44-170) and the fit 4 to 30 times
    # KMeans's inertia.
    X, _ = make_blobs(1000, centers=5, random_state=seed)
    X = np.vstack([X, np.random.default_rng(seed).normal(size=(3, 2)) * 1000])
    est = RBFKMeans(5, random_state=seed).fit(X)
    C = _seeds_of_first_run(est, X)
    D = ((C[:, None] - C[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    spacing = np.sqrt(D.min(axis=1))
    mass = np.bincount(((X[:, None] - C[None]) ** 2).sum(-1).argmin(1), minlength=5)
    kept = mass > 0.01 * mass.sum() / 5
    assert 2 <= kept.sum() < 5
    assert est.sigma_ == pytest.approx(0.25 * np.median(spacing[kept]), rel=1e-9)
    assert est.sigma_ < 5.0
    km = KMeans(5, n_init=10, random_state=0).fit(X)
    assert est.inertia_ < 1.15 * km.inertia_


@pytest.mark.parametrize("seed", range(3))
def test_auto_sigma_without_far_rows_is_the_median_spacing(seed):
    # Check that on blobs without far rows every initial centre counts: a
    # quarter of the median spacing of the k-means++ seeds (brute force).
    X, _ = make_blobs(600, centers=6, random_state=seed)
    est = RBFKMeans(6, random_state=seed).fit(X)
    C = _seeds_of_first_run(est, X)
    D = ((C[:, None] - C[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    assert est.sigma_ == pytest.approx(0.25 * np.median(np.sqrt(D.min(1))), rel=1e-9)


@pytest.mark.parametrize("n_init", [1, 3], ids=["n_init1", "n_init3"])
def test_verbose_prints_one_line_per_iteration(n_init, capsys):
    # Check that verbose=1 prints one "Iteration" line per EM iteration.
    # With n_init runs, the runs are those of n_init single fits drawing from
    # one RandomState in turn (at a fixed sigma: "auto" is resolved from the
    # first initialisation).
    X = blobs(0, n_samples=120, n_features=3, centers=4)
    params = dict(init="random", sigma=1.0)
    km = RBFKMeans(4, n_init=n_init, verbose=1, random_state=0, **params)
    km.fit(X)
    lines = capsys.readouterr().out.splitlines()
    n_lines = sum(line.startswith("Iteration") for line in lines)
    rs = np.random.RandomState(0)
    single = RBFKMeans(4, n_init=1, random_state=rs, **params)
    n_iters = [single.fit(X).n_iter_ for _ in range(n_init)]
    assert n_lines == sum(n_iters)
    assert km.n_iter_ in n_iters


@pytest.mark.parametrize("activation", ACTIVATIONS)
@_IGNORE_CONVERGENCE
def test_n_init_keeps_lowest_objective(activation, global_random_seed):
    # Check that n_init=5 keeps the run with the lowest objective: it equals
    # the best of five n_init=1 fits drawing from the same RandomState
    # sequence, and is never above the first of them.
    X = blobs(
        global_random_seed, n_samples=150, n_features=3, centers=6, cluster_std=2.0
    )
    params = dict(init="random", activation=activation, sigma=1.0, max_iter=50)
    best = RBFKMeans(5, n_init=5, random_state=np.random.RandomState(7), **params)
    best.fit(X)
    rs = np.random.RandomState(7)
    singles = [
        RBFKMeans(5, n_init=1, random_state=rs, **params).fit(X) for _ in range(5)
    ]
    objectives = [s.objective_ for s in singles]
    assert best.objective_ == pytest.approx(min(objectives), rel=1e-12)
    i = int(np.argmin(objectives))
    assert_allclose(best.cluster_centers_, singles[i].cluster_centers_, rtol=1e-12)
    first = RBFKMeans(5, n_init=1, random_state=7, **params).fit(X)
    seeded = RBFKMeans(5, n_init=5, random_state=7, **params).fit(X)
    assert seeded.objective_ <= first.objective_


def test_array_init_with_n_init_runs_once(capsys):
    # Check that an explicit array init with n_init=3 warns (RuntimeWarning,
    # as KMeans) and runs a single initialisation.
    X = blobs(0, n_samples=120, n_features=3, centers=4)
    C = _init_rows(X, 4, 0)
    km = RBFKMeans(4, init=C, n_init=3, verbose=1)
    with pytest.warns(RuntimeWarning, match="performing only one init"):
        km.fit(X)
    out = capsys.readouterr().out
    assert out.count("Initialization complete") == 1
    ref = RBFKMeans(4, init=C, n_init=1).fit(X)
    assert_array_equal(km.cluster_centers_, ref.cluster_centers_)


def test_init_callable_receives_data_and_state():
    # Check that a callable init is called once per initialisation with the
    # data and n_clusters, and its centres are where EM starts.
    X = blobs(0, n_samples=120, n_features=3, centers=4)
    C = _init_rows(X, 4, 0)
    calls = []

    def init(X_, n_clusters, random_state):
        calls.append((X_.shape, n_clusters))
        return C

    km = RBFKMeans(4, init=init, n_init=1, max_iter=1, tol=0, sigma=1e-6)
    with pytest.warns(ConvergenceWarning):
        km.fit(X)
    assert calls == [(X.shape, 4)]
    assert_allclose(km.cluster_centers_, lloyd_step(X, C), rtol=1e-12)


def test_set_output_default():
    # Check that set_output is available and leaves NumPy output unchanged.
    X = blobs(0, n_samples=120, n_features=3, centers=4)
    km = RBFKMeans(3, random_state=0).set_output(transform="default").fit(X)
    assert isinstance(km.transform(X), np.ndarray)


def test_m_step_oracle_agrees_with_one_em_step():
    # Check that one EM step at a moderate width equals the M-step of the
    # oracle responsibilities (both activations, weights).
    X = blobs(5, n_samples=120, n_features=3, centers=4, cluster_std=2.0)
    w = np.random.RandomState(5).uniform(0.5, 2, X.shape[0])
    C = _init_rows(X, 4, 5)
    for activation in ACTIVATIONS:
        km = RBFKMeans(4, sigma=1.5, activation=activation, init=C, max_iter=1)
        with pytest.warns(ConvergenceWarning, match="max_iter"):
            km.fit(X, sample_weight=w)
        R = responsibilities(X, C, 1.5, activation)
        assert_allclose(km.cluster_centers_, m_step(X, R, w), rtol=1e-11)
