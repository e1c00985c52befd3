"""
Deep clustering: K-Means inside an autoencoder
==============================================

:class:`skrbfkmeans.torch.RBFKMeansLayer` puts the RBF K-Means objective in a
PyTorch model: a network can learn a representation and its clusters in one
gradient-based training. Here a small autoencoder maps scikit-learn's
handwritten digits (8 x 8 pixels) to a 10-D code, and is trained on its
reconstruction error plus ``lam`` times the layer's loss on the codes, while
an :class:`skrbfkmeans.torch.AnnealingSchedule` cools the width until the
entmax-1.5 responsibilities are one-hot: training ends on the K-Means
objective itself.

Four ways to find the ten digits, each scored against the true digits by the
normalised mutual information (NMI) and the adjusted Rand index (ARI), mean
and standard deviation over five seeds:

- ``KMeans(n_init=10)`` on the pixels;
- two-step: the autoencoder trained on reconstruction alone, then
  ``KMeans(n_init=10)`` on its codes (trained for as many epochs as the
  joint methods);
- joint training with softmax responsibilities at a fixed width (the style of
  ``torch-kmeans``' soft K-Means; Deep k-Means raises the inverse width
  during training instead);
- joint training with entmax-1.5 under the annealing schedule.

The joint methods' hyper-parameters are chosen on other seeds than the five
reported. ``benchmarks/bench_deep_clustering.py`` makes the same comparison
on rows held out from training, on more data sets, and against Deep k-Means
and IDEC style heads.

This example needs PyTorch (``pip install "skrbfkmeans[torch]"``). It runs on
the CPU with one thread, in about 45 s of processor time (two thirds of it
choosing the hyper-parameters).
"""

# %%
# The data and the autoencoder
# ----------------------------
# The pixels are scaled to [0, 1] (intensities 0 to 16 divided by 16).
# Standardising every pixel instead would give the border pixels, which are
# almost always blank, as much weight as the strokes: K-Means on the pixels,
# and every method below, then find the digits less well.
#
# The encoder is a multilayer perceptron 64 -> 128 -> 64 -> 10, the decoder
# its mirror image. The encoder ends with a batch normalisation without
# learnable scale, so every code coordinate has mean 0 and variance 1 over a
# batch: the K-Means loss can be lowered by shrinking all the codes towards
# one point (the decoder would undo the shrinking), and fixing the codes'
# scale rules that trivial solution out. Every run is seeded; PyTorch, BLAS
# and OpenMP use one thread.

import copy
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from threadpoolctl import threadpool_limits
from torch import nn

from skrbfkmeans import RBFKMeans
from skrbfkmeans.torch import AnnealingSchedule, RBFKMeansLayer

torch.set_num_threads(1)
X_digits, y = load_digits(return_X_y=True)
X = torch.from_numpy((X_digits / 16).astype(np.float32))
n_clusters, n_codes = 10, 10


def autoencoder(seed):
    """A fresh encoder and decoder, initialised from ``seed``."""
    torch.manual_seed(seed)
    encoder = nn.Sequential(
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 64),
        nn.ReLU(),
        nn.Linear(64, n_codes),
        nn.BatchNorm1d(n_codes, affine=False),
    )
    decoder = nn.Sequential(
        nn.Linear(n_codes, 64),
        nn.ReLU(),
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 64),
    )
    return encoder, decoder


def batches(seed, epoch, batch_size=512):
    """Row indices of the mini-batches of an epoch (a seeded shuffle)."""
    generator = torch.Generator().manual_seed(1000 * seed + epoch)
    return torch.randperm(len(X), generator=generator).split(batch_size)


def encode(encoder):
    """The codes of all the digits, without gradient (inference mode)."""
    encoder.eval()
    with torch.no_grad():
        codes = encoder(X)
    encoder.train()
    return codes


def scores(labels):
    """NMI and ARI of a clustering against the true digits."""
    return normalized_mutual_info_score(y, labels), adjusted_rand_score(y, labels)


