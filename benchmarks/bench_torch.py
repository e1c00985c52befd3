"""Time the PyTorch maps, loss and layer, forward and backward, on one CPU thread.

One batch of 4096 codes in 64-D (float32) against k = 64 and k = 512
centres drawn from the codes, at a low temperature (``sigma = 0.25``: most
entmax rows one-hot) and a high one (``sigma = 4``: dense rows). Each
measurement is a forward pass and a backward pass from a random upstream
gradient (the maps and the layer's forward) or from the scalar (the losses).

- Maps, on the scores ``-||z - c||^2 / (2 sigma^2)``: ``entmax15`` and
  ``sparsemax`` of ``skrbfkmeans.torch`` against the same maps of the
  ``entmax`` package (when it is installed) and ``torch.softmax``.
- Loss, from the codes and the centres (the distances are part of the
  timed work): ``skrbfkmeans.torch.rbf_kmeans_loss`` with either activation
  against ``F.cross_entropy`` on the n x k logits computed from the same
  distances (a classifier head of the same shape), and against the NumPy
  ``skrbfkmeans.rbf_kmeans_loss`` with its gradients.
- Batch sizes: ``entmax15`` against the ``entmax`` package's for 64 to
  65536 rows of k = 10 and k = 64 scores (codes in 16-D, ``sigma = 0.5``:
  about one centre per row, and ``sigma = 2``: 4-5 of 10, about 12 of
  64), where the per-call cost of the small batches shows.
- Layer: ``RBFKMeansLayer(k, d, activation="softmax")``, its forward
  (``layer(z)``) and its loss (``layer.loss(z)``), each with its backward
  into the codes and the centres, eager and under ``torch.compile(
  fullgraph=True)`` (not with ``--smoke``), against plain torch,
  ``torch.softmax(-torch.cdist(z, c) ** 2 / (2 sigma^2))`` with its
  backward, at 256 x 64 codes with k = 10 and at larger sizes.

Functions are timed in interleaved rounds after one warm-up call, with one
PyTorch thread and one BLAS thread; the tables give the median and its
ratios to the references measured in the same rounds.

Run: ``python benchmarks/bench_torch.py [--repeat 7] [--smoke]``; ``--smoke``
runs tiny shapes once (a few seconds), to check that the script works.
Without PyTorch it says so and exits with status 0.
"""

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

import skrbfkmeans

try:
    import torch
    import torch.nn.functional as F

    from skrbfkmeans.torch import (
        RBFKMeansLayer,
        entmax15,
        rbf_kmeans_loss,
        sparsemax,
    )
except ImportError:
    torch = None

try:
    import entmax as entmax_package
except ImportError:
    entmax_package = None


