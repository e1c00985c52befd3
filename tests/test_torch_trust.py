"""Tests of the PyTorch layer inside a training loop.

Rows independent of their batch, one compiled graph over a whole annealing
schedule, export, mixed precision, live centres, exact second derivatives,
``torch.func`` and scikit-learn interop.

Oracles: the same rows computed alone (a batch of one) and in float64 from
their definition (``softmax(-||z - mu||^2 / T)`` with explicit differences,
the NumPy ``skrbfkmeans.entmax15``); finite differences of the gradient
(second derivatives); eager execution for the compiled and exported graphs;
the float32 computation for autocast; scikit-learn's estimators for interop.
"""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from _torch_common import one_torch_thread  # noqa: E402, F401
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.cluster import KMeans, MiniBatchKMeans, kmeans_plusplus  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import skrbfkmeans  # noqa: E402
from skrbfkmeans.torch import (  # noqa: E402
    AnnealingSchedule,
    RBFKMeansLayer,
    rbf_kmeans_loss,
)

ACTIVATIONS = ["softmax", "entmax15"]


def _codes(seed, n_samples=64, n_features=4, n_clusters=5, dtype=torch.float64):
    """Rows around ``n_clusters`` centres, and a layer holding those centres."""
    gen = torch.Generator().manual_seed(seed)
    centers = 3.0 * torch.randn(n_clusters, n_features, generator=gen, dtype=dtype)
    labels = torch.randint(n_clusters, (n_samples,), generator=gen)
    z = centers[labels] + torch.randn(n_samples, n_features, generator=gen, dtype=dtype)
    return z, centers


def _layer(centers, sigma, activation):
    layer = RBFKMeansLayer(
        *centers.shape, sigma=sigma, activation=activation, dtype=centers.dtype
    )
    with torch.no_grad():
        layer.centers.copy_(centers)
    return layer


def _definition(z, centers, sigma, activation):
    """Responsibilities from their definition, in float64, by explicit differences."""
    X, C = z.double().numpy(), centers.double().numpy()
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    s = -(d - d.min(axis=1, keepdims=True)) / (2.0 * sigma**2)
    if activation == "softmax":
        e = np.exp(s)
        return e / e.sum(axis=1, keepdims=True)
    return skrbfkmeans.entmax15(s, axis=1)


def _per_row(layer, z):
    """Responsibilities, labels, loss terms and loss gradients of each row."""
    z = z.clone().requires_grad_()
    resp = layer(z).detach()
    labels = layer.predict(z.detach())
    loss = layer.loss(z)
    loss.backward()
    return resp, labels, z.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_rows_do_not_depend_on_their_batch(activation, dtype, global_random_seed):
    # Check that a row's responsibilities, label, loss term and gradient are
    # those of the row alone, in batches of any size and order, and equal
    # the definition computed in float64.
    z, centers = _codes(global_random_seed, dtype=dtype)
    layer = _layer(centers, 1.2, activation)
    resp, labels, grad = _per_row(layer, z)
    tol = {torch.float32: 2e-5, torch.float64: 1e-12}[dtype]
    ref = _definition(z, centers, 1.2, activation)
    assert_allclose(resp.double().numpy(), ref, atol=tol)
    assert_array_equal(labels.numpy(), ref.argmax(axis=1))
    gen = torch.Generator().manual_seed(global_random_seed)
    order = torch.randperm(z.shape[0], generator=gen)
    for part in (order[:1], order[:7], order):
        got_resp, got_labels, got_grad = _per_row(layer, z[part])
        assert_allclose(got_resp.numpy(), resp[part].numpy(), rtol=tol, atol=tol)
        assert_array_equal(got_labels.numpy(), labels[part].numpy())
        scale = grad.abs().max().item()
        assert_allclose(got_grad.numpy(), grad[part].numpy(), atol=tol * scale)
    # The loss is the sum of the rows' terms, each computed alone.
    alone = sum(layer.loss(z[i : i + 1]).item() for i in range(z.shape[0]))
    assert_allclose(layer.loss(z).item(), alone, rtol=10 * tol)


