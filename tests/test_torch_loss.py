"""Tests of the PyTorch rbf_kmeans_loss: values, gradients, limits, devices.

Oracles: the package's NumPy ``rbf_kmeans_loss`` (values and gradients), an
independent evaluation in 60-digit decimal arithmetic of the definitions
(logsumexp for softmax; the sort-based entmax-1.5 of Peters et al. 2019,
Algorithm 2, and the Tsallis entropy), finite differences
(``torch.autograd.gradcheck``) and the hard K-Means quantities at margins
of at least ``4 sigma^2``.
"""

import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from _torch_common import DEVICES, one_torch_thread  # noqa: E402, F401
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402

import skrbfkmeans  # noqa: E402
from skrbfkmeans.torch import RBFKMeansLayer, rbf_kmeans_loss  # noqa: E402

ACTIVATIONS = ["softmax", "entmax15"]

WIDTHS = [1e-8, 1e-4, 1e-2, 0.3, 1.0, 3.0, 1e2, 1e4, 1e8]


def _problem(seed, n_samples=80, n_features=3, n_clusters=5, scale=1.0):
    """Four noisy blobs, centres near random rows, positive weights."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-4, 4, (4, n_features))
    X = means[rng.integers(0, 4, n_samples)] + rng.standard_normal(
        (n_samples, n_features)
    )
    C = X[rng.choice(n_samples, n_clusters, replace=False)]
    C = C + 0.3 * rng.standard_normal(C.shape)
    w = rng.uniform(0.5, 2.0, n_samples)
    return X * scale, C * scale, w


def _torch_loss(X, C, w, sigma, activation, **kwargs):
    """Loss and gradients (z, centers) of the torch function, as NumPy."""
    z = torch.from_numpy(X).requires_grad_()
    c = torch.from_numpy(C).requires_grad_()
    sw = None if w is None else torch.from_numpy(w)
    loss = rbf_kmeans_loss(z, c, sigma, activation, sample_weight=sw, **kwargs)
    loss.backward()
    return loss.item(), c.grad.numpy(), z.grad.numpy()


def _decimal_loss(X, C, w, sigma, activation):
    """The loss from its definition, in 60-digit decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 60
        k = C.shape[0]
        T = 2 * Decimal(sigma) ** 2
        total = Decimal(0)
        for x, wi in zip(X, w):
            d = [sum((Decimal(a) - Decimal(b)) ** 2 for a, b in zip(x, c)) for c in C]
            d_min = min(d)
            if activation == "softmax":
                mean = sum((-(dj - d_min) / T).exp() for dj in d) / k
                F = d_min - T * mean.ln()
            else:
                u = sorted((-(dj - d_min) / (2 * T) for dj in d), reverse=True)
                tau = None
                for rho in range(1, k + 1):
                    top = u[:rho]
                    mean = sum(top) / rho
                    ss = sum(v * v for v in top) - rho * mean * mean
                    t = mean - max((1 - ss) / rho, Decimal(0)).sqrt()
                    if t <= u[rho - 1]:
                        tau = t
                r = [max(-(dj - d_min) / (2 * T) - tau, Decimal(0)) ** 2 for dj in d]
                h_max = Decimal(4) / 3 * (1 - Decimal(k) ** Decimal("-0.5"))
                h = Decimal(4) / 3 * sum(rj - rj * rj.sqrt() for rj in r)
                F = sum(rj * dj for rj, dj in zip(r, d)) + T * (h_max - h)
            total += Decimal(wi) * F
        return float(total)


