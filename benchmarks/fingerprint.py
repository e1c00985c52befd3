"""Fingerprint of fitted results: a hash of every fitted attribute's bytes.

Fits 63 configurations (RBFKMeans at several widths and activations, sigma=0
and "auto", AnnealedRBFKMeans with an int and "auto", with and without the
polish, weights, float32, sparse and far data, sampled large data, partial_fit
streams, kmeans_polish, kmeans_hartigan, and dask fits when dask is installed)
and stores, per fit, a hash of every fitted attribute and of predict,
predict_proba, transform and score. Run it before and after a change that must
not change results: ``--compare`` lists the fits whose hashes differ.

Run: ``python benchmarks/fingerprint.py OUT.json [--compare OLD.json]``.
"""

import hashlib
import json
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_iris, load_wine, make_blobs

warnings.simplefilter("ignore")

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans, kmeans_hartigan, kmeans_polish  # noqa: E402


def _h(obj, hasher):
    if isinstance(obj, np.ndarray) and obj.dtype == object:
        hasher.update(str(obj.shape).encode())
        _h(obj.ravel().tolist(), hasher)
    elif isinstance(obj, np.ndarray):
        hasher.update(str((obj.dtype.str, obj.shape)).encode())
        hasher.update(np.ascontiguousarray(obj).tobytes())
    elif sp.issparse(obj):
        _h(obj.toarray(), hasher)
    elif isinstance(obj, (list, tuple)):
        hasher.update(f"{type(obj).__name__}{len(obj)}[".encode())
        for o in obj:
            _h(o, hasher)
        hasher.update(b"]")
    elif isinstance(obj, dict):
        for k in sorted(obj):
            hasher.update(str(k).encode())
            _h(obj[k], hasher)
    elif isinstance(obj, (float, np.floating)):
        hasher.update(np.float64(obj).tobytes())
    elif isinstance(obj, (bool, int, np.integer, str, type(None))):
        hasher.update(repr(obj).encode())
    elif hasattr(obj, "_asdict"):
        _h(tuple(obj), hasher)
    else:
        hasher.update(repr(obj).encode())


def digest(obj):
    h = hashlib.sha256()
    _h(obj, h)
    return h.hexdigest()[:16]


def attrs(est, X):
    out = {}
    for k, v in sorted(est.__dict__.items()):
        if (
            k in {"_stream"}
            or (k.endswith("_") and not k.startswith("__"))
            or k in {"_offset", "_units", "_activation", "_n_features_out"}
        ):
            out[k] = digest(v)
    out["predict"] = digest(est.predict(X))
    if hasattr(est, "predict_proba"):
        out["predict_proba"] = digest(est.predict_proba(X))
    out["transform"] = digest(est.transform(X))
    out["score"] = digest(est.score(X))
    return out


def data():
    X_iris = load_iris().data
    X_wine = load_wine().data
    X_wine_std = (X_wine - X_wine.mean(0)) / X_wine.std(0)
    Xb, _ = make_blobs(n_samples=600, centers=6, n_features=5, random_state=3)
    Xfar = Xb + 1e6
    rng = np.random.RandomState(0)
    Xs = sp.random(300, 20, density=0.2, format="csr", random_state=rng)
    Xbig, _ = make_blobs(n_samples=12000, centers=8, n_features=3, random_state=1)
    Xuneq = np.vstack(
        [
            rng.normal(0, 3, size=(500, 2)),
            rng.normal([20, 0], 0.3, size=(20, 2)),
            rng.normal([0, 20], 0.3, size=(20, 2)),
        ]
    )
    w = rng.randint(1, 4, size=Xb.shape[0]).astype(float)
    wf = rng.uniform(0.1, 2.0, size=X_iris.shape[0])
    return dict(
        iris=X_iris,
        wine=X_wine_std,
        blobs=Xb,
        far=Xfar,
        sparse=Xs,
        big=Xbig,
        uneq=Xuneq,
        w=w,
        wf=wf,
    )