def codes_and_centers(n_samples, n_features, n_clusters, seed=0):
    """Gaussian codes and ``n_clusters`` of them as centres (float32)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(n_samples, n_features, generator=gen)
    centers = z[torch.randperm(n_samples, generator=gen)[:n_clusters]].clone()
    return z, centers


def squared_distances(z, centers):
    """``||z_i - c_j||^2``, clipped at 0 (the expansion may round below)."""
    d = (z * z).sum(1, keepdim=True) - 2 * z @ centers.T + (centers * centers).sum(1)
    return d.clamp_min(0)


def time_rounds(funcs, repeat):
    """Median seconds of each function, timed in interleaved rounds."""
    for f in funcs.values():
        f()
    times = {name: [] for name in funcs}
    for _ in range(repeat):
        for name, f in funcs.items():
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(ts)) for name, ts in times.items()}


def map_funcs(scores, upstream):
    """Forward + backward of each map on a leaf copy of ``scores``."""

    def run(f):
        def call():
            s = scores.detach().requires_grad_()
            f(s).backward(upstream)

        return call

    funcs = {
        "torch.softmax": run(lambda s: torch.softmax(s, dim=-1)),
        "entmax15": run(entmax15),
        "sparsemax": run(sparsemax),
    }
    if entmax_package is not None:
        funcs["entmax.entmax15"] = run(entmax_package.entmax15)
        funcs["entmax.sparsemax"] = run(entmax_package.sparsemax)
    return funcs


def loss_funcs(z, centers, sigma, target):
    """Forward + backward of the losses in both the codes and the centres."""
    z_np, centers_np = z.numpy(), centers.numpy()

    def leaves():
        return z.detach().requires_grad_(), centers.detach().requires_grad_()

    def cross_entropy():
        zl, cl = leaves()
        logits = -squared_distances(zl, cl) / (2 * sigma**2)
        F.cross_entropy(logits, target, reduction="sum").backward()

    def torch_loss(activation):
        def call():
            zl, cl = leaves()
            rbf_kmeans_loss(zl, cl, sigma, activation=activation).backward()

        return call

    def numpy_loss(activation):
        def call():
            skrbfkmeans.rbf_kmeans_loss(
                z_np,
                centers_np,
                sigma=sigma,
                activation=activation,
                return_gradient=True,
            )

        return call

    return {
        "F.cross_entropy": cross_entropy,
        "loss softmax": torch_loss("softmax"),
        "loss entmax15": torch_loss("entmax15"),
        "numpy loss softmax": numpy_loss("softmax"),
        "numpy loss entmax15": numpy_loss("entmax15"),
    }


def time_calls(funcs, repeat):
    """Median seconds per call of each function, in interleaved rounds.

    Each round calls a function as many times as fill about 20 ms (at least
    once), so that a sub-millisecond call is not lost in the timer's noise.
    """
    calls = {}
    for name, f in funcs.items():
        f()
        t0 = time.perf_counter()
        f()
        calls[name] = max(1, int(0.02 / max(time.perf_counter() - t0, 1e-7)))
    times = {name: [] for name in funcs}
    for _ in range(repeat):
        for name, f in funcs.items():
            t0 = time.perf_counter()
            for _ in range(calls[name]):
                f()
            times[name].append((time.perf_counter() - t0) / calls[name])
    return {name: float(np.median(ts)) for name, ts in times.items()}


def batch_sweep(sizes, ks, sigmas, repeat):
    """``entmax15`` against the ``entmax`` package's, one row per shape."""
    print(
        "\nbatch sizes: entmax15 against the entmax package's "
        "(x entmax pkg: their ratio)"
    )
    print(
        f"{'n':>6} {'k':>4} {'sigma':>5} {'support':>8} {'entmax15 ms':>12} "
        f"{'entmax pkg ms':>14} {'x entmax pkg':>13}"
    )
    for k in ks:
        for sigma in sigmas:
            for n in sizes:
                z, centers = codes_and_centers(n, 16, k)
                scores = -squared_distances(z, centers) / (2 * sigma**2)
                support = float((entmax15(scores) > 0).sum(1).float().mean())
                gen = torch.Generator().manual_seed(1)
                upstream = torch.randn(scores.shape, generator=gen)
                funcs = map_funcs(scores, upstream)
                funcs = {name: funcs[name] for name in ("entmax15", "entmax.entmax15")}
                med = time_calls(funcs, repeat)
                ours, pkg = med["entmax15"], med["entmax.entmax15"]
                print(
                    f"{n:>6} {k:>4} {sigma:>5} {support:>8.1f} {1e3 * ours:>12.3f} "
                    f"{1e3 * pkg:>14.3f} {ours / pkg:>13.2f}"
                )


def layer_funcs(z, centers, sigma, upstream, compiled):
    """Forward + backward of the softmax layer and of plain torch.

    With ``compiled``, also the layer under ``torch.compile(fullgraph=True)``
    (inductor; compiled in the warm-up call).
    """
    n_clusters, n_features = centers.shape
    layer = RBFKMeansLayer(n_clusters, n_features, sigma=sigma, activation="softmax")
    with torch.no_grad():
        layer.centers.copy_(centers)

    def plain():
        zl, cl = z.detach().requires_grad_(), centers.detach().requires_grad_()
        scores = -(torch.cdist(zl, cl) ** 2) / (2 * sigma**2)
        torch.softmax(scores, dim=1).backward(upstream)

    def forward(f):
        def call():
            layer.centers.grad = None
            f(z.detach().requires_grad_()).backward(upstream)

        return call

    def loss(f):
        def call():
            layer.centers.grad = None
            f(z.detach().requires_grad_()).backward()

        return call

    funcs = {
        "plain torch softmax": plain,
        "layer(z)": forward(layer),
        "layer.loss(z)": loss(layer.loss),
    }
    if compiled:
        funcs["layer(z) compiled"] = forward(torch.compile(layer, fullgraph=True))
        funcs["layer.loss compiled"] = loss(torch.compile(layer.loss, fullgraph=True))
    return funcs