@pytest.mark.parametrize("scale", [1e-100, 1.0, 1e100], ids=lambda s: f"data{s:g}")
@pytest.mark.parametrize("width", WIDTHS, ids=lambda s: f"w{s:g}")
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_matches_numpy(activation, width, scale, global_random_seed):
    # Check value and both gradients against the NumPy function in float64,
    # with weights, for widths from 1e-8 to 1e8 times the data's scale and
    # data far from 1 (the power-of-2 working units).
    X, C, w = _problem(global_random_seed, scale=scale)
    sigma = width * scale
    loss, grad_c, grad_z = _torch_loss(X, C, w, sigma, activation)
    expected, exp_c, exp_z = skrbfkmeans.rbf_kmeans_loss(
        X, C, sigma=sigma, activation=activation, sample_weight=w,
        return_gradient=True,
    )  # fmt: skip
    # The NumPy entmax-1.5 value loses T * eps per row to the cancellation in
    # H_max - H_1.5(r) (13% at a width of 1e8 times the data's scale); beyond
    # 10 the exact oracle below is the reference.
    if activation == "softmax" or width <= 10:
        assert_allclose(loss, expected, rtol=1e-12)
    assert_allclose(grad_c, exp_c, rtol=1e-12, atol=1e-12 * np.abs(exp_c).max())
    assert_allclose(grad_z, exp_z, rtol=1e-12, atol=1e-12 * np.abs(exp_z).max())


@pytest.mark.parametrize("width", WIDTHS, ids=lambda s: f"w{s:g}")
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_loss_matches_exact_oracle(activation, width, global_random_seed):
    # Check the value against the definitions evaluated in 60-digit decimal
    # arithmetic: exact to rounding at every width, softmax where every
    # exp(-d / T) but the nearest underflows, entmax where the responsibilities
    # are nearly uniform.
    X, C, w = _problem(global_random_seed, n_samples=20, n_clusters=4)
    loss, _, _ = _torch_loss(X, C, w, width, activation)
    assert_allclose(loss, _decimal_loss(X, C, w, width, activation), rtol=1e-13)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("sigma", [0.7, 2.0], ids=lambda s: f"s{s:g}")
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradcheck(activation, sigma, weighted, global_random_seed):
    # Check the Danskin backward against finite differences, in z and in the
    # centres together.
    X, C, w = _problem(global_random_seed, n_samples=12, n_clusters=3)
    z = torch.from_numpy(X).requires_grad_()
    c = torch.from_numpy(C).requires_grad_()
    sw = torch.from_numpy(w) if weighted else None

    def f(z, c):
        return rbf_kmeans_loss(z, c, sigma, activation, sample_weight=sw)

    assert torch.autograd.gradcheck(f, (z, c))


def _hard(X, C, w):
    """Distortion, labels and the hard gradients of K-Means (explicit)."""
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    labels = d.argmin(axis=1)
    J = float(w @ d[np.arange(len(X)), labels])
    onehot = np.eye(C.shape[0])[labels]
    N, S = onehot.T @ w, onehot.T @ (w[:, None] * X)
    grad_c = 2 * (N[:, None] * C - S)
    grad_z = 2 * w[:, None] * (X - C[labels])
    margin = np.partition(d, 1, axis=1)[:, 1] - d[np.arange(len(X)), labels]
    return J, grad_c, grad_z, margin.min()


@pytest.mark.parametrize("factor", [0.999, 0.5, 1e-3])
def test_entmax_at_margin_is_kmeans(factor, global_random_seed):
    # Check that with every margin d_(2) - d_(1) >= 4 sigma^2 the entmax-1.5
    # loss is exactly J + T W H_max (the K-Means distortion plus the
    # convention's constant) and its gradients are K-Means's; a bit above
    # that width some row is soft and the loss drops below.
    X, C, w = _problem(global_random_seed)
    J, hard_c, hard_z, margin = _hard(X, C, w)
    W, k = w.sum(), C.shape[0]
    h_max = 4.0 / 3.0 * (1.0 - k**-0.5)
    sigma = factor * math.sqrt(margin / 4.0)
    loss, grad_c, grad_z = _torch_loss(X, C, w, sigma, "entmax15")
    eps = np.finfo(np.float64).eps
    assert_allclose(loss, J + 2 * sigma**2 * W * h_max, rtol=8 * eps)
    assert_allclose(grad_c, hard_c, rtol=1e-13, atol=1e-13 * np.abs(hard_c).max())
    assert_allclose(grad_z, hard_z, rtol=1e-13, atol=1e-13 * np.abs(hard_z).max())
    sigma = 1.01 * math.sqrt(margin / 4.0)
    loss, _, _ = _torch_loss(X, C, w, sigma, "entmax15")
    assert loss < J + 2 * sigma**2 * W * h_max


