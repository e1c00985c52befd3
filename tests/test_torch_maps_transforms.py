"""Tests of the PyTorch maps under transforms: compile, torch.func, higher
derivatives and autocast.

The references are independent of the code under test: the NumPy maps and
their closed-form Jacobian-vector product ``skrbfkmeans.entmax_backward``,
central finite differences in float64, and ``torch.autograd.gradgradcheck``.
"""

import math
from functools import partial

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from _torch_common import maps, one_torch_thread  # noqa: E402, F401
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402

import skrbfkmeans  # noqa: E402
from skrbfkmeans.torch import _maps, _thresholds, entmax15  # noqa: E402

# name -> (torch map, NumPy map, alpha)
MAPS = maps((1.25, 2.0, 3.0))
ATOL = 1e-13


@pytest.fixture(autouse=True)
def always_search(monkeypatch):
    """Eager calls of slices of 3 entries or more read the candidate count
    on the host, whatever the tensor's size: a transform that reached that
    read would fail (vmap) or break the graph (compile), instead of passing
    on a small tensor's full sort."""
    monkeypatch.setattr(_thresholds, "_SEARCH_NUMEL", 0)
    monkeypatch.setattr(_thresholds, "_NEWTON_CANDIDATES", 2)


def _sparse_scores(rng, m, k, alpha):
    """Float64 scores whose alpha-entmax has exact zeros, away from any edge.

    Built from the solution: on a random support of half the entries,
    weights ``p_j`` uniform in [1, 3], normalised (so ``p_j >= 1 / (3 k)``),
    and ``u_j = tau + p_j ** (alpha - 1)``; the other entries lie 0.1 to 0.5
    below ``tau``; ``z = u / (alpha - 1)``. The map is ``p`` whatever
    ``tau`` (it is shift invariant), and a finite difference of 1e-6 changes
    no support.
    """
    Z = np.empty((m, k))
    for i in range(m):
        inside = rng.permutation(k) < k // 2
        p = rng.uniform(1.0, 3.0, inside.sum())
        u = np.empty(k)
        u[inside] = (p / p.sum()) ** (alpha - 1.0)
        u[~inside] = -rng.uniform(0.1, 0.5, k - inside.sum())
        Z[i] = u / (alpha - 1.0)
    return Z


def _numpy_vjp(f_np, alpha, Z, G):
    """The closed-form product ``J(z) g`` of the NumPy map (J is symmetric)."""
    return skrbfkmeans.entmax_backward(f_np(Z), G, alpha=alpha)


# bisect-2 shares its graph's code with sparsemax and bisect-1.25 (each
# bisection's compile unrolls ~55 halvings: 5-9 s here).
@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.25", "bisect-3"])
def test_compile_fullgraph_one_graph_over_batch_sizes(name, global_random_seed):
    # Check that torch.compile(fullgraph=True, dynamic=True) traces each map
    # once, with no graph break, for batch sizes from 3 to 3000, and that the
    # compiled forward and backward equal the NumPy map and its closed-form
    # Jacobian product in float64.
    from torch._dynamo.utils import counters

    f, f_np, alpha = MAPS[name]
    torch._dynamo.reset()
    counters.clear()
    # aot_eager: dynamo's graph and the backward traced by AOTAutograd,
    # without the minutes of a C++ build on a small CI machine.
    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    rng = np.random.default_rng(global_random_seed)
    for n in (3, 17, 64, 300, 3000):
        Z = rng.standard_normal((n, 9)) * 2
        G = rng.standard_normal((n, 9))
        z = torch.from_numpy(Z).requires_grad_()
        P = compiled(z)
        P.backward(torch.from_numpy(G))
        assert_allclose(P.detach().numpy(), f_np(Z), rtol=0, atol=ATOL)
        expected = _numpy_vjp(f_np, alpha, Z, G)
        assert_allclose(z.grad.numpy(), expected, rtol=0, atol=ATOL)
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]
    torch._dynamo.reset()


def test_compile_entmax15_probs_and_inductor(global_random_seed):
    # Check that a function calling the internal entmax15_probs (as the loss
    # does) compiles with inductor into one graph over batch sizes, with no
    # graph break, and equals the NumPy map.
    from torch._dynamo.utils import counters

    def weighted(x, w):
        return _maps.entmax15_probs(x, 1) * w

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(weighted, fullgraph=True, dynamic=True)
    rng = np.random.default_rng(global_random_seed)
    for n in (5, 40, 700):
        Z = rng.standard_normal((n, 12)) * 3
        out = compiled(torch.from_numpy(Z), 2.0)
        assert out.dtype == torch.float64
        assert_allclose(out.numpy(), 2.0 * skrbfkmeans.entmax15(Z), rtol=0, atol=ATOL)
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]
    torch._dynamo.reset()


