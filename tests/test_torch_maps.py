"""Tests of the PyTorch maps: entmax15, sparsemax and entmax_bisect.

The NumPy maps of the package are the oracle (themselves tested against the
sort algorithms of Peters et al. 2019 and Martins & Astudillo 2016 in
``test_entmax.py``); the ``entmax`` package (PyTorch, Peters et al.) is a
second oracle when it is installed.
"""

import math
from functools import partial

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from _torch_common import DEVICES, maps, one_torch_thread  # noqa: E402, F401
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402

import skrbfkmeans  # noqa: E402
from skrbfkmeans.torch import _thresholds, entmax15, entmax_bisect, sparsemax  # noqa: E402

# name -> (torch map, NumPy map, alpha)
MAPS = maps((1.1, 1.25, 1.5, 2.0, 3.0))

# Probabilities are at most 1 and the maps are Lipschitz for alpha <= 2: two
# correct float64 implementations differ by a few ulps of 1 (measured: at
# most 7 ulps, 1.5e-15). For alpha > 2, p_j = (u_j - tau) ** (1 / (alpha - 1))
# has an infinite slope at the edge of the support, where an ulp of tau
# moves p_j by up to eps ** (1 / (alpha - 1)).
RTOL = 1e-12


def _atol(alpha):
    return max(1e-14, 4 * np.finfo(np.float64).eps ** (1.0 / (alpha - 1.0)))


@pytest.fixture(params=["sort", "search"])
def eager_path(request, monkeypatch):
    """Both eager paths, whatever the tensor's size: every column sorted (as
    under torch.compile and torch.func) or, in slices longer than
    _NEWTON_CANDIDATES, the candidate columns searched (a count read on the
    host, then a top-k or Newton's iteration)."""
    numel = 0 if request.param == "search" else math.inf
    monkeypatch.setattr(_thresholds, "_SEARCH_NUMEL", numel)
    return request.param


def _scores(case, rng, m, k):
    """``m`` slices of ``k`` scores of the given kind, unscaled."""
    if case == "random":
        return rng.standard_normal((m, k))
    if case == "ties":
        # Half-integers: many ties, at the maximum too.
        return rng.integers(-3, 4, size=(m, k)) / 2
    if case == "constant":
        return np.repeat(rng.standard_normal((m, 1)), k, axis=1)
    # masked: about 40% of -inf entries, never a slice's first one.
    Z = rng.standard_normal((m, k))
    mask = rng.random((m, k)) < 0.4
    mask[:, 0] = False
    Z[mask] = -np.inf
    return Z


@pytest.mark.parametrize("dim", [0, -1], ids=lambda d: f"dim{d}")
@pytest.mark.parametrize(
    "scale", [1e-300, 1e-8, 0.5, 3.0, 1e8, 1e300], ids=lambda s: f"x{s:g}"
)
@pytest.mark.parametrize("name", list(MAPS))
def test_maps_match_numpy(name, scale, dim, eager_path, global_random_seed):
    # Check that every map equals the package's NumPy map in float64 at every
    # scale of the scores, with ties, equal and masked slices, along any dim,
    # whether it sorts every column or searches the candidates.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    cases = ["random", "ties", "constant", "masked"]
    rows = np.concatenate([_scores(case, rng, 10, 9) for case in cases])
    Z = np.moveaxis((rows * scale).reshape(5, 8, 9), -1, dim)
    P = f(torch.from_numpy(Z), dim=dim)
    assert P.dtype == torch.float64 and P.shape == Z.shape
    expected = f_np(Z, axis=dim)
    assert_allclose(P.numpy(), expected, rtol=RTOL, atol=_atol(alpha))
    # Exact zeros where the NumPy map has them, and only there.
    assert_array_equal(P.numpy() > 0, expected > 0)
    assert_allclose(P.sum(dim).numpy(), 1.0, rtol=0, atol=8 * np.finfo(float).eps)