@pytest.mark.parametrize(
    "dtype, outlier",
    [
        (torch.float32, float("nan")),
        (torch.float32, 1e6),
        (torch.float32, 1e17),
        (torch.float64, float("nan")),
        (torch.float64, 1e17),
        (torch.float64, 1e200),
    ],
    ids=["f32-nan", "f32-1e6", "f32-1e17", "f64-nan", "f64-1e17", "f64-1e200"],
)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_an_extreme_row_changes_no_other(activation, dtype, outlier):
    # Check that next to a NaN row or a row far away the other rows keep
    # their responsibilities, labels and gradients (to rounding), and that a
    # NaN row gives NaN in its own row and the label -1.
    z, centers = _codes(0, dtype=dtype)
    layer = _layer(centers, 1.2, activation)
    resp, labels, grad = _per_row(layer, z)
    bad = torch.full((1, z.shape[1]), outlier, dtype=dtype)
    got_resp, got_labels, got_grad = _per_row(layer, torch.cat([z[:20], bad, z[20:]]))
    keep = torch.arange(z.shape[0] + 1) != 20
    tol = {torch.float32: 1e-6, torch.float64: 1e-14}[dtype]
    assert_allclose(got_resp[keep].numpy(), resp.numpy(), atol=tol)
    assert_array_equal(got_labels[keep].numpy(), labels.numpy())
    scale = grad.abs().max().item()
    assert_allclose(got_grad[keep].numpy(), grad.numpy(), atol=tol * scale)
    if np.isnan(outlier):
        assert torch.isnan(got_resp[20]).all()
        assert got_labels[20].item() == -1
    else:
        # A far row is one-hot on the centre nearest in its direction.
        direction = centers.sum(dim=1) * 2 * outlier - (centers * centers).sum(dim=1)
        assert got_labels[20].item() == int(direction.argmax())
        assert got_resp[20].sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize("dtype, outlier", [(np.float64, 1e17), (np.float32, 1e9)])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_numpy_loss_rows_do_not_depend_on_their_batch(activation, dtype, outlier):
    # Check the same of the NumPy rbf_kmeans_loss: the gradient of each row
    # is unchanged by a far row in its batch.
    z, centers = _codes(1)
    X, C = z.numpy().astype(dtype), centers.numpy().astype(dtype)
    _, _, grad_x = skrbfkmeans.rbf_kmeans_loss(
        X, C, sigma=1.2, activation=activation, return_gradient=True
    )
    far = np.vstack([X, np.full((1, X.shape[1]), outlier, dtype=dtype)])
    _, _, grad_far = skrbfkmeans.rbf_kmeans_loss(
        far, C, sigma=1.2, activation=activation, return_gradient=True
    )
    tol = {np.float32: 1e-5, np.float64: 1e-12}[dtype]
    scale = np.abs(grad_x).max()
    assert_allclose(grad_far[:-1], grad_x, atol=tol * scale)