# %%
# Pretraining on reconstruction
# -----------------------------
# Every method starts from the same autoencoder, trained for 60 epochs on the
# mean squared reconstruction error (Adam, mini-batches of 512; ``fused=True``
# runs its update as one kernel, faster on the CPU).

n_pretrain_epochs, n_joint_epochs = 60, 40


def pretrain(seed):
    """An autoencoder trained on the reconstruction error alone."""
    encoder, decoder = autoencoder(seed)
    params = [*encoder.parameters(), *decoder.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-3, fused=True)
    for epoch in range(n_pretrain_epochs):
        for rows in batches(seed, epoch):
            x = X[rows]
            loss = nn.functional.mse_loss(decoder(encoder(x)), x)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return encoder, decoder


# %%
# Fine-tuning, with and without the layer
# ---------------------------------------
# Every method then trains a copy of the pretrained autoencoder for 40 more
# epochs on
#
# ``reconstruction error + lam * layer.loss(codes, reduction="mean")``
#
# (Adam), the layer's centres being trained with the network. The two-step
# method is the same training with ``lam = 0`` (reconstruction alone, the
# layer unused), followed by ``KMeans(n_init=10)`` on its codes: all the
# methods train the network for the same 100 epochs, on the same
# mini-batches.
#
# Both layers start from the same ``KMeans(n_init=10)`` fit of the pretrained
# codes: an :class:`~skrbfkmeans.RBFKMeans` fitted from its centres gives the
# layer (:meth:`~skrbfkmeans.torch.RBFKMeansLayer.from_estimator`: same
# centres, width and activation), so the two differ only in how they train.
#
# - softmax: the width is ``RBFKMeans``' default (``sigma="auto"``, a
#   quarter of the median distance between neighbouring initial centres),
#   kept fixed during training;
# - entmax-1.5: the schedule restarts the width just above the first
#   critical width of the codes
#   (:meth:`~skrbfkmeans.torch.AnnealingSchedule.start`) and cools it by the
#   factor ``cooling`` after every epoch until the entmax responsibilities of
#   all the codes are one-hot. From there on the layer's loss is the K-Means
#   distortion (plus a constant), and its gradient pulls every code towards
#   its own centre. At each step the schedule also moves any centre that
#   the codes have left without responsibility onto codes that cost most
#   (``schedule.n_reseeded`` counts the moves; ``random_state`` seeds them).