def configs(D):
    R, A = RBFKMeans, AnnealedRBFKMeans
    c = []
    for act in ("softmax", "entmax15"):
        for s in (0.3, 1.0, 3.0, "auto"):
            c.append(
                (
                    f"rbf-iris-{act}-{s}",
                    R(3, sigma=s, activation=act, random_state=0, n_init=2),
                    D["iris"],
                    None,
                )
            )
    c += [
        ("rbf-blobs-s0", R(6, sigma=0, random_state=1), D["blobs"], None),
        ("rbf-blobs-s0-w", R(6, sigma=0, random_state=1), D["blobs"], D["w"]),
        (
            "rbf-blobs-s0-hart",
            R(6, sigma=0, algorithm="hartigan", random_state=1),
            D["blobs"],
            None,
        ),
        (
            "rbf-blobs-s0-random",
            R(6, sigma=0, init="random", n_init=3, random_state=2),
            D["blobs"],
            None,
        ),
        ("rbf-blobs-w-soft", R(6, sigma=1.0, random_state=1), D["blobs"], D["w"]),
        (
            "rbf-blobs-f32-ent",
            R(6, sigma=0.5, activation="entmax15", random_state=1),
            D["blobs"].astype(np.float32),
            None,
        ),
        (
            "rbf-blobs-f32-s0",
            R(6, sigma=0, random_state=1),
            D["blobs"].astype(np.float32),
            None,
        ),
        ("rbf-far-auto", R(6, random_state=1), D["far"], None),
        ("rbf-far-s0", R(6, sigma=0, random_state=1), D["far"], None),
        ("rbf-sparse-soft", R(4, sigma=0.5, random_state=0), D["sparse"], None),
        ("rbf-sparse-s0", R(4, sigma=0, random_state=0), D["sparse"], None),
        (
            "rbf-sparse-ent-auto",
            R(4, activation="entmax15", random_state=0),
            D["sparse"],
            None,
        ),
        (
            "rbf-init-array",
            R(3, sigma=0.4, init=D["iris"][[0, 60, 120]]),
            D["iris"],
            None,
        ),
        ("rbf-wine-wf", R(3, sigma=1.0, random_state=0), D["iris"], D["wf"]),
        ("rbf-big-s0", R(8, sigma=0, random_state=0), D["big"], None),
        ("rbf-big-soft", R(8, sigma=0.5, random_state=0), D["big"], None),
        ("rbf-maxiter", R(6, sigma=0.8, max_iter=3, random_state=0), D["blobs"], None),
    ]
    c += [
        ("ann-iris-3", A(3), D["iris"], None),
        ("ann-iris-5-nopolish", A(5, polish=False), D["iris"], None),
        ("ann-iris-5-soft", A(5, activation="softmax"), D["iris"], None),
        ("ann-iris-4-ent", A(4, activation="entmax15"), D["iris"], None),
        ("ann-wine-3", A(3), D["wine"], None),
        ("ann-wine-6", A(6), D["wine"], None),
        ("ann-blobs-6-w", A(6), D["blobs"], D["w"]),
        ("ann-iris-wf", A(3), D["iris"], D["wf"]),
        ("ann-blobs-f32", A(6), D["blobs"].astype(np.float32), None),
        ("ann-far", A(6), D["far"], None),
        ("ann-sparse", A(4), D["sparse"], None),
        ("ann-uneq", A(3), D["uneq"], None),
        ("ann-auto", A("auto", max_clusters=8), D["blobs"], None),
        ("ann-auto-iris", A("auto", max_clusters=6), D["iris"], None),
        ("ann-sigma-end", A(3, sigma_end=0.3), D["iris"], None),
        ("ann-sigma-start", A(3, sigma_start=2.0), D["iris"], None),
        ("ann-kmpp", A(3, init="k-means++", random_state=0), D["iris"], None),
        (
            "ann-kmpp-n3",
            A(3, init="k-means++", n_init=3, random_state=0),
            D["wine"],
            None,
        ),
        (
            "ann-init-array-end",
            A(3, init=D["iris"][[0, 60, 120]], sigma_end=0.3),
            D["iris"],
            None,
        ),
        ("ann-big-sample", A(8), D["big"], None),
        ("ann-big-sample-end", A(8, sigma_end=0.2), D["big"], None),
        ("ann-cooling", A(4, cooling=0.7, max_iter=30), D["wine"], None),
    ]
    return c


