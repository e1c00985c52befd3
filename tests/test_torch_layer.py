"""Tests of RBFKMeansLayer and AnnealingSchedule.

Oracles: the fitted NumPy estimators (``predict``, ``predict_proba``, the
annealing's first width ``sigma_path_[0]``), the package's certificate of a
K-Means fixed point (``_iterations.certify``), explicit cluster means and
scikit-learn's KMeans.
"""

import io
import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

import skrbfkmeans  # noqa: E402
from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans  # noqa: E402
from skrbfkmeans._engine.passes import data_offset, squared_norms  # noqa: E402
from skrbfkmeans._iterations import certify  # noqa: E402
from skrbfkmeans._rows import MemoryRows  # noqa: E402
from skrbfkmeans.torch import (  # noqa: E402
    AnnealingSchedule,
    RBFKMeansLayer,
    rbf_kmeans_loss,
)

ACTIVATIONS = ["softmax", "entmax15"]
from _torch_common import DEVICES, one_torch_thread  # noqa: E402, F401


def _blobs(seed, n_per_blob=50, side=8.0):
    """Four unit Gaussian blobs at the corners of a square, and their labels."""
    rng = np.random.default_rng(seed)
    corners = side * np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y = np.repeat(np.arange(4), n_per_blob)
    return corners[y] + rng.standard_normal((y.size, 2)), y