class _Model(torch.nn.Module):
    """An encoder and the layer: responsibilities and loss of the codes."""

    def __init__(self, activation, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.encoder = torch.nn.Linear(8, 4)
        self.layer = RBFKMeansLayer(5, 4, sigma=2.0, activation=activation)

    def forward(self, x):
        z = self.encoder(x)
        return self.layer(z), self.layer.loss(z, reduction="mean")


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_compiled_once_over_an_annealing_schedule(activation):
    # Check that torch.compile(fullgraph=True) of a model holding the layer,
    # trained over 20 widths, compiles one graph (no recompilation when the
    # width changes) and computes what eager execution computes. The
    # aot_eager backend traces forward and backward as inductor does,
    # without its C++ code generation (a minute on this suite's machines);
    # benchmarks/bench_torch.py times the inductor graph.
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model, twin = _Model(activation), _Model(activation)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-2) for m in (model, twin)]
    x = torch.randn(128, 8, generator=torch.Generator().manual_seed(0))
    for step in range(20):
        for m, opt, run in zip((model, twin), optimizers, (compiled, twin)):
            m.layer.sigma.fill_(2.0 * 0.8**step)
            resp, loss = run(x)
            opt.zero_grad()
            (loss + resp[:, 0].sum()).backward()
            opt.step()
        assert_allclose(
            model.layer.centers.detach().numpy(),
            twin.layer.centers.detach().numpy(),
            rtol=1e-4,
            atol=1e-5,
        )
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["recompiles"]
    assert not counters["graph_break"]


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_export_of_the_forward(activation):
    # Check that torch.export of the layer's forward, with a dynamic batch
    # size, gives the eager responsibilities at another batch size and at
    # another width.
    _, centers = _codes(2, dtype=torch.float32)
    layer = _layer(centers, 1.5, activation)
    z = _codes(3, n_samples=40, dtype=torch.float32)[0]
    batch = torch.export.Dim("batch")
    exported = torch.export.export(
        layer, (z[:10],), dynamic_shapes={"z": {0: batch}}
    ).module()
    assert_allclose(exported(z).detach().numpy(), layer(z).detach().numpy(), atol=1e-6)


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_autocast(activation, low):
    # Check that under autocast an encoder's low-precision codes meet the
    # float32 centres: forward, loss and backward run, computed in float32
    # (equal to the float32 computation on the same codes), the loss in
    # float32 and finite where float16 would overflow (|z| near 100, 64-D).
    gen = torch.Generator().manual_seed(0)
    encoder = torch.nn.Linear(64, 64)
    layer = RBFKMeansLayer(6, 64, sigma=30.0, activation=activation)
    x = 100.0 * torch.randn(32, 64, generator=gen)
    with torch.autocast("cpu", dtype=low):
        z = encoder(x)
        resp, loss = layer(z), layer.loss(z, reduction="mean")
    assert z.dtype == low and resp.dtype == low and loss.dtype == torch.float32
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(encoder.weight.grad).all()
    assert torch.isfinite(layer.centers.grad).all()
    codes = z.detach().float()
    eps = torch.finfo(low).eps
    assert_allclose(
        resp.float().detach().numpy(), layer(codes).detach().numpy(), atol=eps
    )
    expected = layer.loss(codes, reduction="mean").item()
    assert_allclose(loss.item(), expected, rtol=1e-6)


def _digits_codes(shift=0.0):
    """Standardised digits on 8 principal components (float32), plus ``shift``."""
    X = StandardScaler().fit_transform(load_digits().data)
    return torch.from_numpy(PCA(8, random_state=0).fit_transform(X) + shift).float()


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("ratio", [0.01, None], ids=["reseed", "no-reseed"])
def test_no_centre_stays_empty(ratio, activation):
    # Check that mini-batch training of the layer from the default start
    # (centres drawn from a standard normal) on codes away from the origin
    # (as an encoder's are) ends with every centre in use when the schedule
    # re-seeds dead centres, and with empty centres without.
    z = _digits_codes(shift=10.0)
    torch.manual_seed(0)
    layer = RBFKMeansLayer(10, z.shape[1], activation=activation)
    schedule = AnnealingSchedule(layer, cooling=0.8, reassignment_ratio=ratio)
    schedule.start(z)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(0)
    for _ in range(30):
        for rows in torch.randperm(z.shape[0], generator=gen).split(128):
            optimizer.zero_grad()
            layer.loss(z[rows], reduction="mean").backward()
            optimizer.step()
        schedule.step(z)
    counts = torch.bincount(layer.predict(z), minlength=10)
    if ratio is None:
        assert (counts == 0).sum() >= 3 and schedule.n_reseeded == 0
    else:
        assert (counts > 0).all() and schedule.n_reseeded >= 9