def test_export_entmax15(global_random_seed):
    # Check that torch.export captures a module applying entmax15, with a
    # dynamic batch size, and that the exported program equals the NumPy map
    # at a batch size other than the example's.
    class Head(torch.nn.Module):
        def forward(self, x):
            return entmax15(x)

    batch = torch.export.Dim("batch")
    example = torch.randn(8, 6, dtype=torch.float64)
    program = torch.export.export(Head(), (example,), dynamic_shapes=({0: batch},))
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((33, 6)) * 2
    P = program.module()(torch.from_numpy(Z))
    assert_allclose(P.numpy(), skrbfkmeans.entmax15(Z), rtol=0, atol=ATOL)


@pytest.mark.parametrize("in_dim", [0, 1], ids=lambda d: f"in_dim{d}")
@pytest.mark.parametrize("name", list(MAPS))
def test_vmap_matches_numpy(name, in_dim, global_random_seed):
    # Check that torch.func.vmap of a map (over either dim of a 2-D batch of
    # slices) equals the NumPy map of every slice.
    f, f_np, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((6, 7, 9)) * 2
    Z[:, :, 3] = -np.inf
    P = torch.func.vmap(f, in_dims=in_dim, out_dims=in_dim)(torch.from_numpy(Z))
    assert_allclose(P.numpy(), f_np(Z), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", list(MAPS))
def test_func_grad_and_vmap_grad(name, global_random_seed):
    # Check that torch.func.grad of <w, f(z)> is the closed-form Jacobian
    # product of the NumPy map, for one slice and under vmap for a batch, and
    # equals eager autograd's gradient.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((5, 8)) * 2
    W = rng.standard_normal(8)
    w = torch.from_numpy(W)

    def objective(z):
        return (f(z) * w).sum()

    expected = _numpy_vjp(f_np, alpha, Z, np.broadcast_to(W, Z.shape))
    grad = torch.func.grad(objective)(torch.from_numpy(Z[0]))
    assert_allclose(grad.numpy(), expected[0], rtol=0, atol=ATOL)
    batched = torch.func.vmap(torch.func.grad(objective))(torch.from_numpy(Z))
    assert_allclose(batched.numpy(), expected, rtol=0, atol=ATOL)
    z = torch.from_numpy(Z).requires_grad_()
    (f(z) * w).sum().backward()
    assert_allclose(batched.numpy(), z.grad.numpy(), rtol=0, atol=ATOL)


@pytest.mark.parametrize("mode", ["func.jvp", "forward_ad"])
@pytest.mark.parametrize("name", list(MAPS))
def test_jvp_matches_finite_differences(name, mode, global_random_seed):
    # Check that the forward-mode derivative J t (torch.func.jvp, and eager
    # forward-mode AD) equals central finite differences of the NumPy map and
    # its closed-form product, on scores with exact zeros in the output.
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = _sparse_scores(rng, 6, 10, alpha)
    T = rng.standard_normal(Z.shape)
    z, t = torch.from_numpy(Z), torch.from_numpy(T)
    if mode == "func.jvp":
        P, tangent = torch.func.jvp(f, (z,), (t,))
    else:
        import torch.autograd.forward_ad as fwAD

        with fwAD.dual_level():
            P, tangent = fwAD.unpack_dual(f(fwAD.make_dual(z, t)))
    assert_allclose(P.numpy(), f_np(Z), rtol=0, atol=ATOL)
    h = 1e-6
    finite = (f_np(Z + h * T) - f_np(Z - h * T)) / (2 * h)
    assert_allclose(tangent.numpy(), finite, rtol=1e-6, atol=1e-7)
    closed = _numpy_vjp(f_np, alpha, Z, T)
    assert_allclose(tangent.numpy(), closed, rtol=0, atol=ATOL)
    # Outside the support the map is locally constant: exact zeros.
    assert_array_equal(tangent.numpy()[P.numpy() == 0], 0.0)


@pytest.mark.parametrize("name", list(MAPS))
def test_gradgradcheck_with_exact_zeros(name, global_random_seed):
    # Check that double backward is correct (torch.autograd.gradgradcheck,
    # finite differences of the backward) at outputs with exact zeros, along
    # the middle dim of a 3-D tensor. sqrt(p) has an infinite slope at p = 0:
    # differentiated as written, the entmax package's entmax15 backward gives
    # NaN there, e.g. for z = [0, 0.4, -3] (p = [0.36, 0.64, 0]):
    #   z = torch.tensor([0.0, 0.4, -3.0], dtype=torch.float64,
    #                    requires_grad=True)
    #   g, = torch.autograd.grad(entmax.entmax15(z, dim=0)[0], z,
    #                            create_graph=True)
    #   torch.autograd.grad(g[0], z)   # (tensor([nan, nan, nan]),)
    # where entmax15 here gives [0.0539, -0.0539, 0.0].
    f, _, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = _sparse_scores(rng, 6, 8, alpha).reshape(2, 3, 8).transpose(0, 2, 1)
    z = torch.from_numpy(np.ascontiguousarray(Z)).requires_grad_()
    P = f(z, dim=1)
    assert (P == 0).any()
    assert torch.autograd.gradgradcheck(partial(f, dim=1), (z,))


@pytest.mark.parametrize("name", list(MAPS))
def test_hessian_matches_finite_differences(name, global_random_seed):
    # Check that torch.func.hessian of <w, f(z)> equals central finite
    # differences of its closed-form gradient (the NumPy map's product), is
    # finite and symmetric, at a slice with exact zeros (their rows and
    # columns of the Hessian are 0).
    f, f_np, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = _sparse_scores(rng, 1, 9, alpha)[0]
    W = rng.standard_normal(9)
    w = torch.from_numpy(W)
    H = torch.func.hessian(lambda z: (f(z) * w).sum())(torch.from_numpy(Z)).numpy()
    h = 1e-6
    columns = [
        (_numpy_vjp(f_np, alpha, Z + h * e, W) - _numpy_vjp(f_np, alpha, Z - h * e, W))
        / (2 * h)
        for e in np.eye(9)
    ]
    scale = max(1.0, np.abs(H).max())
    assert_allclose(H, np.stack(columns, axis=1), rtol=0, atol=1e-7 * scale)
    assert_allclose(H, H.T, rtol=0, atol=1e-13 * scale)
    outside = f_np(Z) == 0
    assert outside.any()
    assert_array_equal(H[outside], 0.0)
    assert_array_equal(H[:, outside], 0.0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(MAPS))
def test_autocast_computes_in_float32(name, dtype, global_random_seed):
    # Check that under CPU autocast the map of a layer's low-precision scores
    # keeps their dtype and equals the float32 map of the same scores (upcast)
    # to the output dtype's precision, and that the backward runs and equals
    # the float32 closed-form product to that precision.
    f, _, alpha = MAPS[name]
    torch.manual_seed(global_random_seed)
    layer = torch.nn.Linear(16, 10)
    x = torch.randn(64, 16)
    with torch.autocast("cpu", dtype=dtype):
        scores = layer(x)
        P = f(scores)
    assert scores.dtype == dtype and P.dtype == dtype
    eps = torch.finfo(dtype).eps
    expected = f(scores.detach().float())
    # The output is the float32 map rounded once: half an ulp of 1.
    assert_allclose(P.detach().float().numpy(), expected.numpy(), rtol=0, atol=eps / 2)
    G = torch.randn(P.shape).to(dtype)
    scores.retain_grad()
    P.backward(G)
    assert scores.grad.dtype == dtype and torch.isfinite(layer.weight.grad).all()
    closed = skrbfkmeans.entmax_backward(
        P.detach().float().numpy(), G.float().numpy(), alpha=alpha
    )
    scale = np.abs(closed).max()
    assert_allclose(scores.grad.float().numpy(), closed, rtol=0, atol=2 * eps * scale)


@pytest.mark.parametrize("name", list(MAPS))
def test_nan_rows_stay_in_their_slice_under_vmap(name):
    # Check that a NaN slice gives NaN in that slice only under vmap too (no
    # reduction crosses slices on the batched path).
    f, _, _ = MAPS[name]
    z = torch.tensor([[0.0, math.nan, 1.0], [0.0, 0.4, -3.0]], dtype=torch.float64)
    P = torch.func.vmap(f)(z)
    assert torch.isnan(P[0]).all()
    assert_allclose(P[1].numpy(), f(z[1:]).numpy()[0], rtol=0, atol=0)