@pytest.mark.parametrize("sigma", [0.0, 1e-300, 1e-30], ids=lambda s: f"s{s:g}")
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_zero_width_limit_is_kmeans(activation, sigma, global_random_seed):
    # Check that where softmax underflows for every centre but the nearest
    # (and at sigma=0) both losses are finite and equal the distortion, with
    # Lloyd's gradients.
    X, C, w = _problem(global_random_seed)
    J, hard_c, hard_z, _ = _hard(X, C, w)
    loss, grad_c, grad_z = _torch_loss(X, C, w, sigma, activation)
    assert_allclose(loss, J, rtol=1e-13)
    assert_allclose(grad_c, hard_c, rtol=1e-13, atol=1e-13 * np.abs(hard_c).max())
    assert_allclose(grad_z, hard_z, rtol=1e-13, atol=1e-13 * np.abs(hard_z).max())


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_bounds_and_mean_reduction(activation, global_random_seed):
    # Check J <= F <= J + T W log k, and that reduction="mean" is the sum
    # divided by the total weight, gradients included.
    X, C, w = _problem(global_random_seed)
    J, _, _, _ = _hard(X, C, w)
    sigma = 1.3
    loss, grad_c, grad_z = _torch_loss(X, C, w, sigma, activation)
    assert J <= loss <= J + 2 * sigma**2 * w.sum() * math.log(C.shape[0])
    mean, mean_c, mean_z = _torch_loss(X, C, w, sigma, activation, reduction="mean")
    assert_allclose(mean, loss / w.sum(), rtol=1e-14)
    assert_allclose(mean_c, grad_c / w.sum(), rtol=1e-14)
    assert_allclose(mean_z, grad_z / w.sum(), rtol=1e-14)
    # Without weights, "mean" divides by the number of rows.
    total, _, _ = _torch_loss(X, C, None, sigma, activation)
    mean, _, _ = _torch_loss(X, C, None, sigma, activation, reduction="mean")
    assert_allclose(mean, total / X.shape[0], rtol=1e-14)