@pytest.mark.parametrize("scale", [1e-300, 0.25, 2.0, 1e300], ids=lambda s: f"x{s:g}")
def test_entmax15_dense_slices_match_numpy(scale, eager_path, global_random_seed):
    # Check that slices with more candidates than _NEWTON_CANDIDATES (their
    # threshold from Newton's iteration when searched, from the full sort
    # otherwise) equal the NumPy map in float64, with ties, masks and a mix
    # of dense and one-hot slices, and that their backward is the NumPy
    # Jacobian-vector product.
    rng = np.random.default_rng(global_random_seed)
    k = 4 * _thresholds._NEWTON_CANDIDATES
    Z = np.concatenate(
        [
            rng.uniform(-0.5, 0, (6, k)),  # every entry a candidate
            np.round(rng.uniform(-1, 0, (4, k)), 1),  # ties
            _scores("masked", rng, 4, k) * 0.3,
            _scores("random", rng, 4, k) * 50.0,  # nearly one-hot
        ]
    )
    Z = Z * scale
    z = torch.from_numpy(Z).requires_grad_()
    P = entmax15(z)
    expected = skrbfkmeans.entmax15(Z)
    assert_allclose(P.detach().numpy(), expected, rtol=RTOL, atol=1e-14)
    assert_array_equal(P.detach().numpy() > 0, expected > 0)
    G = rng.standard_normal(Z.shape)
    P.backward(torch.from_numpy(G))
    expected_grad = skrbfkmeans.entmax_backward(P.detach().numpy(), G, alpha=1.5)
    assert_allclose(z.grad.numpy(), expected_grad, rtol=RTOL, atol=1e-13)


@pytest.mark.parametrize("name", list(MAPS))
def test_few_candidates_match_numpy(name, eager_path, global_random_seed):
    # Check that slices with 1 to 8 entries within reach of the support among
    # 40 (the searched path's top-k of the candidates, fewer than the
    # columns), with ties at the top and masked entries, equal the NumPy map
    # in float64, as does their backward the closed-form product.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    n, k = 24, 40
    reach = 1.0 / (alpha - 1.0)
    Z = rng.uniform(-30.0, -2.0, (n, k)) * reach
    for i in range(n):
        near = rng.choice(k, size=1 + i % 8, replace=False)
        # Odd rows nearly tied: all their near entries are in the support.
        spread = 0.002 if i % 2 else 0.9
        Z[i, near] = rng.uniform(-spread, 0.0, near.size) * reach
        Z[i, near[0]] = 0.0
        if i % 3 == 0:
            Z[i, near[-1]] = 0.0  # a tie at the maximum
    Z[rng.random((n, k)) < 0.1] = -np.inf
    Z[np.arange(n), Z.argmax(axis=1)] = 0.0  # no slice entirely masked
    z = torch.from_numpy(Z).requires_grad_()
    P = f(z)
    expected = f_np(Z)
    assert_allclose(P.detach().numpy(), expected, rtol=RTOL, atol=_atol(alpha))
    assert_array_equal(P.detach().numpy() > 0, expected > 0)
    G = rng.standard_normal(Z.shape)
    P.backward(torch.from_numpy(G))
    expected_grad = skrbfkmeans.entmax_backward(expected, G, alpha=alpha)
    assert_allclose(z.grad.numpy(), expected_grad, rtol=RTOL, atol=1e-13)


@pytest.mark.parametrize("name", list(MAPS))
def test_backward_matches_numpy(name, global_random_seed):
    # Check that the autograd backward equals skrbfkmeans.entmax_backward
    # (the closed-form Jacobian-vector product) on random scores and masks.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = _scores("masked", rng, 30, 8) * 2.0
    G = rng.standard_normal(Z.shape)
    z = torch.from_numpy(Z).requires_grad_()
    P = f(z)
    P.backward(torch.from_numpy(G))
    expected = skrbfkmeans.entmax_backward(P.detach().numpy(), G, alpha=alpha)
    assert_allclose(z.grad.numpy(), expected, rtol=RTOL, atol=1e-14)
    # Masked entries (and every entry outside the support) get no gradient.
    assert np.all(z.grad.numpy()[P.detach().numpy() == 0] == 0)