def test_reseed_moves_dead_centres_onto_costly_rows():
    # Check that dead centres move, in index order, onto rows of the codes
    # with a positive cost (never onto a row a centre already sits on), the
    # same rows for the same generator seed, and that live centres stay.
    z, centers = _codes(4)
    codes = torch.cat([z, centers])  # rows of cost 0: the centres themselves
    moves = []
    for _ in range(2):
        layer = _layer(torch.cat([centers, -1e3 * torch.ones(2, 4)]), 0.5, "entmax15")
        gen = torch.Generator().manual_seed(7)
        moved = layer.reseed_dead_centers(codes, generator=gen)
        assert moved.tolist() == [5, 6]
        assert_array_equal(layer.centers[:5].detach().numpy(), centers.numpy())
        new = layer.centers[5:].detach()
        at = (new[:, None, :] == z[None, :, :]).all(dim=2)
        assert at.any(dim=1).all() and not torch.equal(new[0], new[1])
        moves.append(new)
        # Every centre now has rows: nothing more to move.
        assert layer.reseed_dead_centers(codes, generator=gen).numel() == 0
    assert torch.equal(moves[0], moves[1])


def test_init_centers_is_kmeans_plusplus():
    # Check that init_centers draws scikit-learn's k-means++ centres.
    z = _digits_codes()[:300].double()
    layer = RBFKMeansLayer(7, z.shape[1], dtype=torch.float64)
    layer.init_centers(z, random_state=3)
    expected, _ = kmeans_plusplus(z.numpy(), 7, random_state=3)
    assert_array_equal(layer.centers.detach().numpy(), expected)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_second_derivatives_are_exact(activation, global_random_seed):
    # Check the loss's Hessian (double backward, and torch.func.hessian)
    # against central differences of its gradient, in z and in the centres.
    z, centers = _codes(global_random_seed, n_samples=6, n_features=2, n_clusters=3)

    def f(z, c):
        return rbf_kmeans_loss(z, c, 1.5, activation)

    def gradient(z, c):
        z, c = z.clone().requires_grad_(), c.clone().requires_grad_()
        f(z, c).backward()
        return torch.cat([z.grad.flatten(), c.grad.flatten()])

    n_z = z.numel()
    point = torch.cat([z.flatten(), centers.flatten()])
    eps = 1e-6
    columns = []
    for i in range(point.numel()):
        step = torch.zeros_like(point)
        step[i] = eps
        up, down = point + step, point - step
        columns.append(
            (
                gradient(up[:n_z].view_as(z), up[n_z:].view_as(centers))
                - gradient(down[:n_z].view_as(z), down[n_z:].view_as(centers))
            )
            / (2 * eps)
        )
    expected = torch.stack(columns, dim=1).numpy()
    H = torch.autograd.functional.hessian(f, (z, centers))
    got = torch.cat(
        [torch.cat([H[i][j].reshape(n_z if i == 0 else centers.numel(), -1)
                    for j in range(2)], dim=1) for i in range(2)]
    )  # fmt: skip
    scale = np.abs(expected).max()
    assert_allclose(got.numpy(), expected, atol=1e-6 * scale)
    H_func = torch.func.hessian(f)(z, centers)
    assert_allclose(
        H_func.reshape(n_z, n_z).numpy(), expected[:n_z, :n_z], atol=1e-6 * scale
    )


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_torch_func_transforms(activation, global_random_seed):
    # Check torch.func.grad, vmap and jvp of the loss against autograd: the
    # gradient, the loss of each batch of a stack, and the directional
    # derivative <grad, t>.
    z, centers = _codes(global_random_seed, n_samples=10)

    def f(z):
        return rbf_kmeans_loss(z, centers, 0.9, activation)

    leaf = z.clone().requires_grad_()
    f(leaf).backward()
    scale = leaf.grad.abs().max().item()
    assert_allclose(
        torch.func.grad(f)(z).numpy(), leaf.grad.numpy(), atol=1e-14 * scale
    )
    stack = torch.stack([z, 2 * z, z + 1])
    expected = torch.stack([f(s) for s in stack])
    assert_allclose(torch.func.vmap(f)(stack).numpy(), expected.numpy(), rtol=1e-14)
    t = torch.randn(z.shape, generator=torch.Generator().manual_seed(1), dtype=z.dtype)
    value, tangent = torch.func.jvp(f, (z,), (t,))
    assert_allclose(value.item(), f(z).item(), rtol=1e-15)
    assert_allclose(tangent.item(), (leaf.grad * t).sum().item(), rtol=1e-12)