def test_sigma_as_tensor_and_weights_as_array():
    # Check that a 0-d tensor width and array-like weights give the same loss
    # as a float and a tensor.
    X, C, w = _problem(0)
    z, c = torch.from_numpy(X), torch.from_numpy(C)
    ref = rbf_kmeans_loss(z, c, 0.8, sample_weight=torch.from_numpy(w))
    sigma = torch.tensor(0.8, dtype=torch.float64)
    other = rbf_kmeans_loss(z, c, sigma, sample_weight=w.tolist())
    assert ref.item() == other.item()


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_float32_close_to_float64(activation, global_random_seed):
    # Check that float32 codes give a float32 loss and gradients close to
    # float64's.
    X, C, w = _problem(global_random_seed)
    l64, gc64, gz64 = _torch_loss(X, C, w, 1.5, activation)
    z = torch.from_numpy(X).float().requires_grad_()
    c = torch.from_numpy(C).float().requires_grad_()
    loss = rbf_kmeans_loss(z, c, 1.5, activation, sample_weight=torch.from_numpy(w))
    loss.backward()
    assert loss.dtype == c.grad.dtype == z.grad.dtype == torch.float32
    assert_allclose(loss.item(), l64, rtol=1e-5)
    assert_allclose(c.grad.numpy(), gc64, rtol=1e-4, atol=1e-4 * np.abs(gc64).max())
    assert_allclose(z.grad.numpy(), gz64, rtol=1e-4, atol=1e-4 * np.abs(gz64).max())


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_device_matches_numpy(device, activation, global_random_seed):
    # Check that on each device the loss and its gradients equal the NumPy
    # function in float64: to 1e-12 in float64, to float32's precision in
    # float32.
    X, C, w = _problem(global_random_seed, n_samples=500, n_clusters=16)
    expected = skrbfkmeans.rbf_kmeans_loss(
        X, C, sigma=0.9, activation=activation, sample_weight=w, return_gradient=True
    )
    for dtype, tol in [(torch.float64, 1e-12), (torch.float32, 2e-5)]:
        z = torch.from_numpy(X).to(device, dtype).requires_grad_()
        c = torch.from_numpy(C).to(device, dtype).requires_grad_()
        sw = torch.from_numpy(w).to(device, dtype)
        loss = rbf_kmeans_loss(z, c, 0.9, activation, sample_weight=sw)
        assert loss.device.type == device
        loss.backward()
        for got, ref in zip((loss, c.grad, z.grad), expected):
            got = got.detach().cpu().double().numpy()
            assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_gradient_step_is_m_step(global_random_seed):
    # Check the paper's equivalence: a gradient step on the centres with the
    # per-cluster rate 1 / (2 N_j) lands on the EM update S_j / N_j.
    X, C, w = _problem(global_random_seed)
    z = torch.from_numpy(X)
    c = torch.from_numpy(C).requires_grad_()
    sw = torch.from_numpy(w)
    rbf_kmeans_loss(z, c, 1.1, "entmax15", sample_weight=sw).backward()
    layer = RBFKMeansLayer(*C.shape, sigma=1.1, dtype=torch.float64)
    with torch.no_grad():
        layer.centers.copy_(c)
        R = layer(z)
    N = R.T @ sw
    stepped = c.detach() - c.grad / (2 * N[:, None])
    expected = (R * sw[:, None]).T @ z / N[:, None]
    assert_allclose(stepped.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


def _bad(**kwargs):
    X, C, _ = _problem(0, n_samples=6, n_clusters=2)
    args = dict(z=torch.from_numpy(X), centers=torch.from_numpy(C), sigma=1.0)
    args.update(kwargs)
    return lambda: rbf_kmeans_loss(**args)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (_bad(sigma=-1.0), ValueError, "sigma"),
        (_bad(sigma=math.nan), ValueError, "sigma"),
        (_bad(sigma="1"), TypeError, "sigma"),
        (_bad(sigma=torch.ones(2)), ValueError, "sigma"),
        (_bad(activation="relu"), ValueError, "activation"),
        (_bad(reduction="max"), ValueError, "reduction"),
        (_bad(sample_weight=-np.ones(6)), ValueError, "non-negative"),
        (_bad(sample_weight=np.ones(5)), ValueError, "shape"),
        (_bad(sample_weight=np.zeros(6), reduction="mean"), ValueError, "total"),
        (_bad(centers=torch.zeros(2, 4, dtype=torch.float64)), ValueError, "features"),
        (_bad(centers=torch.zeros(2, 3)), ValueError, "dtype"),
        (_bad(z=torch.zeros(6, 3, dtype=torch.int64)), TypeError, "floating"),
        (_bad(z=torch.zeros(6, dtype=torch.float64)), ValueError, "features"),
        (_bad(z=np.zeros((6, 3))), TypeError, "torch.Tensor"),
    ],
    ids=[
        "sigma-negative",
        "sigma-nan",
        "sigma-string",
        "sigma-vector",
        "activation",
        "reduction",
        "weight-negative",
        "weight-shape",
        "weight-zero-mean",
        "features",
        "dtype",
        "int",
        "1d",
        "ndarray",
    ],
)
def test_invalid_input_raises(call, error, match):
    # Check that invalid inputs raise a clear error naming the problem.
    with pytest.raises(error, match=match):
        call()


def test_inputs_not_modified():
    # Check that the loss and its backward leave z, centers and weights as
    # they were.
    X, C, w = _problem(0)
    z, c, sw = (torch.from_numpy(a.copy()) for a in (X, C, w))
    z.requires_grad_()
    rbf_kmeans_loss(z, c, 0.5, "entmax15", sample_weight=sw).backward()
    assert_array_equal(z.detach().numpy(), X)
    assert_array_equal(c.numpy(), C)
    assert_array_equal(sw.numpy(), w)