def fine_tune(seed, encoder, decoder, estimator, lam, cooling=None):
    """Train a copy of the autoencoder on reconstruction + lam * layer loss.

    Returns the labels of the digits and their final codes. ``lam = 0`` is
    the two-step method: its labels are ``KMeans(n_init=10)``'s.
    """
    encoder, decoder = copy.deepcopy(encoder), copy.deepcopy(decoder)
    layer = None if lam == 0 else RBFKMeansLayer.from_estimator(estimator)
    schedule = None
    if lam > 0 and cooling is not None:
        schedule = AnnealingSchedule(layer, cooling=cooling, random_state=seed)
        schedule.start(encode(encoder))
    params = [*encoder.parameters(), *decoder.parameters()]
    if lam > 0:
        params += list(layer.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-3, fused=True)
    for epoch in range(n_joint_epochs):
        # The epochs after pretraining's: every method sees the same batches.
        for rows in batches(seed, n_pretrain_epochs + epoch):
            x = X[rows]
            codes = encoder(x)
            loss = nn.functional.mse_loss(decoder(codes), x)
            if lam > 0:
                loss = loss + lam * layer.loss(codes, reduction="mean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if schedule is not None and not schedule.done:
            schedule.step(encode(encoder))
    codes = encode(encoder)
    if lam == 0:
        kmeans = KMeans(n_clusters, n_init=10, random_state=seed)
        return kmeans.fit_predict(codes.numpy()), codes.numpy(), layer
    with torch.no_grad():
        labels = layer.predict(codes).numpy()
    return labels, codes.numpy(), layer


def run_seed(seed, settings):
    """Scores of every method at one seed.

    ``settings`` maps a method to its keyword arguments for ``fine_tune``;
    each seed gives its own network initialisation, mini-batches and
    k-means++ starts.
    """
    encoder, decoder = pretrain(seed)
    codes_pretrained = encode(encoder).numpy()
    kmeans = KMeans(n_clusters, n_init=10, random_state=seed).fit(codes_pretrained)
    results, codes = {}, {"pretrained": codes_pretrained}
    for method, kwargs in settings.items():
        estimator = None
        if kwargs["lam"] > 0:
            activation = "entmax15" if "cooling" in kwargs else "softmax"
            estimator = RBFKMeans(
                n_clusters, activation=activation, init=kmeans.cluster_centers_
            ).fit(codes_pretrained)
        labels, codes[method], layer = fine_tune(
            seed, encoder, decoder, estimator, **kwargs
        )
        results[method] = scores(labels)
    return results, codes, layer


# %%
# Tuning on seeds that are not reported
# -------------------------------------
# ``lam`` (both activations) and ``cooling`` (entmax-1.5) are chosen by the
# mean NMI over three *tuning seeds* (10, 11 and 12), from ``lam`` in 0.003,
# 0.01, 0.03, 0.1, 0.3 and ``cooling`` in 0.8, 0.9. The scores reported
# further down are those of five other seeds (0 to 4), which the choice never
# saw: tuning on the reported seeds, as deep-clustering results often are,
# flatters the tuned methods against the two-step one, which has nothing to
# tune. (The NMI still needs the true digits, which an unsupervised user
# would not have: the choice is the best one could make with labels for a
# few runs, and ``benchmarks/bench_deep_clustering.py`` scores it on held-out
# rows.)

lam_grid, cooling_grid = (0.003, 0.01, 0.03, 0.1, 0.3), (0.8, 0.9)
tuning_seeds, scoring_seeds = (10, 11, 12), (0, 1, 2, 3, 4)
candidates = {}
for lam in lam_grid:
    candidates[f"softmax, lam={lam}"] = {"lam": lam}
    for cooling in cooling_grid:
        name = f"entmax-1.5, lam={lam}, cooling={cooling}"
        candidates[name] = {"lam": lam, "cooling": cooling}

t_start = time.perf_counter()
with threadpool_limits(1):
    tuning = [run_seed(seed, candidates)[0] for seed in tuning_seeds]
tuning_nmi = {name: np.mean([r[name][0] for r in tuning]) for name in candidates}
chosen = {}
for activation in ("softmax", "entmax-1.5"):
    names = [name for name in candidates if name.startswith(activation)]
    best = max(names, key=tuning_nmi.get)
    chosen[activation] = candidates[best]
    print(f"tuning seeds, best {best}: mean NMI {tuning_nmi[best]:.3f}")
print(f"{time.perf_counter() - t_start:.0f} s for the tuning")

# %%
# Five scoring seeds
# ------------------

methods = [
    "KMeans on pixels",
    "two-step (AE, then KMeans)",
    "joint, softmax, fixed width",
    "joint, entmax-1.5, annealed",
]
settings = {
    methods[1]: {"lam": 0.0},
    methods[2]: chosen["softmax"],
    methods[3]: chosen["entmax-1.5"],
}
results = {method: [] for method in methods}
t_start = time.perf_counter()
with threadpool_limits(1):
    for seed in scoring_seeds:
        kmeans = KMeans(n_clusters, n_init=10, random_state=seed)
        results[methods[0]].append(scores(kmeans.fit_predict(X.numpy())))
        seed_results, codes, layer = run_seed(seed, settings)
        for method, score in seed_results.items():
            results[method].append(score)
        if seed == scoring_seeds[0]:
            figure_codes = (codes["pretrained"], codes[methods[3]])
            resp = layer(torch.from_numpy(codes[methods[3]]))
            print(
                f"seed 0, entmax-1.5: final width {float(layer.sigma):.3g}, "
                f"one-hot codes: {float((resp == 1).any(dim=1).float().mean()):.1%}"
            )
elapsed = time.perf_counter() - t_start

print(f"{'method':<30} {'NMI':>14} {'ARI':>14}   (mean +- std, 5 seeds)")
for method, values in results.items():
    (nmi, ari), (nmi_std, ari_std) = np.mean(values, 0), np.std(values, 0, ddof=1)
    print(f"{method:<30} {nmi:.3f} +- {nmi_std:.3f} {ari:.3f} +- {ari_std:.3f}")
print(f"{elapsed:.0f} s for the five scoring seeds")

# %%
# What the table says
# -------------------
# Where this example was written (PyTorch 2.13, 2026-12-04) the tuning chose
# ``lam=0.03`` for both activations and ``cooling=0.8`` for entmax-1.5 (mean
# NMI 0.771 on the tuning seeds for both), and the five scoring seeds gave
# (mean +- standard deviation):
#
# ===============================  ==============  ==============
# method                           NMI             ARI
# ===============================  ==============  ==============
# ``KMeans(n_init=10)`` on pixels  0.742 +- 0.002  0.668 +- 0.003
# two-step (AE, then KMeans)       0.726 +- 0.018  0.627 +- 0.030
# joint, softmax, fixed width      0.777 +- 0.009  0.661 +- 0.008
# joint, entmax-1.5, annealed      0.772 +- 0.012  0.657 +- 0.013
# ===============================  ==============  ==============
#
# - Both joint trainings beat the two-step method on both scores, although
#   the two-step's autoencoder trained for as many epochs as theirs: the
#   gain is the clustering loss's, not extra training. The annealed layer
#   ends on the K-Means objective: after the last cooling step the
#   responsibilities of all but a few of the codes are one-hot (the
#   schedule stopped when every code was; the epoch after moved a few).
# - The annealed entmax-1.5 layer does not beat softmax at a fixed width
#   here (the two are within one standard deviation). The fixed width is
#   not an arbitrary one: ``RBFKMeans`` chose it from the two-step's
#   centres. What the schedule saves is the choice of a width.
# - Joint training lifts the codes above the pixels on NMI, not on ARI.
# - ``benchmarks/bench_deep_clustering.py`` scores the same kind of training
#   on rows held out from training, on two more data sets and against Deep
#   k-Means and IDEC style heads written in plain PyTorch: there the IDEC
#   style head scores higher than the layer on all three sets (on the
#   digits by 0.03 NMI), and the layer is above Deep k-Means on two of the
#   three (0.005 below it on the digits).

# %%
# The codes, before and after joint training
# ------------------------------------------
# Left: the means (bars) and every seed (dots). Right: the first two
# principal components of the codes of seed 0, coloured by the true digit,
# after pretraining and after joint training with the annealed entmax-1.5
# layer.

fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), layout="constrained")
positions = np.arange(len(methods))
for offset, (name, column) in zip((-0.2, 0.2), (("NMI", 0), ("ARI", 1))):
    values = np.array([[v[column] for v in results[m]] for m in methods])
    axes[0].bar(positions + offset, values.mean(axis=1), 0.4, label=name)
    for position, row in zip(positions, values):
        axes[0].plot(np.full(len(row), position + offset), row, "k.", markersize=3)
short_names = ["KMeans,\npixels", "two-step", "joint,\nsoftmax", "joint,\nentmax-1.5"]
axes[0].set_xticks(positions, short_names)
axes[0].set_ylim(0.4, 0.9)
axes[0].legend()
axes[0].set_title("score against the true digits")
for ax, codes, title in zip(
    axes[1:], figure_codes, ["pretrained codes", "after joint training"]
):
    Z = PCA(n_components=2).fit_transform(codes)
    ax.scatter(Z[:, 0], Z[:, 1], c=y, s=4, cmap="tab10")
    ax.set_title(f"{title} (seed 0, PCA)")
    ax.set_xticks([])
    ax.set_yticks([])
plt.show()