def _layer(activation="entmax15", sigma=0.9, seed=0, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    layer = RBFKMeansLayer(4, 2, sigma=sigma, activation=activation, dtype=dtype)
    with torch.no_grad():
        layer.centers.copy_(8 * torch.rand(4, 2, generator=gen, dtype=dtype))
    return layer


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("estimator", ["RBFKMeans", "AnnealedRBFKMeans"])
def test_from_estimator_matches_estimator(estimator, activation, global_random_seed):
    # Check that a layer built from a fitted estimator has its centres, width
    # and activation, predicts its labels and gives its predict_proba.
    X, _ = _blobs(global_random_seed)
    if estimator == "RBFKMeans":
        est = RBFKMeans(n_clusters=4, sigma=1.5, activation=activation)
    else:
        est = AnnealedRBFKMeans(n_clusters=4, activation=activation)
    est.set_params(random_state=global_random_seed).fit(X)
    layer = RBFKMeansLayer.from_estimator(est)
    assert layer.activation == activation
    assert float(layer.sigma) == est.sigma_ and layer.sigma.dtype == torch.float64
    assert_array_equal(layer.centers.detach().numpy(), est.cluster_centers_)
    z = torch.from_numpy(X)
    assert_array_equal(layer.predict(z).numpy(), est.predict(X))
    resp = layer(z).detach().numpy()
    assert_allclose(resp, est.predict_proba(X), rtol=1e-12, atol=1e-13)


def test_from_estimator_chosen_activation():
    # Check that AnnealedRBFKMeans(activation="auto") hands over the
    # activation its fit ended with, not "auto".
    X, _ = _blobs(0)
    est = AnnealedRBFKMeans(n_clusters=4, activation="auto", random_state=0).fit(X)
    layer = RBFKMeansLayer.from_estimator(est)
    assert layer.activation == est._final_activation() != "auto"


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_from_estimator_at_zero_width(activation, global_random_seed):
    # Check that RBFKMeans(sigma=0) (KMeans's fit) gives a layer at width 0:
    # one-hot responsibilities at the labels and the inertia as loss.
    X, _ = _blobs(global_random_seed)
    est = RBFKMeans(n_clusters=4, sigma=0, activation=activation)
    est.set_params(random_state=global_random_seed).fit(X)
    layer = RBFKMeansLayer.from_estimator(est)
    assert float(layer.sigma) == 0.0
    z = torch.from_numpy(X)
    assert_array_equal(layer(z).detach().numpy(), np.eye(4)[est.labels_])
    assert_allclose(layer.loss(z).item(), est.inertia_, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_to_estimator_round_trip(activation, dtype, global_random_seed):
    # Check that to_estimator gives a fitted RBFKMeans with the layer's
    # centres (bit for bit), width and activation, whose predict equals the
    # layer's and predict_proba its forward; and back to the same layer.
    X, _ = _blobs(global_random_seed)
    layer = _layer(activation, sigma=1.7, seed=global_random_seed, dtype=dtype)
    est = layer.to_estimator()
    assert isinstance(est, RBFKMeans)
    assert est.activation == activation and est.sigma == est.sigma_ == float(
        layer.sigma
    )
    assert_array_equal(est.cluster_centers_, layer.centers.detach().numpy())
    z = torch.from_numpy(X).to(dtype)
    assert_array_equal(
        est.predict(X.astype(est.cluster_centers_.dtype)), layer.predict(z)
    )
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    expected = est.predict_proba(X.astype(est.cluster_centers_.dtype))
    assert_allclose(layer(z).detach().numpy(), expected, rtol=tol, atol=tol)
    back = RBFKMeansLayer.from_estimator(est)
    assert back.activation == activation and back.centers.dtype == dtype
    assert_array_equal(back.centers.detach().numpy(), layer.centers.detach().numpy())
    assert float(back.sigma) == float(layer.sigma)


def test_state_dict_round_trip():
    # Check that state_dict (through torch.save / torch.load) carries the
    # centres, the width and the activation into a fresh layer.
    layer = _layer("softmax", sigma=0.7, seed=3)
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    other = RBFKMeansLayer(4, 2, dtype=torch.float64)  # entmax15, sigma 1
    other.load_state_dict(torch.load(buffer))
    assert other.activation == "softmax" and float(other.sigma) == 0.7
    assert_array_equal(other.centers.detach().numpy(), layer.centers.detach().numpy())
    z = torch.from_numpy(_blobs(0)[0])
    assert torch.equal(other(z), layer(z))
    assert set(layer.state_dict()) == {"centers", "sigma", "_extra_state"}


@pytest.mark.parametrize("device", DEVICES)
def test_to_device_and_dtype(device):
    # Check that .to moves and casts the centres and the width together, and
    # that the layer then works on codes of that device and dtype.
    layer = _layer("entmax15", sigma=1.2).to(device, torch.float32)
    assert layer.centers.dtype == layer.sigma.dtype == torch.float32
    assert layer.centers.device.type == layer.sigma.device.type == device
    assert isinstance(layer.centers, torch.nn.Parameter)
    z = torch.from_numpy(_blobs(0)[0]).to(device, torch.float32)
    resp = layer(z)
    assert resp.dtype == torch.float32 and resp.device.type == device
    assert layer.predict(z).dtype == torch.int64
    with pytest.raises(ValueError, match="same dtype and device"):
        layer(z.double())


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_device_matches_numpy(device, activation, global_random_seed):
    # Check that on each device the forward, the loss with its gradients and
    # predict equal the NumPy package in float64 (the map of the explicit
    # distances, rbf_kmeans_loss, the nearest centre): to 1e-12 in float64,
    # to float32's precision in float32.
    X, _ = _blobs(global_random_seed)
    layer64 = _layer(activation, seed=global_random_seed)
    C = layer64.centers.detach().numpy()
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    s = -(d - d.min(axis=1, keepdims=True)) / (2 * 0.9**2)
    if activation == "softmax":
        resp = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    else:
        resp = skrbfkmeans.entmax15(s, axis=1)
    loss, grad_c, grad_x = skrbfkmeans.rbf_kmeans_loss(
        X, C, sigma=0.9, activation=activation, return_gradient=True
    )
    expected = [resp, loss, grad_c, grad_x]
    for dtype, tol in [(torch.float64, 1e-12), (torch.float32, 2e-5)]:
        layer = _layer(activation, seed=global_random_seed).to(device, dtype)
        z = torch.from_numpy(X).to(device, dtype).requires_grad_()
        out = layer(z)
        value = layer.loss(z)
        value.backward()
        got = [out, value, layer.centers.grad, z.grad]
        for g, ref in zip(got, expected):
            g = g.detach().cpu().double().numpy()
            assert_allclose(g, ref, rtol=tol, atol=tol * np.abs(ref).max())
        assert_array_equal(layer.predict(z).cpu().numpy(), d.argmin(axis=1))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_gradcheck(activation, global_random_seed):
    # Check the forward's backward (the map's closed-form Jacobian through
    # the scores) against finite differences, in the codes and the centres.
    X, _ = _blobs(global_random_seed, n_per_blob=3)
    layer = _layer(activation, sigma=3.0, seed=global_random_seed)
    z = torch.from_numpy(X).requires_grad_()

    def f(z, centers):
        return torch.func.functional_call(layer, {"centers": centers}, (z,))

    centers = layer.centers.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(f, (z, centers))


def test_loss_is_the_function():
    # Check that layer.loss is rbf_kmeans_loss with the layer's state.
    X, _ = _blobs(0)
    z, w = torch.from_numpy(X), torch.linspace(0.5, 2.0, len(X), dtype=torch.float64)
    layer = _layer("entmax15", sigma=1.1)
    expected = rbf_kmeans_loss(z, layer.centers, 1.1, "entmax15", w, "mean")
    assert layer.loss(z, w, reduction="mean").item() == expected.item()


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_schedule_starts_where_the_estimator_does(activation, weighted):
    # Check that start(z) is AnnealedRBFKMeans's first width: just above the
    # first critical width of the (weighted) codes.
    X, _ = _blobs(1)
    X = X * [3.0, 1.0]
    w = np.linspace(0.2, 3.0, len(X)) if weighted else None
    est = AnnealedRBFKMeans(n_clusters=4, activation=activation, random_state=0)
    est.fit(X, sample_weight=w)
    layer = RBFKMeansLayer(4, 2, activation=activation, dtype=torch.float64)
    schedule = AnnealingSchedule(layer)
    sw = None if w is None else torch.from_numpy(w)
    sigma = schedule.start(torch.from_numpy(X), sample_weight=sw)
    assert_allclose(sigma, est.sigma_path_[0], rtol=1e-12)
    assert float(layer.sigma) == sigma and schedule.sigma == sigma


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_schedule_cools_until_one_hot(activation, global_random_seed):
    # Check that each step multiplies the width by cooling, that the schedule
    # is done at the first width where every row is one-hot (and not
    # before), and that it stays there.
    X, _ = _blobs(global_random_seed)
    z = torch.from_numpy(X)
    layer = _layer(activation, seed=global_random_seed)
    with torch.no_grad():
        layer.centers.copy_(8 * torch.tensor([[0.0, 0.0], [1, 0], [0, 1], [1, 1]]))
    schedule = AnnealingSchedule(layer, cooling=0.7)
    sigma0 = schedule.start(z)
    widths = [sigma0]
    while not schedule.done:
        widths.append(schedule.step(z))
        assert len(widths) < 200
    n = len(widths) - 1
    assert schedule.n_steps == n
    assert_allclose(widths, sigma0 * 0.7 ** np.arange(n + 1), rtol=1e-14)
    d = torch.cdist(z, layer.centers.detach()) ** 2
    two = torch.topk(d, 2, largest=False).values
    margin = float((two[:, 1] - two[:, 0]).min())
    eps = np.finfo(np.float64).eps
    hard = 4.0 if activation == "entmax15" else 2.0 * math.log(2.0 / eps)
    assert margin >= hard * widths[-1] ** 2
    assert margin < hard * widths[-2] ** 2
    resp = layer(z).detach()
    if activation == "entmax15":
        assert bool((resp.amax(dim=1) == 1).all())
    assert schedule.step(z) == widths[-1] and schedule.n_steps == n


def test_schedule_floor_and_without_layer():
    # Check sigma_end (a floor where the schedule stops) and the schedule
    # without a layer (widths only; centres passed to step).
    z = torch.from_numpy(_blobs(0)[0])
    schedule = AnnealingSchedule(cooling=0.5, sigma_end=1.0)
    sigma = schedule.start(z)
    widths = [schedule.step() for _ in range(10)]
    assert schedule.done and widths[-1] == 1.0
    assert widths[0] == 0.5 * sigma
    centers = torch.tensor([[0.0, 0.0], [8, 0], [0, 8], [8, 8]], dtype=torch.float64)
    schedule = AnnealingSchedule(cooling=0.5)
    schedule.start(z)
    while not schedule.done:
        schedule.step(z, centers=centers)
    resp = rbf_kmeans_loss(z, centers, schedule.sigma, "entmax15")
    assert torch.isfinite(resp)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: AnnealingSchedule(cooling=1.0), ValueError, "cooling"),
        (lambda: AnnealingSchedule(cooling=0), ValueError, "cooling"),
        (lambda: AnnealingSchedule("layer"), TypeError, "RBFKMeansLayer"),
        (lambda: AnnealingSchedule(activation="relu"), ValueError, "activation"),
        (lambda: AnnealingSchedule().step(), RuntimeError, "start"),
        (lambda: AnnealingSchedule().start(torch.ones(5, 2)), ValueError, "spread"),
        (
            lambda: AnnealingSchedule(RBFKMeansLayer(2, 2), activation="softmax"),
            ValueError,
            "differs",
        ),
        (lambda: RBFKMeansLayer(0, 2), ValueError, "n_clusters"),
        (lambda: RBFKMeansLayer(2, 2.5), ValueError, "n_features"),
        (lambda: RBFKMeansLayer(2, 2, sigma=-1), ValueError, "sigma"),
        (lambda: RBFKMeansLayer(2, 2, activation="relu"), ValueError, "activation"),
        (lambda: RBFKMeansLayer(2, 3)(torch.ones(4, 2)), ValueError, "features"),
        (
            lambda: RBFKMeansLayer.from_estimator(RBFKMeans(n_clusters=2)),
            NotFittedError,
            "not fitted",
        ),
    ],
    ids=[
        "cooling-1",
        "cooling-0",
        "layer-type",
        "activation",
        "step-before-start",
        "constant-codes",
        "activation-mismatch",
        "n_clusters",
        "n_features",
        "sigma",
        "layer-activation",
        "layer-features",
        "unfitted",
    ],
)
def test_invalid_input_raises(call, error, match):
    # Check that invalid arguments raise a clear error naming the problem.
    with pytest.raises(error, match=match):
        call()