@pytest.mark.parametrize("name", list(MAPS))
def test_gradcheck(name, global_random_seed):
    # Check the closed-form backward against finite differences
    # (torch.autograd.gradcheck), along the middle dim of a 3-D tensor, on
    # scores with a support of several entries.
    f, _, _ = MAPS[name]
    gen = torch.Generator().manual_seed(global_random_seed)
    z = torch.randn(3, 5, 2, dtype=torch.float64, generator=gen).requires_grad_()
    assert torch.autograd.gradcheck(partial(f, dim=1), (z,))


@pytest.mark.parametrize("name", list(MAPS))
def test_extreme_slices(name):
    # Check slices at the limits of float64: huge ties, gaps that overflow,
    # tiny differences, all-equal slices and masked entries.
    f, _, alpha = MAPS[name]
    big, tiny = 1e300, 1e-300
    Z = torch.tensor(
        [
            [big, -big, big, -math.inf],  # a tie at the top, an overflowing gap
            [1.7e308, -1.7e308, 0.0, 0.0],  # z - max overflows to -inf
            [tiny, -tiny, 0.0, 2 * tiny],  # differences below any scale: uniform
            [-big, -big, -big, -big],  # all equal
            [5.0, -math.inf, -math.inf, -math.inf],  # one unmasked entry
        ],
        dtype=torch.float64,
    )
    P = f(Z)
    expected = [
        [0.5, 0.0, 0.5, 0.0],
        [1.0, 0.0, 0.0, 0.0],
        [0.25] * 4,
        [0.25] * 4,
        [1.0, 0.0, 0.0, 0.0],
    ]
    assert_allclose(P.numpy(), expected, rtol=4 * np.finfo(float).eps, atol=0)


@pytest.mark.parametrize("gap", ["at", "above", "below"])
@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.5", "bisect-2"])
def test_exact_one_hot(name, gap):
    # Check that a slice is exactly one-hot iff its top gap is >= 1/(alpha-1),
    # with exact zeros (these thresholds and scores are exact in float64).
    f, _, alpha = MAPS[name]
    g = {"at": 1.0, "above": 1.5, "below": 1.0 - 1e-9}[gap] / (alpha - 1.0)
    P = f(torch.tensor([3.0 - g, 3.0, -1e6], dtype=torch.float64))
    if gap == "below":
        assert 0 < P[0] < 1e-8
    else:
        assert_array_equal(P.numpy(), [0.0, 1.0, 0.0])


def test_nan_propagates_to_its_slice_only():
    # Check that NaN, +inf and all -inf slices give NaN (as torch.softmax
    # does) and leave the other slices exact.
    Z = torch.tensor(
        [
            [0.0, math.nan, 1.0],
            [0.0, math.inf, 1.0],
            [-math.inf] * 3,
            [0.0, 0.4, -3.0],
        ],
        dtype=torch.float64,
    )
    for f, _, _ in MAPS.values():
        P = f(Z)
        assert torch.isnan(P[:3]).all()
        assert_allclose(P[3].numpy(), f(Z[3:]).numpy()[0], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(MAPS))
def test_low_precision_dtypes(name, dtype, global_random_seed):
    # Check that float32 and half-precision inputs keep their dtype and agree
    # with the float64 result to their own precision.
    f, _, alpha = MAPS[name]
    gen = torch.Generator().manual_seed(global_random_seed)
    z64 = torch.randn(50, 12, dtype=torch.float64, generator=gen) * 2
    z = z64.to(dtype)
    P = f(z)
    assert P.dtype == dtype
    # Same input values: the only differences are the rounding of the result
    # (and of the float32 computation for float32).
    expected = f(z.to(torch.float64))
    eps = torch.finfo(dtype).eps
    tol = max(8 * eps, _atol(alpha) if dtype == torch.float64 else 0)
    if alpha > 2:
        tol = max(tol, 4 * torch.finfo(torch.float32).eps ** (1 / (alpha - 1)))
    assert_allclose(P.double().numpy(), expected.numpy(), rtol=0, atol=tol)
    # The backward runs in the same dtype.
    z.requires_grad_()
    f(z).pow(2).sum().backward()
    assert z.grad.dtype == dtype and torch.isfinite(z.grad).all()


