"""Tests of rbf_kmeans_loss: values, bounds, limits, gradients, validation.

The loss against the logsumexp / sort-based entmax oracles of
``_rbf_oracle.py``, its bounds around the K-Means distortion, the limit
sigma -> 0, the gradients against central finite differences, the paper's
learning-rate equivalence (a gradient step with ``eta_j = 1 / (2 N_j)`` is
one M-step), finite values at extreme widths and input validation.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import ACTIVATIONS, DTYPE_IDS, DTYPES, blobs
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
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError

from skrbfkmeans import RBFKMeans, rbf_kmeans_loss


def _problem(seed, n_samples=60, n_features=3, n_clusters=4, weighted=True):
    """Blobs, centres drawn from the rows plus noise, positive weights."""
    X = blobs(
        seed,
        n_samples=n_samples,
        n_features=n_features,
        centers=n_clusters,
        cluster_std=2.0,
    )
    rng = np.random.RandomState(seed)
    C = X[rng.choice(n_samples, n_clusters, replace=False)]
    C = C + rng.normal(0, 0.5, C.shape)
    w = rng.uniform(0.5, 2.0, n_samples) if weighted else None
    return X, C, w


def _sum_w(w, n_samples):
    return float(n_samples if w is None else np.sum(w))


def _h(activation, n_clusters):
    """Entropy gap of the upper bound: log k (softmax), H_1.5 max (entmax)."""
    if activation == "softmax":
        return np.log(n_clusters)
    return tsallis15_max(n_clusters)


@pytest.mark.parametrize("sigma_factor", [0.05, 0.3, 1.0, 5.0], ids=lambda f: f"s{f:g}")
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_matches_oracle(
    activation, dtype, weighted, sigma_factor, global_random_seed
):
    # Check that the loss equals the free energy of the Notes computed
    # independently: scipy's logsumexp (softmax) or the sort-based entmax-1.5
    # with its Tsallis entropy, in float64 from the same (rounded) inputs.
    X, C, w = _problem(global_random_seed, weighted=weighted)
    X, C = X.astype(dtype), C.astype(dtype)
    sigma = sigma_factor * float(X.std())
    loss = rbf_kmeans_loss(X, C, sigma=sigma, activation=activation, sample_weight=w)
    assert isinstance(loss, float)
    expected = free_energy(X, C, sigma, activation, w)
    assert_allclose(loss, expected, rtol=1e-5 if dtype == np.float32 else 1e-11)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_within_bounds(activation, global_random_seed):
    # Check J <= F <= J + T W H and F <= sum_i w_i mean_j d_ij at widths
    # from 1e-3 to 1e3 times the data scale (T = 2 sigma^2, J the distortion).
    # Derivation, per sample (d_1 the nearest squared distance):
    # softmax F_i = -T log(mean_j exp(-d_ij / T)); every term is at most
    # exp(-d_1 / T) and their sum at least that, so d_1 <= F_i <= d_1 + T log k;
    # Jensen (exp convex) gives F_i <= mean_j d_ij.
    # entmax F_i = min_r <r, d_i> + T (H_max - H(r)): <r, d_i> >= d_1 and
    # H <= H_max give F_i >= d_1; r one-hot at the nearest gives
    # F_i <= d_1 + T H_max, r uniform gives F_i <= mean_j d_ij.
    # H_max = (4/3)(1 - k^-1/2) <= log k (equal at k = 1, slopes
    # (2/3) k^-3/2 <= 1/k), so both satisfy the softmax bound.
    X, C, w = _problem(global_random_seed)
    n_samples, n_clusters = X.shape[0], C.shape[0]
    J = distortion(X, C, w)
    mean_d = float(w @ sq_distances(X, C).mean(axis=1))
    W = _sum_w(w, n_samples)
    for sigma in np.logspace(-3, 3, 13) * X.std():
        F = rbf_kmeans_loss(X, C, sigma=sigma, activation=activation, sample_weight=w)
        T = 2.0 * sigma**2
        slack = 1e-12 * F
        assert J - slack <= F <= J + T * W * _h(activation, n_clusters) + slack
        assert F <= J + T * W * np.log(n_clusters) + slack
        assert F <= mean_d + slack


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_tends_to_distortion(activation, global_random_seed):
    # Check that the loss tends to the K-Means distortion as sigma -> 0: the
    # gap is at most T W log k, and at sigma = 1e-8 x scale it is below the
    # rounding of J.
    X, C, w = _problem(global_random_seed)
    J = distortion(X, C, w)
    W = _sum_w(w, X.shape[0])
    scale = X.std()
    gaps = []
    for sigma in scale * np.logspace(0, -8, 9):
        F = rbf_kmeans_loss(X, C, sigma=sigma, activation=activation, sample_weight=w)
        assert F - J <= 2.0 * sigma**2 * W * np.log(C.shape[0]) + 1e-12 * J
        gaps.append(F - J)
    assert_allclose(F, J, rtol=1e-12)
    # The gap shrinks with the width (F is increasing in T, see the Notes:
    # dF/dT = sum_i w_i (H_max - H(r_i)) >= 0 by the envelope theorem).
    assert (np.diff(gaps) <= 1e-12 * J).all(), gaps


def _finite_differences(f, A, h):
    """Central differences of the scalar ``f`` at every entry of ``A``."""
    G = np.empty_like(A)
    for idx in np.ndindex(A.shape):
        plus, minus = A.copy(), A.copy()
        plus[idx] += h
        minus[idx] -= h
        G[idx] = (f(plus) - f(minus)) / (2 * h)
    return G


@pytest.mark.parametrize("wrt", ["centers", "X"])
@pytest.mark.parametrize("sigma_factor", [0.3, 1.0], ids=lambda f: f"s{f:g}")
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradient_matches_finite_differences(
    activation, sigma_factor, wrt, global_random_seed
):
    # Check grad_centers and grad_X against central finite differences
    # (float64, weighted). F is C^1 at every width (Danskin: the minimising
    # r is unique), and for entmax the stencil is checked to keep every
    # sample's support, so the differences see a smooth function.
    X, C, w = _problem(global_random_seed, n_samples=15, n_features=2, n_clusters=3)
    sigma = sigma_factor * float(X.std())
    loss, grad_c, grad_x = rbf_kmeans_loss(
        X, C, sigma=sigma, activation=activation, sample_weight=w, return_gradient=True
    )
    assert grad_c.shape == C.shape and grad_x.shape == X.shape
    h = 1e-6 * float(X.std())
    support = responsibilities(X, C, sigma, activation) > 0
    supports = []

    def f(A):
        Xa, Ca = (X, A) if wrt == "centers" else (A, C)
        supports.append(responsibilities(Xa, Ca, sigma, activation) > 0)
        return rbf_kmeans_loss(
            Xa, Ca, sigma=sigma, activation=activation, sample_weight=w
        )

    A, grad = (C, grad_c) if wrt == "centers" else (X, grad_x)
    fd = _finite_differences(f, A, h)
    for s in supports:
        assert_array_equal(s, support)
    # Truncation O(h^2) is negligible; each loss value is rounded at a few
    # eps * |loss|, which the division by 2h amplifies.
    atol = 64 * np.finfo(np.float64).eps * abs(loss) / h
    assert_allclose(grad, fd, rtol=1e-6, atol=atol)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradient_translation_identity(activation, global_random_seed):
    # Check that the loss is invariant under translating X and the centres
    # together, hence sum_i grad_X_i + sum_j grad_centers_j = 0 exactly.
    X, C, w = _problem(global_random_seed)
    kw = dict(sigma=1.5, activation=activation, sample_weight=w, return_gradient=True)
    loss, grad_c, grad_x = rbf_kmeans_loss(X, C, **kw)
    shift = np.array([100.0, -30.0, 7.0])
    loss_t, grad_c_t, grad_x_t = rbf_kmeans_loss(X + shift, C + shift, **kw)
    assert_allclose(loss_t, loss, rtol=1e-10)
    assert_allclose(grad_c_t, grad_c, rtol=1e-8, atol=1e-9 * np.abs(grad_c).max())
    assert_allclose(grad_x_t, grad_x, rtol=1e-8, atol=1e-9 * np.abs(grad_x).max())
    assert_allclose(
        grad_x.sum(axis=0), -grad_c.sum(axis=0), atol=1e-10 * np.abs(grad_x).sum()
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_sparse_equals_dense(activation, dtype, global_random_seed):
    # Check that sparse X gives the dense loss and gradients (grad_X dense).
    X, C, w = _problem(global_random_seed)
    X[np.abs(X) < 3.0] = 0.0
    X, C = X.astype(dtype), C.astype(dtype)
    kw = dict(sigma=2.0, activation=activation, sample_weight=w, return_gradient=True)
    dense = rbf_kmeans_loss(X, C, **kw)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    for container in (sp.csr_matrix, sp.csr_array, sp.csc_matrix, sp.coo_array):
        loss, grad_c, grad_x = rbf_kmeans_loss(container(X), C, **kw)
        assert isinstance(grad_x, np.ndarray) and not sp.issparse(grad_x)
        assert grad_c.dtype == dtype and grad_x.dtype == dtype
        assert_allclose(loss, dense[0], rtol=rtol)
        assert_allclose(grad_c, dense[1], rtol=rtol, atol=rtol * np.abs(dense[1]).max())
        assert_allclose(grad_x, dense[2], rtol=rtol, atol=rtol * np.abs(dense[2]).max())


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradient_step_with_per_cluster_rate_is_m_step(
    activation, weighted, global_random_seed
):
    # Check the paper's learning-rate equivalence: from C, the step
    # C_j - eta_j grad_j with eta_j = 1 / (2 N_j), N_j = sum_i w_i r_ij from
    # independent responsibilities, lands on the M-step sum_i w_i r_ij x_i / N_j,
    # which is one EM iteration of RBFKMeans from C.
    X, C, w = _problem(global_random_seed, weighted=weighted)
    sigma = 0.5 * float(X.std())
    _, grad_c, _ = rbf_kmeans_loss(
        X, C, sigma=sigma, activation=activation, sample_weight=w, return_gradient=True
    )
    R = responsibilities(X, C, sigma, activation)
    N = (np.ones(X.shape[0]) if w is None else w) @ R
    stepped = C - grad_c / (2.0 * N[:, None])
    scale = np.abs(X).max()
    assert_allclose(stepped, m_step(X, R, w), rtol=1e-10, atol=1e-12 * scale)
    em = RBFKMeans(C.shape[0], sigma=sigma, activation=activation, init=C, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        em.fit(X, sample_weight=w)
    assert_allclose(stepped, em.cluster_centers_, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_hard_gradient_step_is_lloyd_step(activation, global_random_seed):
    # Check that at sigma = 1e-6 x scale (hard responsibilities) the step with
    # eta_j = 1 / (2 N_j), N_j the weight of cell j, is one Lloyd step.
    X, C, w = _problem(global_random_seed)
    sigma = 1e-6 * float(X.std())
    _, grad_c, _ = rbf_kmeans_loss(
        X, C, sigma=sigma, activation=activation, sample_weight=w, return_gradient=True
    )
    labels = sq_distances(X, C).argmin(axis=1)
    N = np.bincount(labels, weights=w, minlength=C.shape[0])
    assert (N > 0).all()
    stepped = C - grad_c / (2.0 * N[:, None])
    assert_allclose(
        stepped, lloyd_step(X, C, w), rtol=1e-10, atol=1e-12 * np.abs(X).max()
    )


def test_entmax_loss_certifies_a_kmeans_fixed_point(global_random_seed):
    # Check the certificate through the loss: at a Lloyd fixed point with
    # sigma <= sqrt(min margin / 4) every entmax row is one-hot, so
    # F = J + T W H_max exactly and grad_centers = 2 (N_j mu_j - S_j) = 0;
    # a bit above that width some row is soft and F < J + T W H_max.
    X, C, _ = _problem(global_random_seed, n_samples=200, n_features=2)
    C, _ = lloyd_fixed_point(X, C)
    sigma_max = np.sqrt(margins(X, C).min() / 4.0)
    J, W, k = distortion(X, C), X.shape[0], C.shape[0]
    sigma = 0.9 * sigma_max
    F, grad_c, grad_x = rbf_kmeans_loss(
        X, C, sigma=sigma, activation="entmax15", return_gradient=True
    )
    assert_allclose(F, J + 2 * sigma**2 * W * tsallis15_max(k), rtol=1e-12)
    assert_allclose(grad_c, 0.0, atol=1e-10 * np.abs(X).max() * W)
    nearest = C[sq_distances(X, C).argmin(axis=1)]
    assert_allclose(grad_x, 2.0 * (X - nearest), rtol=1e-10, atol=1e-10)
    sigma = 1.1 * sigma_max
    F = rbf_kmeans_loss(X, C, sigma=sigma, activation="entmax15")
    assert F < J + 2 * sigma**2 * W * tsallis15_max(k)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_float32_close_to_float64(activation, global_random_seed):
    # Check that float32 input gives float32 gradients close to float64's.
    X, C, w = _problem(global_random_seed)
    kw = dict(sigma=1.5, activation=activation, sample_weight=w, return_gradient=True)
    l64, gc64, gx64 = rbf_kmeans_loss(X, C, **kw)
    l32, gc32, gx32 = rbf_kmeans_loss(X.astype(np.float32), C.astype(np.float32), **kw)
    assert gc32.dtype == np.float32 and gx32.dtype == np.float32
    assert_allclose(l32, l64, rtol=1e-5)
    assert_allclose(gc32, gc64, rtol=1e-4, atol=1e-4 * np.abs(gc64).max())
    assert_allclose(gx32, gx64, rtol=1e-4, atol=1e-4 * np.abs(gx64).max())


@pytest.mark.parametrize(
    "factor", [1e-300, 1e-100, 1e-10, 1e10, 1e100, 1e300], ids=lambda f: f"{f:g}"
)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_finite_at_extreme_widths(activation, dtype, factor):
    # Check that the loss and its gradients are finite, with no RuntimeWarning,
    # for sigma from 1e-300 to 1e300 times the data scale, and that the loss
    # stays between the distortion and the mean distance (its exact limits:
    # J as sigma -> 0, the mean distance as sigma -> inf).
    X, C, w = _problem(0)
    X, C = (X + 50.0).astype(dtype), (C + 50.0).astype(dtype)
    sigma = factor * float(X.std())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with np.errstate(all="raise"):
            loss, grad_c, grad_x = rbf_kmeans_loss(
                X,
                C,
                sigma=sigma,
                activation=activation,
                sample_weight=w,
                return_gradient=True,
            )
    assert np.isfinite(loss) and np.isfinite(grad_c).all() and np.isfinite(grad_x).all()
    J = distortion(X, C, w)
    mean_d = float(w @ sq_distances(X, C).mean(axis=1))
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    limit = J if factor < 1 else mean_d
    assert_allclose(loss, limit, rtol=rtol)


@pytest.mark.parametrize(
    "sigma",
    [0, 0.0, -1.0, np.inf, np.nan, "1.0", None],
    ids=["0", "0.0", "negative", "inf", "nan", "string", "None"],
)
def test_invalid_sigma_raises(sigma):
    # Check that a width that is not a finite positive number is rejected.
    X, C, _ = _problem(0)
    with pytest.raises(InvalidParameterError, match="'sigma' parameter"):
        rbf_kmeans_loss(X, C, sigma=sigma)


def test_invalid_activation_raises():
    # Check that an unknown activation is rejected.
    X, C, _ = _problem(0)
    with pytest.raises(InvalidParameterError, match="'activation' parameter"):
        rbf_kmeans_loss(X, C, sigma=1.0, activation="sparsemax")


def _bad_inputs():
    X, C, _ = _problem(0, n_samples=10, n_features=3, n_clusters=2)
    X_nan = X.copy()
    X_nan[1, 1] = np.nan
    ones = np.ones(10)
    return [
        pytest.param(
            X, C[:, :2], None, "centers has 2 features but X has 3", id="centers-d"
        ),
        pytest.param(X, C[0], None, "Expected 2D array", id="centers-1d"),
        pytest.param(X[:, 0], C, None, "Expected 2D array", id="X-1d"),
        pytest.param(X_nan, C, None, "Input contains NaN", id="X-nan"),
        pytest.param(X, np.full_like(C, np.inf), None, "infinity", id="centers-inf"),
        pytest.param(X, C, -ones, "Negative values", id="neg-w"),
        pytest.param(X, C, 0 * ones, "at least one non-zero", id="zero-w"),
        pytest.param(X, C, ones[:4], r"sample_weight.shape == \(4,\)", id="len-w"),
    ]


@pytest.mark.parametrize("X, centers, sample_weight, match", _bad_inputs())
def test_bad_input_raises(X, centers, sample_weight, match):
    # Check that mismatched shapes, NaN/inf and bad weights raise ValueError.
    with pytest.raises(ValueError, match=match):
        rbf_kmeans_loss(X, centers, sigma=1.0, sample_weight=sample_weight)


@pytest.mark.parametrize("read_only", [False, True], ids=["writeable", "read-only"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_input_not_modified(activation, sparse, read_only):
    # Check that X, centers and sample_weight are left unchanged (and may be
    # read-only).
    X, C, w = _problem(0)
    originals = (X.copy(), C.copy(), w.copy())
    X_in = sp.csr_matrix(X) if sparse else X
    if read_only:
        for a in (X_in.data if sparse else X_in, C, w):
            a.flags.writeable = False
    for return_gradient in (False, True):
        rbf_kmeans_loss(
            X_in,
            C,
            sigma=1.0,
            activation=activation,
            sample_weight=w,
            return_gradient=return_gradient,
        )
    X_after = X_in.toarray() if sparse else X_in
    for before, after in zip(originals, (X_after, C, w)):
        assert_array_equal(after, before)


@pytest.mark.parametrize("sigma", [0.3, 10.0, 1e4, 1e8, 1e150])
def test_entmax_free_energy_at_large_widths(sigma):
    # Check the entmax-1.5 free energy against a 60-digit decimal evaluation
    # of <r, d> + T (4/3) (sum_j r_j^1.5 - k^-1/2) from the same
    # responsibilities: near the uniform row (large widths) the entropy gap
    # is a difference of nearly equal terms, which float64 evaluated
    # directly loses (0.8% at sigma = 1e8 on this data).
    from decimal import Decimal, localcontext

    from skrbfkmeans import entmax15

    rng = np.random.default_rng(0)
    X, C = rng.normal(size=(50, 3)), rng.normal(size=(4, 3))
    d = ((X[:, None, :] - C[None]) ** 2).sum(axis=-1)
    T = 2.0 * sigma**2
    R = entmax15(-d / T)
    with localcontext() as ctx:
        ctx.prec = 60
        c = Decimal(C.shape[0]) ** Decimal("-0.5")
        exact = Decimal(0)
        for d_row, r_row in zip(d, R):
            r = [Decimal(float(v)) for v in r_row]
            r = [v / sum(r) for v in r]
            gap = Decimal(4) / 3 * (sum(v * v.sqrt() for v in r) - c)
            exact += sum(Decimal(float(e)) * v for e, v in zip(d_row, r))
            exact += Decimal(T) * gap
    F = rbf_kmeans_loss(X, C, sigma=sigma, activation="entmax15")
    assert_allclose(F, float(exact), rtol=1e-14)