def _certified(X, centers, sigma):
    """The package's certificate of a K-Means fixed point at width sigma."""
    w = np.ones(len(X))
    offset = data_offset(X, w)
    rows = MemoryRows(X, w, offset, squared_norms(X, offset))
    return certify(rows, np.array(centers), sigma)


@pytest.mark.parametrize("optimizer", ["Adam", "SGD"])
def test_training_ends_on_a_kmeans_fixed_point(optimizer, global_random_seed):
    # Check the layer trained alone with torch.optim under the schedule: from
    # centres all near the mean of four blobs, the annealed training ends
    # with every row one-hot, centres that are the means of their clusters,
    # certified by the package, KMeans's partition and inertia.
    X, y = _blobs(global_random_seed)
    z = torch.from_numpy(X)
    gen = torch.Generator().manual_seed(global_random_seed)
    layer = RBFKMeansLayer(4, 2, dtype=torch.float64)
    with torch.no_grad():
        noise = torch.randn(4, 2, generator=gen, dtype=torch.float64)
        layer.centers.copy_(z.mean(dim=0) + 0.01 * noise)
    schedule = AnnealingSchedule(layer, cooling=0.8)
    schedule.start(z)
    if optimizer == "Adam":
        opt = torch.optim.Adam(layer.parameters(), lr=0.05)
    else:
        opt = torch.optim.SGD(layer.parameters(), lr=0.5, momentum=0.5)
    while not schedule.done:
        for _ in range(10):
            opt.zero_grad()
            layer.loss(z, reduction="mean").backward()
            opt.step()
        schedule.step(z)
        assert schedule.n_steps < 60
    # Finish with the gradient steps at the per-cluster rate 1 / (2 N_j):
    # each is an EM (here Lloyd) step; stop when the labels stay and the
    # centres no longer move.
    em = torch.optim.SGD(layer.parameters(), lr=1.0)
    for _ in range(20):
        labels, before = layer.predict(z), layer.centers.detach().clone()
        em.zero_grad()
        layer.loss(z).backward()
        N = layer(z).detach().sum(dim=0)
        layer.centers.grad /= 2.0 * N[:, None]
        em.step()
        moved = float((layer.centers.detach() - before).abs().max())
        if torch.equal(labels, layer.predict(z)) and moved <= 1e-14 * 8:
            break
    sigma = float(layer.sigma)
    C = layer.centers.detach().numpy()
    labels = layer.predict(z).numpy()
    # Every row exactly one-hot at the final width: the layer is K-Means.
    assert_array_equal(layer(z).detach().numpy(), np.eye(4)[labels])
    means = np.array([X[labels == j].mean(axis=0) for j in range(4)])
    assert_allclose(C, means, rtol=1e-14, atol=1e-14 * 8)
    certified_sigma, certified = _certified(X, C, sigma)
    assert certified and certified_sigma == sigma
    assert adjusted_rand_score(y, labels) == 1.0
    km = KMeans(n_clusters=4, n_init=10, random_state=global_random_seed).fit(X)
    inertia = float(((X - C[labels]) ** 2).sum())
    assert_allclose(inertia, km.inertia_, rtol=1e-12)


def _run(code):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )


def test_import_skrbfkmeans_never_imports_torch():
    # Check that the package and every public name of it load without
    # PyTorch, even where it is installed.
    result = _run(
        "import sys, skrbfkmeans\n"
        "[getattr(skrbfkmeans, name) for name in skrbfkmeans.__all__]\n"
        "print('torch' in sys.modules)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_without_torch_the_error_names_the_extra():
    # Check that importing skrbfkmeans.torch where PyTorch cannot be imported
    # raises an ImportError that says how to install the extra.
    result = _run(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "try:\n"
        "    import skrbfkmeans.torch\n"
        "except ImportError as err:\n"
        "    print(err)\n"
    )
    assert result.returncode == 0, result.stderr
    assert 'pip install "skrbfkmeans[torch]"' in result.stdout
