"""The PyTorch section of the user guide, run as written.

The section under ``.. _torch-layer:`` in ``doc/user_guide.rst`` shows its
code in ``.. code-block:: python`` blocks rather than doctests, so that the
user guide's doctests run without PyTorch. This module reads those blocks
from the file and runs them in order, in one namespace, as a reader pasting
them into a session would: the training loop first (a module fixture), then
each later block, which uses the loop's names only. What the text around a
block says of its result is checked after it runs.
"""

import functools
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

from _torch_common import one_torch_thread  # noqa: E402, F401
from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import normalized_mutual_info_score  # noqa: E402

USER_GUIDE = Path(__file__).resolve().parents[1] / "doc" / "user_guide.rst"


def _section_blocks():
    """``(id, code)`` of each Python block of the torch section, in order.

    The id is the subsection's title, lower-case with dashes, and the
    block's number within it. The section ends at the next title underlined
    with dashes (a section of the same level).
    """
    lines = USER_GUIDE.read_text(encoding="utf-8").splitlines()
    i = lines.index(".. _torch-layer:") + 4  # the label, a blank, the title
    blocks, title, count = [], "intro", 0
    while i < len(lines) - 1:
        line, below = lines[i], lines[i + 1]
        if line and below and len(below) >= len(line) and set(below) <= {"-", "~"}:
            if set(below) == {"-"}:
                break
            title, count = "-".join(line.lower().split()), 0
            i += 2
            continue
        if line.strip() == ".. code-block:: python":
            i += 1
            body = []
            while i < len(lines) and (not lines[i] or lines[i].startswith("   ")):
                body.append(lines[i])
                i += 1
            count += 1
            blocks.append((f"{title}-{count}", textwrap.dedent("\n".join(body))))
            continue
        i += 1
    return blocks


BLOCKS = _section_blocks()
TRAINING_LOOP = "a-training-loop-1"


@pytest.fixture(scope="module")
def guide():
    """The namespace of the training loop, run once, and its time in seconds."""
    n_threads = torch.get_num_threads()
    # The time the user guide quotes is that of one thread.
    torch.set_num_threads(1)
    try:
        namespace = {"__name__": "user_guide"}
        start = time.perf_counter()
        exec(dict(BLOCKS)[TRAINING_LOOP], namespace)
        namespace["_seconds"] = time.perf_counter() - start
    finally:
        torch.set_num_threads(n_threads)
    return namespace


def test_the_section_has_the_blocks_checked_here():
    # Check that every block of the section has its check below and every
    # check its block: a renamed subsection or a new block fails here
    # instead of running unchecked.
    assert [name for name, _ in BLOCKS] == [TRAINING_LOOP, *CHECKS]


def test_training_loop_clusters_the_digits(guide):
    # Check that the training loop runs as written and that its layer
    # clusters: labels of every digit, none -1, every centre used (by 15
    # digits or more at seed 0, 10 asserted), an NMI above that of the same
    # start without the layer's loss (0.53-0.59 over seeds 0-5; 0.60 with
    # it at seed 0), and centres that are a K-Means solution of the final
    # codes: their inertia within 1.5 times KMeans(n_init=10)'s (1.28 at
    # seed 0; 1.7-1.9 for the centres of the run without the layer's loss).
    layer, encode, X, y = guide["layer"], guide["encode"], guide["X"], guide["y"]
    labels = guide["labels"].numpy()
    assert labels.shape == (1797,)
    assert labels.min() >= 0
    assert np.bincount(labels, minlength=10).min() >= 10
    assert normalized_mutual_info_score(y, labels) > 0.55
    codes = encode(X)
    centers = layer.centers.detach()
    inertia = float(((codes - centers[guide["labels"]]) ** 2).sum())
    kmeans = KMeans(n_clusters=10, n_init=10, random_state=0).fit(codes.numpy())
    assert inertia < 1.5 * kmeans.inertia_
    schedule = guide["schedule"]
    assert 0 < schedule.n_steps <= 20
    assert_allclose(float(layer.sigma), schedule.sigma, rtol=1e-6)
    # "About 2 s on one thread": a generous bound, for a busy machine.
    assert guide["_seconds"] < 60


def _check_mixed_precision(ns):
    # bfloat16 codes, float32 loss and centres' gradient; the
    # responsibilities are the float32 ones rounded to bfloat16.
    layer, z = ns["layer"], ns["z"]
    assert z.dtype == torch.bfloat16
    assert ns["cluster_loss"].dtype == torch.float32
    assert layer.centers.grad.dtype == torch.float32
    with torch.no_grad():
        resp = layer(z)
        expected = layer(z.float()).to(torch.bfloat16)
    assert resp.dtype == torch.bfloat16
    assert torch.equal(resp, expected)


def _check_compiled(ns):
    # One graph for the three widths (recompiling raises, see the test);
    # the compiled loss equals the eager one at the last width.
    from torch._dynamo.utils import counters

    assert counters["stats"]["unique_graphs"] == 1
    encoder, decoder, layer, X = ns["encoder"], ns["decoder"], ns["layer"], ns["X"]
    x = X[:128]
    z = encoder(x)
    eager = torch.nn.functional.mse_loss(decoder(z), x) + ns["lam"] * layer.loss(
        z, reduction="mean"
    )
    assert_allclose(ns["training_loss"](x).item(), eager.item(), rtol=1e-5)