@pytest.mark.parametrize("estimator", [KMeans, MiniBatchKMeans])
def test_from_scikit_learn_estimators(estimator, global_random_seed):
    # Check that a layer built from scikit-learn's KMeans or MiniBatchKMeans
    # predicts what the estimator predicts, at width 0.
    X = _digits_codes().double().numpy()
    fitted = estimator(n_clusters=6, n_init=3, random_state=global_random_seed).fit(X)
    layer = RBFKMeansLayer.from_estimator(fitted)
    assert float(layer.sigma) == 0.0 and layer.activation == "entmax15"
    z = torch.from_numpy(X)
    assert_array_equal(layer.predict(z).numpy(), fitted.predict(X))
    assert_array_equal(layer(z).detach().numpy(), np.eye(6)[fitted.predict(X)])


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_leading_dimensions(activation):
    # Check that inputs of shape (..., d) give the results of their rows
    # stacked as (n, d), as nn.Linear does.
    z, centers = _codes(5, n_samples=24)
    layer = _layer(centers, 1.0, activation)
    grid = z.reshape(2, 3, 4, -1)
    assert_array_equal(
        layer(grid).detach().numpy(), layer(z).detach().reshape(2, 3, 4, -1).numpy()
    )
    assert_array_equal(layer.predict(grid).numpy(), layer.predict(z).reshape(2, 3, 4))
    w = torch.rand(2, 3, 4, dtype=z.dtype, generator=torch.Generator().manual_seed(0))
    assert_allclose(
        layer.loss(grid, sample_weight=w).item(),
        layer.loss(z, sample_weight=w.reshape(-1)).item(),
        rtol=1e-15,
    )


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_a_nan_row_of_weight_zero_adds_nothing(activation):
    # Check that a NaN row given weight 0 leaves the loss and both gradients
    # those of the other rows (0 * NaN would make them NaN).
    z, centers = _codes(6)
    bad = torch.cat([z, torch.full((1, z.shape[1]), float("nan"), dtype=z.dtype)])
    w = torch.cat(
        [torch.ones(z.shape[0], dtype=z.dtype), torch.zeros(1, dtype=z.dtype)]
    )
    results = []
    for rows, weights in [(z, None), (bad, w)]:
        rows = rows.clone().requires_grad_()
        c = centers.clone().requires_grad_()
        loss = rbf_kmeans_loss(rows, c, 1.1, activation, sample_weight=weights)
        loss.backward()
        results.append((loss.item(), c.grad.numpy(), rows.grad[: z.shape[0]].numpy()))
    (l0, gc0, gz0), (l1, gc1, gz1) = results
    assert_allclose(l1, l0, rtol=1e-14)
    assert_allclose(gc1, gc0, rtol=1e-13, atol=1e-13 * np.abs(gc0).max())
    assert_allclose(gz1, gz0, rtol=1e-13, atol=1e-13 * np.abs(gz0).max())


def test_schedule_says_which_centres_it_moved():
    # Check that step records the indices of the centres it moved, which a
    # training loop needs to reset their optimiser state.
    z, centers = _codes(7)
    layer = _layer(torch.cat([centers, 1e3 * torch.ones(1, 4)]), 0.5, "entmax15")
    schedule = AnnealingSchedule(layer, cooling=0.9)
    schedule.start(z)
    schedule.step(z)
    assert schedule.last_reseeded.tolist() == [5] and schedule.n_reseeded == 1
    schedule.step(z)
    assert schedule.last_reseeded.numel() == 0 and schedule.n_reseeded == 1