def run():
    D = data()
    out = {}
    for name, est, X, w in configs(D):
        est.fit(X, sample_weight=w)
        out[name] = attrs(est, X)
    # dask rows
    import dask.array as da

    Xd = da.from_array(D["blobs"], chunks=150)
    wd = da.from_array(D["w"], chunks=150)
    for name, est, w in [
        ("dask-soft", RBFKMeans(6, sigma=1.0, random_state=0), None),
        ("dask-s0", RBFKMeans(6, sigma=0, random_state=0), None),
        ("dask-ent-auto-w", RBFKMeans(6, activation="entmax15", random_state=0), wd),
        ("dask-ann", AnnealedRBFKMeans(6), None),
        ("dask-ann-w", AnnealedRBFKMeans(6), wd),
        ("dask-ann-end", AnnealedRBFKMeans(6, sigma_end=0.3), None),
    ]:
        est.fit(Xd, sample_weight=w)
        est.labels_ = est.labels_.compute()
        out[name] = attrs(est, D["blobs"])
        out[name]["predict-dask"] = digest(est.predict(Xd).compute())
        out[name]["proba-dask"] = digest(est.predict_proba(Xd).compute())
        out[name]["transform-dask"] = digest(est.transform(Xd).compute())
        out[name]["score-dask"] = digest(est.score(Xd))
    est = RBFKMeans(6, sigma=1.0, random_state=0)
    est.partial_fit(Xd)
    out["dask-partial"] = attrs(est, D["blobs"])
    # partial_fit streams
    for name, est, X in [
        ("pf-soft", RBFKMeans(4, sigma=1.0, random_state=0), D["blobs"]),
        (
            "pf-auto-ent",
            RBFKMeans(4, activation="entmax15", random_state=0),
            D["blobs"],
        ),
        ("pf-sparse", RBFKMeans(4, sigma=0.5, random_state=0), D["sparse"]),
    ]:
        for _ in range(3):
            for i in range(0, X.shape[0], 100):
                est.partial_fit(X[i : i + 100])
        out[name] = attrs(est, X)
    est = RBFKMeans(6, sigma=0.8, random_state=0).fit(D["blobs"])
    est.partial_fit(D["blobs"][:200])
    out["pf-after-fit"] = attrs(est, D["blobs"])
    # functions
    c0 = D["uneq"][[0, 1, 2]]
    out["kmeans_polish"] = {"r": digest(kmeans_polish(D["uneq"], c0))}
    out["kmeans_polish-w"] = {
        "r": digest(kmeans_polish(D["blobs"], D["blobs"][:6], sample_weight=D["w"]))
    }
    out["kmeans_polish-sparse"] = {
        "r": digest(kmeans_polish(D["sparse"], D["sparse"][:4].toarray()))
    }
    out["kmeans_hartigan"] = {"r": digest(kmeans_hartigan(D["wine"], D["wine"][:5]))}
    out["kmeans_hartigan-w"] = {
        "r": digest(kmeans_hartigan(D["iris"], D["iris"][:4], sample_weight=D["wf"]))
    }
    return out


def main():
    out = run()
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    print(f"{len(out)} fits")
    if len(sys.argv) > 3 and sys.argv[2] == "--compare":
        with open(sys.argv[3]) as f:
            old = json.load(f)
        diff = [k for k in old if old[k] != out.get(k)]
        for k in diff:
            bad = [a for a in old[k] if old[k][a] != out.get(k, {}).get(a)]
            print("DIFF", k, bad)
        print(f"fingerprint: {len(diff)} of {len(old)} fits differ")


if __name__ == "__main__":
    main()