def _check_exported(ns):
    # The exported program gives the eager model's responsibilities.
    model, X = ns["model"], ns["X"]
    with torch.no_grad():
        expected = model(X[256:512])
    assert_allclose(ns["resp"].detach().numpy(), expected.numpy(), atol=1e-6)


def _check_reseeded(ns):
    # Centre 3 alone moved, onto a code, its Adam momentum zeroed; the
    # centres' other rows of the momentum kept.
    layer, encode, X = ns["layer"], ns["encode"], ns["X"]
    assert ns["moved"].tolist() == [3]
    codes = encode(X)
    assert (codes == layer.centers[3].detach()).all(dim=1).any()
    exp_avg = ns["optimizer"].state[layer.centers]["exp_avg"]
    assert not exp_avg[3].any()
    assert exp_avg[[0, 1, 2, 4]].any()


def _check_independent_rows(ns):
    # -1 for the NaN row, NaN responsibilities there only; the other rows'
    # labels and responsibilities as in a batch without it.
    layer, z = ns["layer"], ns["z"]
    labels = layer.predict(z)
    assert labels[1] == -1
    assert_array_equal(labels[[0, 2, 3]].numpy(), layer.predict(z[[0, 2, 3]]).numpy())
    with torch.no_grad():
        resp = layer(z)
        alone = layer(z[[0, 2, 3]])
    assert torch.isnan(resp[1]).all()
    assert_allclose(resp[[0, 2, 3]].numpy(), alone.numpy(), rtol=1e-6, atol=1e-7)
    assert layer(z.reshape(2, 2, 10)).shape == (2, 2, 10)


def _check_estimators(ns):
    # The layer from KMeans: float32, width 0, entmax-1.5, KMeans's labels;
    # the estimator from the layer: the layer's labels.
    hard, kmeans, codes = ns["hard"], ns["kmeans"], ns["codes"]
    assert hard.centers.dtype == torch.float32
    assert float(hard.sigma) == 0.0 and hard.activation == "entmax15"
    assert_array_equal(hard.predict(codes).numpy(), kmeans.labels_)
    assert_array_equal(
        ns["fitted"].predict(codes.numpy()), ns["layer"].predict(codes).numpy()
    )


def _check_higher_derivatives(ns):
    # The Hessian in the centres is symmetric and equals central differences
    # of the gradient (an independent oracle, float64); the per-row
    # gradients of vmap are the rows of the batch's gradient.
    rbf_kmeans_loss = ns["rbf_kmeans_loss"]
    z, centers, sigma, H = ns["z"], ns["centers"], ns["sigma"], ns["H"]
    H = H.reshape(centers.numel(), centers.numel())
    assert_allclose(H.numpy(), H.T.numpy(), atol=1e-10)

    def gradient(c):
        c = c.clone().requires_grad_()
        (g,) = torch.autograd.grad(rbf_kmeans_loss(z, c, sigma, "entmax15"), c)
        return g.flatten()

    eps = 1e-6
    for index in (0, 13, 57, 99):
        step = torch.zeros(centers.numel(), dtype=torch.float64)
        step[index] = eps
        step = step.reshape(centers.shape)
        column = (gradient(centers + step) - gradient(centers - step)) / (2 * eps)
        assert_allclose(H[:, index].numpy(), column.numpy(), rtol=1e-5, atol=1e-5)
    per_row = ns["per_row"](z, centers, sigma, "entmax15")
    z_grad = z.clone().requires_grad_()
    (batch,) = torch.autograd.grad(
        rbf_kmeans_loss(z_grad, centers, sigma, "entmax15"), z_grad
    )
    assert_allclose(per_row.numpy(), batch.numpy(), rtol=1e-12, atol=1e-12)


# The blocks after the training loop, in the user guide's order.
CHECKS = {
    "mixed-precision-1": _check_mixed_precision,
    "compiling-and-exporting-1": _check_compiled,
    "compiling-and-exporting-2": _check_exported,
    "dead-centres-and-initialisation-1": _check_reseeded,
    "rows-are-independent-of-their-batch-1": _check_independent_rows,
    "the-layer-and-the-estimators-1": _check_estimators,
    "higher-derivatives-and-torch.func-1": _check_higher_derivatives,
}


# PyTorch's forward-mode decompositions, loaded at the first jvp (vmap of
# grad, AOT autograd), are TorchScript functions: loading them warns.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
@pytest.mark.parametrize("name", list(CHECKS))
def test_section_block_runs_and_does_what_it_says(guide, name, monkeypatch):
    # Check that the block runs as written after the training loop, and
    # what the text says of its result.
    code = dict(BLOCKS)[name]
    namespace = dict(guide)
    if name == "compiling-and-exporting-1":
        import torch._dynamo
        from torch._dynamo.utils import counters

        # The aot_eager backend traces the block as the default one does
        # (dynamo with fullgraph, then AOT autograd) but skips inductor's
        # code generation, which takes tens of seconds and tests PyTorch
        # rather than the layer. Recompiling for a new width raises.
        torch._dynamo.reset()
        counters.clear()
        compile_ = functools.partial(torch.compile, backend="aot_eager")
        monkeypatch.setattr(torch, "compile", compile_)
        with torch._dynamo.config.patch(error_on_recompile=True):
            exec(code, namespace)
            CHECKS[name](namespace)
        torch._dynamo.reset()
        return
    exec(code, namespace)
    CHECKS[name](namespace)