def test_compiled_loss_with_a_float_width():
    # Check that the functional loss compiles with fullgraph=True when the
    # width is a number (a constant of the graph) and equals eager.
    z, centers = _codes(8, dtype=torch.float32)
    torch._dynamo.reset()

    def f(z, c):
        return rbf_kmeans_loss(z, c, 0.7, "softmax")

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert_allclose(compiled(z, centers).item(), f(z, centers).item(), rtol=1e-6)


@pytest.mark.parametrize(
    "dtype, scales",
    [
        (torch.float64, [1e-300, 1e-150, 1.0, 1e150, 1e300]),
        (torch.float32, [1e-30, 1e-15, 1.0, 1e15, 1e30]),
    ],
    ids=["float64", "float32"],
)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_extreme_scales_and_widths(activation, dtype, scales):
    # Check that at data scales across the dtype's range and widths from 0
    # to 1e300 times the data's scale the responsibilities are finite and
    # sum to 1, the gradients are finite, and the loss is finite wherever
    # its value (30 rows of squared distances) is below the dtype's maximum.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    C = X[:4] + 0.1
    finfo = torch.finfo(dtype)
    for scale in scales:
        for width in [0.0, 1e-300, 1e-30, 1e-8, 1.0, 1e8, 1e30, 1e300]:
            sigma = min(width * scale, finfo.max)
            z = torch.tensor(X * scale, dtype=dtype, requires_grad=True)
            c = torch.tensor(C * scale, dtype=dtype, requires_grad=True)
            layer = _layer(c.detach(), sigma, activation)
            resp = layer(z).detach()
            assert torch.isfinite(resp).all()
            assert_allclose(resp.sum(dim=1).numpy(), 1.0, rtol=4 * finfo.eps)
            loss = rbf_kmeans_loss(z, c, sigma, activation)
            loss.backward()
            assert torch.isfinite(z.grad).all() and torch.isfinite(c.grad).all()
            if scale < (finfo.max / 3000.0) ** 0.5:
                assert torch.isfinite(loss)


@settings(max_examples=40, deadline=None)
@given(
    data=arrays(
        np.float64,
        st.tuples(st.integers(1, 12), st.integers(1, 4)),
        elements=st.floats(-1e3, 1e3),
    ),
    n_clusters=st.integers(1, 5),
    shift=st.floats(-1e6, 1e6),
    sigma=st.floats(1e-3, 1e3),
    activation=st.sampled_from(ACTIVATIONS),
)
def test_invariants(data, n_clusters, shift, sigma, activation):
    # Check the invariants of the layer: rows sum to one; a permutation of
    # the rows permutes the outputs; a common translation of rows and
    # centres changes no responsibility and no label (to rounding of the
    # translated values).
    z = torch.from_numpy(data)
    centers = (
        z[torch.arange(n_clusters) % z.shape[0]]
        + 0.5 * torch.arange(n_clusters, dtype=z.dtype)[:, None]
    )
    layer = _layer(centers, sigma, activation)
    resp = layer(z).detach()
    assert_allclose(resp.sum(dim=1).numpy(), 1.0, rtol=1e-12)
    order = torch.arange(z.shape[0]).flip(0)
    assert_allclose(layer(z[order]).detach().numpy(), resp[order].numpy(), atol=1e-12)
    moved = _layer(centers + shift, sigma, activation)
    # Rounding of the translated values: eps (|shift| + |z|) per coordinate,
    # times the distances' scale |z| over the temperature; examples where
    # that says nothing are skipped.
    size = 1.0 + float(z.abs().max())
    tol = 1e-13 * (abs(shift) + size) * size / sigma**2
    assume(tol < 1e-4)
    assert_allclose(moved(z + shift).detach().numpy(), resp.numpy(), atol=tol + 1e-12)