def test_entmax_package_oracle(global_random_seed):
    # Check against the entmax package (Peters et al.'s PyTorch code) where
    # both apply: moderate scores, where its unshifted bisection is exact.
    entmax = pytest.importorskip("entmax", reason="entmax package not installed")
    gen = torch.Generator().manual_seed(global_random_seed)
    z = torch.randn(40, 10, dtype=torch.float64, generator=gen) * 2
    assert_allclose(entmax15(z).numpy(), entmax.entmax15(z).numpy(), atol=1e-14)
    assert_allclose(sparsemax(z).numpy(), entmax.sparsemax(z).numpy(), atol=1e-14)
    for alpha in (1.25, 1.5, 2.0):
        # The package halves 50 times from a bracket of width up to 1: its
        # threshold is exact to about 2 ** -50.
        assert_allclose(
            entmax_bisect(z, alpha=alpha).numpy(),
            entmax.entmax_bisect(z, alpha=alpha, n_iter=60).numpy(),
            atol=1e-13,
        )


@pytest.mark.parametrize("name", list(MAPS))
@pytest.mark.parametrize("device", DEVICES)
def test_device_matches_numpy(name, device, global_random_seed):
    # Check that each device (the CPU included) gives the NumPy map's values
    # and closed-form gradients in float64, of the same scores, to 1e-12 in
    # float64 and to float32's precision in float32.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    for dtype, tol in [(torch.float64, 1e-12), (torch.float32, 1e-5)]:
        # The scores and the upstream gradient as the dtype holds them.
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        Z = (rng.standard_normal((64, 33)) * 3).astype(np_dtype)
        Z[:, 5] = -np.inf
        G = rng.standard_normal(Z.shape).astype(np_dtype)
        z = torch.from_numpy(Z).to(device).requires_grad_()
        P = f(z)
        assert P.device.type == device and P.dtype == dtype
        P.backward(torch.from_numpy(G).to(device))
        Z64, G64 = Z.astype(np.float64), G.astype(np.float64)
        expected = f_np(Z64)
        expected_grad = skrbfkmeans.entmax_backward(expected, G64, alpha=alpha)
        atol = tol if alpha <= 2 else max(tol, 4 * torch.finfo(dtype).eps ** 0.5)
        assert_allclose(
            P.detach().cpu().double().numpy(), expected, rtol=tol, atol=atol
        )
        assert_allclose(
            z.grad.cpu().double().numpy(), expected_grad, rtol=tol, atol=atol
        )


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: entmax15(torch.arange(3)), TypeError, "floating-point"),
        (lambda: entmax15(np.zeros(3)), TypeError, "torch.Tensor"),
        (lambda: sparsemax(torch.tensor(1.0)), ValueError, "at least one"),
        (lambda: entmax15(torch.zeros(2, 3), dim=2), IndexError, "out of range"),
        (lambda: entmax15(torch.zeros(2, 0)), ValueError, "empty slices"),
        (lambda: entmax_bisect(torch.zeros(3), alpha=1.0), ValueError, "alpha"),
        (lambda: entmax_bisect(torch.zeros(3), alpha=math.nan), ValueError, "alpha"),
        (lambda: entmax_bisect(torch.zeros(3), n_iter=-1), ValueError, "n_iter"),
        (lambda: entmax_bisect(torch.zeros(3), n_iter=2.5), ValueError, "n_iter"),
    ],
    ids=[
        "int",
        "ndarray",
        "scalar",
        "dim",
        "empty",
        "alpha-1",
        "alpha-nan",
        "n_iter-neg",
        "n_iter-float",
    ],
)
def test_invalid_input_raises(call, error, match):
    # Check that invalid inputs raise a clear error naming the problem.
    with pytest.raises(error, match=match):
        call()