def layer_table(shapes, sigma, repeat, compiled):
    """The softmax layer against plain torch, one row per function and shape."""
    print(
        f"\nlayer, softmax, sigma={sigma} (x plain: ratio to plain torch "
        "softmax(-cdist(z, c) ** 2 / (2 sigma^2)))"
    )
    print(
        f"{'n':>6} {'d':>4} {'k':>4} {'function':>20} {'median ms':>10} {'x plain':>8}"
    )
    for n, d, k in shapes:
        z, centers = codes_and_centers(n, d, k)
        gen = torch.Generator().manual_seed(1)
        upstream = torch.randn(n, k, generator=gen)
        med = time_calls(layer_funcs(z, centers, sigma, upstream, compiled), repeat)
        ref = med["plain torch softmax"]
        for name, t in med.items():
            print(f"{n:>6} {d:>4} {k:>4} {name:>20} {1e3 * t:>10.3f} {t / ref:>8.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny shapes, one round (a check)"
    )
    args = parser.parse_args()
    if torch is None:
        print("bench_torch: PyTorch is not installed; nothing to time.")
        return
    if args.smoke:
        n_samples, n_features, ks, repeat = 256, 8, (8, 32), 1
        sweep_sizes, sweep_ks, sweep_sigmas = (64, 256), (10,), (2.0,)
        layer_shapes = [(64, 8, 4)]
    else:
        n_samples, n_features, ks, repeat = 4096, 64, (64, 512), args.repeat
        sweep_sizes = tuple(4**i for i in range(3, 9))
        sweep_ks, sweep_sigmas = (10, 64), (0.5, 2.0)
        layer_shapes = [(256, 64, 10), (4096, 64, 10), (4096, 64, 64), (65536, 16, 10)]

    torch.set_num_threads(1)
    if entmax_package is None:
        entmax_version = "not installed (its rows are left out)"
    else:
        entmax_version = getattr(entmax_package, "__version__", "installed")
    print(
        f"torch {torch.__version__}, entmax {entmax_version}, n={n_samples}, "
        f"d={n_features}, float32, CPU, 1 thread, "
        f"median of {repeat} interleaved rounds (forward + backward)"
    )
    header = (
        f"{'k':>4} {'sigma':>5} {'support':>8} {'function':>20} "
        f"{'median ms':>10} {'x ref':>7} {'x entmax pkg':>13}"
    )
    with threadpool_limits(1):
        for section in ("maps", "loss"):
            ref = "torch.softmax" if section == "maps" else "F.cross_entropy"
            print(f"\n{section} (x ref: ratio to {ref})")
            print(header)
            for k in ks:
                z, centers = codes_and_centers(n_samples, n_features, k)
                d = squared_distances(z, centers)
                for sigma in (0.25, 4.0):
                    scores = -d / (2 * sigma**2)
                    # Mean number of centres in an entmax-1.5 row's support.
                    support = float((entmax15(scores) > 0).sum(1).float().mean())
                    if section == "maps":
                        gen = torch.Generator().manual_seed(1)
                        upstream = torch.randn(scores.shape, generator=gen)
                        funcs = map_funcs(scores, upstream)
                    else:
                        target = d.argmin(1)
                        funcs = loss_funcs(z, centers, sigma, target)
                    med = time_rounds(funcs, repeat)
                    for name, t in med.items():
                        twin = "entmax." + name
                        pkg = f"{t / med[twin]:>13.2f}" if twin in med else " " * 13
                        print(
                            f"{k:>4} {sigma:>5} {support:>8.1f} {name:>20} "
                            f"{1e3 * t:>10.2f} {t / med[ref]:>7.2f} {pkg}"
                        )
        if entmax_package is not None:
            batch_sweep(sweep_sizes, sweep_ks, sweep_sigmas, repeat)
        layer_table(layer_shapes, 1.0, repeat, compiled=not args.smoke)


if __name__ == "__main__":
    main()
