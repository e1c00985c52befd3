"""Adversarial inputs: a correct result or a clear error, never a wrong one.

Tries adversarial inputs on the public API (``RBFKMeans``,
``AnnealedRBFKMeans``, ``kmeans_polish``, ``rbf_kmeans_loss``) and on the
command line (``python -m skrbfkmeans``), family by family, and sorts every
case into one of four outcomes:

``correct``
    A result that agrees with the reference (below).
``error``
    A clear error: a ``ValueError`` or ``TypeError`` (scikit-learn's
    ``InvalidParameterError`` is both) with a message, raised from the public
    API; for the command line, exit status 2 with exactly one stderr line
    ``skrbfkmeans: error: ...``.
``wrong``
    A result without an error that is wrong: NaN or inf in an output, labels,
    centres or inertia that disagree with the reference beyond rounding,
    ``certified_=True`` for centres that are not a Lloyd fixed point, bad
    input accepted silently, the caller's arrays modified, a dropped output
    row, a temporary or partial file left behind.
``crash``
    Any other exception (``OverflowError``, ``LinAlgError``,
    ``FloatingPointError``, ...), a ``ValueError`` that reports a NaN or an
    infinity in finite input (an internal failure behind a misleading
    message), a traceback from the command line, or an exit status other
    than 0 and 2 (130 or 143 after a signal).

Families: ``scales`` (``a X0`` for ``a`` from 1e-300 to 1e300, float64 and
float32: labels equal, centres ``a`` times, inertia ``a^2`` times the
unit-scale fit; a clear ``ValueError`` where ``a^2`` times the distortion
overflows float64), ``offsets`` (``X0 + b`` up to ``b = 1e12``: the fit of
the data as represented, moved back to the origin), ``dtypes``, ``sparse``
(seven formats, 64-bit indices, a column offset by 1e8, against the dense
fit), ``ties`` (duplicates, fewer distinct rows than clusters, exact ties,
weights against repeated rows), ``degenerate-k``, ``bad-input`` (NaN, inf,
negative or zero weights, wrong shapes, bad parameters: must be a clear
error naming the problem, with the caller's arrays untouched),
``many-rows`` (``AnnealedRBFKMeans`` on 12000 rows, which it anneals on a
sample: scales, offsets, weights against repeated rows, zero weights, CSR,
``n_clusters="auto"``), ``faults`` (a refit stopped by a raising ``init``, a
KeyboardInterrupt injected into an engine function at its first, middle and
last call, or a ConvergenceWarning raised as an error must leave the
previous model as it was, byte for byte; pickle, joblib and deepcopy in the
middle of a ``partial_fit`` stream and an interrupted ``partial_fit`` must
not change where the stream ends; dask chunks of 0 rows, unequal and of
unknown size against NumPy, ``pd.NA`` in a dask frame, a dask chunk that
fails part-way, the pickle of a dask-fitted model; command-line output
names at the file system's limit), ``cli``
(malformed files and options; ``--full`` adds more) and ``signals`` (SIGINT
and SIGTERM 0.5 s after the start, while the input is open, 0.5 s into the
fit and once a temporary output exists: exit 130 or 143, at most one stderr
line, no traceback, no temporary or partial output). The command lines run
as subprocesses, ``--jobs`` at a time, while this process works through the
API families; each pays for the import of scikit-learn.

The table counts the outcomes per family; then every ``wrong`` and ``crash``
case is listed with what went wrong, and after it the notes (an error where
a result was expected, a message that does not name the problem, a NumPy
``RuntimeWarning`` on the way to a correct result). One BLAS/OpenMP thread.
Exit status 1 if any case is wrong or crashed.

With ``--raise-fp`` every API call runs under ``np.errstate(all="raise")``:
the package handles its floating-point events itself, so the outcomes must
be the same, and any ``FloatingPointError`` that escapes is a crash.

Run: ``python benchmarks/bench_reliability.py [--only FAMILY[,FAMILY]]
[--jobs 2] [--full] [--signal-rows 200000] [--raise-fp] [--verbose]``.
"""

import argparse
import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from fractions import Fraction

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans, kmeans_polish, rbf_kmeans_loss

OUTCOMES = ("correct", "error", "wrong", "crash")
FLOAT64_MAX_LOG2 = float(np.log2(np.finfo(np.float64).max))
TINY = float(np.finfo(np.float64).tiny)


class Report:
    """The outcome of every case, and the notes on some of them."""

    def __init__(self, verbose=False):
        self.cases = []  # (family, description, outcome, detail)
        self.notes = []  # (family, description, note)
        self.verbose = verbose
        # NumPy's error state of every API call (--raise-fp: all="raise").
        self.errstate = {}

    def add(self, family, desc, outcome, detail="", note=""):
        assert outcome in OUTCOMES, outcome
        self.cases.append((family, desc, outcome, detail))
        if note:
            self.notes.append((family, desc, note))
        if self.verbose:
            extra = f": {detail}" if detail else ""
            print(f"  [{outcome:>7}] {family}: {desc}{extra}", flush=True)


REPORT = Report()


# -- classification of API calls -------------------------------------------


def one_line(text, limit=240):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc):
    """``Type: message (at file:line)``, the line the innermost in the package."""
    where = ""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "skrbfkmeans" in f.filename] or frames
    if ours:
        f = ours[-1]
        where = f" (at {os.path.basename(f.filename)}:{f.lineno})"
    return f"{type(exc).__name__}: {one_line(exc, 200)}{where}"


def snapshot(a):
    if sp.issparse(a):
        return a.copy()
    if isinstance(a, np.ndarray):
        return a.copy(order="K")
    return copy.deepcopy(a)


def unchanged(a, b):
    try:
        if sp.issparse(a):
            if a.format != b.format or a.shape != b.shape:
                return False
            return np.array_equal(a.toarray(), b.toarray(), equal_nan=True)
        if isinstance(a, np.ndarray):
            if a.dtype != b.dtype or a.shape != b.shape:
                return False
            if a.dtype.kind in "fc":
                return np.array_equal(a, b, equal_nan=True)
            return bool(np.all(a == b)) if a.size else True
        if hasattr(a, "equals"):  # a pandas DataFrame
            return bool(a.equals(b))
        return repr(a) == repr(b)
    except Exception:
        return False


def api_case(
    family,
    desc,
    call,
    check=None,
    expect="result",
    keywords=(),
    inputs=(),
    finite=None,
):
    """Run ``call()`` and sort the outcome.

    ``expect``: ``"result"``, ``"error"`` or ``"either"``. ``check(result,
    caught)`` returns a problem string (wrong) or None (correct); it runs
    outside the classification, so a failing check is a wrong result, never
    an error. ``keywords``: one of them (lower case) must be in an error's
    message, or a note says that it does not name the problem. ``inputs``:
    the caller's arrays, which must be unchanged afterwards. ``finite``:
    whether every input value is finite (default: unless an error is
    expected); then an error that reports a NaN or an infinity is an
    internal failure surfacing as a misleading message, a crash.
    """
    finite = expect != "error" if finite is None else finite
    before = [snapshot(a) for a in inputs]
    note = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with np.errstate(**REPORT.errstate):
                result = call()
        except (ValueError, TypeError) as exc:
            message = one_line(exc)
            if not message:
                outcome, detail = "crash", f"{type(exc).__name__} without a message"
            else:
                outcome, detail = "error", f"{type(exc).__name__}: {message}"
                if finite and re.search(r"\bnan\b|infinit|\binf\b", message.lower()):
                    outcome = "crash"
                    detail = "finite input reported as NaN/inf: " + describe(exc)
                elif expect == "result":
                    note = f"error where a result was expected: {describe(exc)}"
                elif keywords and not any(k in message.lower() for k in keywords):
                    note = (
                        f"message does not name the problem ({'/'.join(keywords)}):"
                        f" {message}"
                    )
        except Exception as exc:
            outcome, detail = "crash", describe(exc)
        else:
            if expect == "error":
                outcome, detail = "wrong", "accepted without an error"
                if check is not None:
                    try:
                        problem = check(result, caught)
                    except Exception as exc:
                        problem = describe(exc)
                    detail += f" ({'and then: ' + problem if problem else 'result'})"
            else:
                try:
                    problem = check(result, caught) if check is not None else None
                except Exception as exc:
                    problem = f"the check failed on the result: {describe(exc)}"
                outcome, detail = ("wrong", problem) if problem else ("correct", "")
                numpy_warnings = [
                    one_line(w.message, 100)
                    for w in caught
                    if issubclass(w.category, RuntimeWarning)
                    and "encountered" in str(w.message)
                ]
                if outcome == "correct" and numpy_warnings:
                    note = "RuntimeWarning on the way: " + "; ".join(
                        sorted(set(numpy_warnings))
                    )
    changed = [i for i, (a, b) in enumerate(zip(inputs, before)) if not unchanged(a, b)]
    if changed:
        what = f"modified the caller's input #{changed}"
        detail = f"{what}; {detail}" if detail else what
        if outcome in ("correct", "error"):
            outcome = "wrong"
    REPORT.add(family, desc, outcome, detail, note)


# -- reference comparisons --------------------------------------------------


def matching(labels, ref):
    """Map fitted label -> reference label, if the partitions are equal."""
    labels, ref = np.asarray(labels), np.asarray(ref)
    if labels.shape != ref.shape:
        return None
    mapping = {}
    for a, b in zip(labels.tolist(), ref.tolist()):
        if mapping.setdefault(a, b) != b:
            return None
    if len(set(mapping.values())) != len(mapping):
        return None
    return mapping


def close_value(value, expected, rtol):
    """``value`` within ``rtol`` of ``expected`` (which may be subnormal)."""
    return abs(value - expected) <= rtol * abs(expected) + TINY


def compare_fit(labels, centers, inertia, ref, a=1.0, rtol=1e-6, atol=None):
    """Problem string, or None when ``(labels, centers, inertia)`` equals
    ``ref`` (the unit-scale fit) scaled by ``a``, up to a relabelling."""
    ref_labels, ref_centers, ref_inertia = ref
    centers = np.asarray(centers)
    labels = np.asarray(labels)
    if centers.shape != ref_centers.shape:
        return f"centres of shape {centers.shape}, expected {ref_centers.shape}"
    if not np.all(np.isfinite(centers)):
        return "non-finite centres"
    if not np.isfinite(inertia):
        return f"inertia {inertia}"
    k = ref_centers.shape[0]
    if labels.size and (labels.min() < 0 or labels.max() >= k):
        return f"labels outside 0..{k - 1}"
    mapping = matching(labels, ref_labels)
    if mapping is None:
        n = int(np.sum(np.asarray(labels) != np.asarray(ref_labels)))
        return f"labels differ from the reference ({n} of {labels.size} samples)"
    unit = centers.astype(np.float64) / a
    if atol is None:
        atol = rtol * max(float(np.abs(ref_centers).max()), TINY)
    for j, r in mapping.items():
        err = float(np.abs(unit[j] - ref_centers[r]).max())
        if err > atol:
            return f"centre {j} off by {err:.3g} (unit scale; tolerance {atol:.3g})"
    expected = float(ref_inertia) * a * a
    if not close_value(float(inertia), expected, rtol):
        return f"inertia {inertia:.8g}, expected {expected:.8g}"
    return None


def lloyd_fixed_point(X, centers, sample_weight=None, a=1.0, rtol=1e-9):
    """Problem string, or None when one Lloyd step leaves ``centers`` put.

    Computed independently of the package, in float64 at unit scale.
    """
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    X = X.astype(np.float64) / a
    C = np.asarray(centers, dtype=np.float64) / a
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight)
    mean = np.average(X, axis=0, weights=w)
    Xc, Cc = X - mean, C - mean
    d = ((Xc[:, None, :] - Cc[None, :, :]) ** 2).sum(axis=2)
    labels = d.argmin(axis=1)
    new = Cc.copy()
    for j in range(C.shape[0]):
        mask = (labels == j) & (w > 0)
        if w[mask].sum() > 0:
            new[j] = np.average(Xc[mask], axis=0, weights=w[mask])
    spread = max(float(np.abs(Xc).max()), TINY)
    moved = float(np.abs(new - Cc).max())
    if moved > rtol * spread:
        return (
            f"certified_=True but a Lloyd step moves a centre by {moved:.3g} "
            f"(data spread {spread:.3g})"
        )
    return None


def check_annealed(est, X, ref, a=1.0, rtol=1e-6, sample_weight=None):
    """Compare an AnnealedRBFKMeans fit with ``ref`` and check its certificate."""
    problem = compare_fit(
        est.labels_, est.cluster_centers_, est.inertia_, ref[:3], a, rtol
    )
    if problem:
        return problem
    if len(ref) > 3 and est.certified_ != ref[3]:
        return f"certified_={est.certified_}, {ref[3]} at unit scale"
    if est.certified_:
        return lloyd_fixed_point(
            X, est.cluster_centers_, sample_weight, a, 1e-9 if rtol < 1e-4 else 1e-4
        )
    return None


def fit_ref(est):
    ref = (est.labels_.copy(), est.cluster_centers_.astype(np.float64), est.inertia_)
    if hasattr(est, "certified_"):
        ref += (est.certified_,)
    return ref


def valid_proba(P, n, k):
    P = np.asarray(P)
    if P.shape != (n, k):
        return f"predict_proba of shape {P.shape}, expected {(n, k)}"
    if not np.all(np.isfinite(P)):
        return "non-finite predict_proba"
    if P.min() < 0 or np.abs(P.sum(axis=1) - 1).max() > 1e-4:
        return "predict_proba rows are not distributions"
    return None


def blobs(n=150, d=2, k=3, std=0.8, seed=1):
    X, y = make_blobs(
        n_samples=n, centers=k, n_features=d, cluster_std=std, random_state=seed
    )
    idx = np.array([np.flatnonzero(y == j)[0] for j in range(k)])
    return X, y, idx


def quietly(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# -- 1. scales ----------------------------------------------------------------


SCALES = [
    1e-300,
    1e-250,
    1e-200,
    1e-160,
    1e-155,
    1e-150,
    1e-100,
    1e-77,
    1e-50,
    1e-40,
    1e-30,
    1e-20,
    1e-10,
    1.0,
    1e10,
    1e20,
    1e30,
    1e38,
    1e50,
    1e77,
    1e100,
    1e150,
    1e152,
    1e155,
    1e160,
    1e200,
    1e250,
    1e300,
    1e307,
    # and a few that are not powers of 10 (nor of 2)
    3.7e-123,
    2.5e-7,
    0.3,
    6.02e23,
    7.3e151,
    3.3e37,
]


def zone(a, q0, conservative0):
    """What a fit at scale ``a`` may do, from unit-scale quantities.

    ``"error"`` where ``a^2 q0`` (the distortion or loss) overflows float64,
    ``"result"`` where even ``a^2`` times the conservative bound
    ``4 d W max|X0 - mean|^2`` fits, ``"either"`` in between.
    """
    la = 2.0 * np.log2(a)
    if q0 > 0 and la + np.log2(q0) >= FLOAT64_MAX_LOG2:
        return "error"
    if la + np.log2(conservative0) < FLOAT64_MAX_LOG2 - 1:
        return "result"
    return "either"


def scaled_rows(Xu, a, rtol):
    """``a Xu`` in the dtype of ``Xu``, or None where it cannot be represented.

    None when a value overflows or every value underflows, or when the
    scaled rows no longer hold ``Xu`` to ``rtol``.
    """
    with np.errstate(over="ignore"):
        X = (Xu.astype(np.float64) * a).astype(Xu.dtype)
    if not np.all(np.isfinite(X)) or not np.any(X):
        return None
    if np.abs(X.astype(np.float64) / a - Xu).max() > rtol * np.abs(Xu).max():
        return None
    return X


def family_scales():
    fam = "scales"
    X0, _, idx = blobs()
    n, d = X0.shape
    mag0 = float(np.abs(X0 - X0.mean(axis=0)).max())
    conservative0 = 4.0 * d * n * mag0**2
    C0 = X0[idx] + 0.3  # rough centres for the polish and the loss
    for dtype, rtol in ((np.float64, 1e-6), (np.float32, 1e-3)):
        name = np.dtype(dtype).name
        Xu = X0.astype(dtype)
        Cu = C0.astype(dtype)
        ref_rbf = quietly(lambda: fit_ref(RBFKMeans(3, init=Xu[idx]).fit(Xu)))
        ref_ann = quietly(lambda: fit_ref(AnnealedRBFKMeans(3).fit(Xu)))
        ref_auto = quietly(
            lambda: fit_ref(AnnealedRBFKMeans("auto", max_clusters=6).fit(Xu))
        )
        c, lab, inertia, _ = quietly(kmeans_polish, Xu, Cu)
        ref_pol = (lab, c.astype(np.float64), inertia)
        ref_loss = {
            act: quietly(
                rbf_kmeans_loss, Xu, Cu, sigma=1.0, activation=act, return_gradient=True
            )
            for act in ("softmax", "entmax15")
        }
        ref_transform = quietly(
            lambda: RBFKMeans(3, init=Xu[idx]).fit(Xu).transform(Xu)
        ).astype(np.float64)
        for a in SCALES:
            X = scaled_rows(Xu, a, rtol)
            if X is None:
                continue
            C = (Cu.astype(np.float64) * a).astype(dtype)
            tag = f"{name} a={a:.3g}"
            expect = zone(a, ref_rbf[2], conservative0)

            def rbf_check(est, caught, a=a, X=X):
                problem = compare_fit(
                    est.labels_, est.cluster_centers_, est.inertia_, ref_rbf, a, rtol
                )
                if problem:
                    return problem
                problem = valid_proba(est.predict_proba(X), n, 3)
                if problem:
                    return problem
                T = est.transform(X).astype(np.float64) / a
                if not np.allclose(T, ref_transform, rtol=rtol, atol=rtol * mag0):
                    return "transform is not a times the unit-scale distances"
                if not np.array_equal(est.predict(X), est.labels_):
                    return "predict(X) differs from labels_"
                return None

            api_case(
                fam,
                f"RBFKMeans(init=rows of X) {tag}",
                lambda X=X: RBFKMeans(3, init=X[idx]).fit(X),
                rbf_check,
                expect=expect,
                keywords=("large", "overflow"),
            )
            api_case(
                fam,
                f"AnnealedRBFKMeans {tag}",
                lambda X=X: AnnealedRBFKMeans(3).fit(X),
                lambda est, caught, a=a, X=X: check_annealed(est, X, ref_ann, a, rtol),
                expect=zone(a, ref_ann[2], conservative0),
                keywords=("large", "overflow"),
            )
            api_case(
                fam,
                f"AnnealedRBFKMeans('auto') {tag}",
                lambda X=X: AnnealedRBFKMeans("auto", max_clusters=6).fit(X),
                lambda est, caught, a=a, X=X: check_annealed(est, X, ref_auto, a, rtol),
                expect=zone(a, ref_auto[2], conservative0),
                keywords=("large", "overflow"),
            )
            api_case(
                fam,
                f"kmeans_polish {tag}",
                lambda X=X, C=C: kmeans_polish(X, C),
                lambda r, caught, a=a: compare_fit(r[1], r[0], r[2], ref_pol, a, rtol),
                expect=zone(a, ref_pol[2], conservative0),
                keywords=("large", "overflow"),
            )
            acts = ("softmax", "entmax15") if dtype == np.float64 else ("softmax",)
            for act in acts:
                loss0, gc0, gx0 = ref_loss[act]

                def loss_check(r, caught, a=a, loss0=loss0, gc0=gc0, gx0=gx0):
                    loss, gc, gx = r
                    if not np.isfinite(loss):
                        return f"loss {loss}"
                    if not close_value(float(loss), float(loss0) * a * a, rtol):
                        return f"loss {loss:.8g}, expected {loss0 * a * a:.8g}"
                    for name_, g, g0 in (("centers", gc, gc0), ("X", gx, gx0)):
                        g = np.asarray(g, dtype=np.float64)
                        if not np.all(np.isfinite(g)):
                            return f"non-finite grad_{name_}"
                        tol = rtol * max(float(np.abs(g0).max()), 1.0)
                        if np.abs(g / a - g0).max() > 10 * tol:
                            return f"grad_{name_} is not a times the unit gradient"
                    return None

                api_case(
                    fam,
                    f"rbf_kmeans_loss({act}, sigma=a) {tag}",
                    lambda X=X, C=C, a=a, act=act: rbf_kmeans_loss(
                        X, C, sigma=a, activation=act, return_gradient=True
                    ),
                    loss_check,
                    expect=zone(a, loss0, conservative0),
                    keywords=("large", "overflow"),
                )


# -- 2. offsets ---------------------------------------------------------------


def family_offsets():
    fam = "offsets"
    X0, _, idx = blobs()
    d = X0.shape[1]
    spread = float(X0.std())
    shapes = {
        "all columns": np.ones(d),
        "column 0": np.eye(d)[0],
        "columns +-": np.where(np.arange(d) % 2, -1.0, 1.0),
    }
    configs = {
        "RBFKMeans(k-means++, random_state=0)": lambda X: RBFKMeans(
            3, random_state=0
        ).fit(X),
        "RBFKMeans(init=rows)": lambda X: RBFKMeans(3, init=X[idx]).fit(X),
        "AnnealedRBFKMeans": lambda X: AnnealedRBFKMeans(3).fit(X),
        "AnnealedRBFKMeans('auto')": lambda X: AnnealedRBFKMeans(
            "auto", max_clusters=6
        ).fit(X),
    }
    for dtype, rtol, offsets in (
        (np.float64, 1e-6, (0.0, 1e3, 1e6, 1e8, 1e10, 1e12)),
        (np.float32, 1e-3, (0.0, 1e3)),
    ):
        name = np.dtype(dtype).name
        for shape_name, direction in shapes.items():
            for b in offsets:
                shift = b * direction
                X = (X0 + shift).astype(dtype)
                # The data as represented, moved back to the origin (exact).
                Xr = (X.astype(np.float64) - shift).astype(dtype)
                if np.abs(Xr - X0).max() > 1e-3 * spread:
                    continue
                for cname, make in configs.items():
                    ref = quietly(lambda make=make, Xr=Xr: fit_ref(make(Xr)))

                    def check(est, caught, ref=ref):
                        labels = np.asarray(est.labels_)
                        if matching(labels, ref[0]) is None:
                            n = int(np.sum(labels != ref[0]))
                            return f"labels differ from the fit at offset 0 ({n})"
                        if not np.all(np.isfinite(est.cluster_centers_)):
                            return "non-finite centres"
                        if not close_value(est.inertia_, ref[2], rtol):
                            return f"inertia {est.inertia_:.10g}, {ref[2]:.10g} at 0"
                        if len(ref) > 3 and est.certified_ != ref[3]:
                            return f"certified_={est.certified_}, {ref[3]} at 0"
                        return None

                    api_case(
                        fam,
                        f"{cname} {name} +{b:.0e} on {shape_name}",
                        lambda make=make, X=X: make(X),
                        check,
                    )


# -- 3. dtypes ----------------------------------------------------------------


def family_dtypes():
    fam = "dtypes"
    X0, _, idx = blobs(n=90, d=3, seed=3)
    Xi = np.round(X0 * 10).astype(np.int64)
    rng = np.random.default_rng(0)
    protos = rng.random((3, 12)) < 0.5
    Xb = np.repeat(protos, 20, axis=0) ^ (rng.random((60, 12)) < 0.05)
    bidx = np.array([0, 20, 40])

    def obj(X, conv=float):
        out = np.empty(X.shape, dtype=object)
        for ij in np.ndindex(X.shape):
            out[ij] = conv(X[ij])
        return out

    big_endian = X0.astype(">f8")
    ro = X0.copy()
    ro.flags.writeable = False
    tmpdir = tempfile.mkdtemp(prefix="bench_reliability_")
    mm = np.lib.format.open_memmap(
        os.path.join(tmpdir, "x.npy"), mode="w+", dtype=np.float64, shape=X0.shape
    )
    mm[:] = X0
    wide = np.repeat(X0, 2, axis=1)
    # (name, X, the same data as a reference, init rows, rtol, expect)
    variants = [
        ("float16", X0.astype(np.float16), X0.astype(np.float16), idx, 1e-4, "result"),
        ("int64", Xi, Xi, idx, 1e-6, "result"),
        ("int32", Xi.astype(np.int32), Xi, idx, 1e-6, "result"),
        (
            "int8",
            np.clip(Xi, -128, 127).astype(np.int8),
            np.clip(Xi, -128, 127),
            idx,
            1e-6,
            "result",
        ),
        ("uint8", (Xi - Xi.min()).astype(np.uint8), Xi - Xi.min(), idx, 1e-6, "result"),
        ("bool", Xb, Xb, bidx, 1e-6, "result"),
        ("object of floats", obj(X0), X0, idx, 1e-6, "result"),
        ("object of ints", obj(Xi, int), Xi, idx, 1e-6, "result"),
        ("object of Fraction", obj(Xi, Fraction), Xi, idx, 1e-6, "result"),
        (
            "object of Decimal",
            obj(X0, lambda v: Decimal(str(float(v)))),
            X0,
            idx,
            1e-6,
            "result",
        ),
        (
            "object of numeric strings",
            obj(X0, lambda v: str(float(v))),
            X0,
            idx,
            1e-6,
            "either",
        ),
        ("big-endian >f8", big_endian, X0, idx, 1e-6, "result"),
        (
            "big-endian >f4",
            X0.astype(">f4"),
            X0.astype(np.float32),
            idx,
            1e-6,
            "result",
        ),
        ("Fortran order", np.asfortranarray(X0), X0, idx, 1e-6, "result"),
        ("non-contiguous columns", wide[:, ::2], X0, idx, 1e-6, "result"),
        ("read-only", ro, X0, idx, 1e-6, "result"),
        ("memmap", mm, X0, idx, 1e-6, "result"),
        ("list of lists", X0.tolist(), X0, idx, 1e-6, "result"),
        ("complex128", X0.astype(complex), None, idx, 0, "error"),
        ("strings", obj(X0, lambda v: "x"), None, idx, 0, "error"),
        (
            # scikit-learn's KMeans clusters these as seconds since 1970.
            "datetime64",
            Xi.astype("datetime64[s]"),
            Xi,
            idx,
            1e-6,
            "either",
        ),
        (
            "object with None",
            np.where(np.arange(X0.size).reshape(X0.shape) == 5, None, obj(X0)),
            None,
            idx,
            0,
            "error",
        ),
    ]
    try:
        import pandas as pd

        df = pd.DataFrame(X0, columns=["a", "b", "c"])
        df_int = pd.DataFrame(Xi, columns=["a", "b", "c"]).astype("Int64")
        df_na = df_int.copy()
        df_na.iloc[3, 1] = pd.NA
        variants += [
            ("DataFrame float64", df, X0, idx, 1e-6, "result"),
            ("DataFrame nullable Int64", df_int, Xi, idx, 1e-6, "result"),
            ("DataFrame with pd.NA", df_na, None, idx, 0, "error"),
        ]
    except ImportError:
        pass
    core = {
        "float16",
        "int64",
        "bool",
        "object of floats",
        "big-endian >f8",
        "complex128",
        "strings",
        "list of lists",
    }
    for name, X, Xref, rows, rtol, expect in variants:
        init = None
        if Xref is not None:
            Xref = np.asarray(Xref, dtype=np.float64)
            init = Xref[rows]
            ref_rbf = quietly(lambda: fit_ref(RBFKMeans(3, init=init).fit(Xref)))
            ref_ann = quietly(lambda: fit_ref(AnnealedRBFKMeans(3).fit(Xref)))
            c, lab, inertia, _ = quietly(kmeans_polish, Xref, init + 0.1)
            ref_pol = (lab, c, inertia)
            ref_loss = quietly(rbf_kmeans_loss, Xref, init + 0.1, sigma=1.0)
        else:
            init = X0[rows]
        keywords = (
            "complex",
            "string",
            "convert",
            "dtype",
            "could not",
            "nan",
            "float",
            "numeric",
            "datetime",
            "type",
        )
        api_case(
            fam,
            f"RBFKMeans(init=rows) {name}",
            lambda X=X, init=init: RBFKMeans(3, init=init).fit(X),
            None
            if Xref is None
            else lambda est, caught, ref=ref_rbf, rtol=rtol: compare_fit(
                est.labels_, est.cluster_centers_, est.inertia_, ref, 1, rtol
            ),
            expect=expect,
            keywords=keywords,
            inputs=[X],
        )
        api_case(
            fam,
            f"AnnealedRBFKMeans {name}",
            lambda X=X: AnnealedRBFKMeans(3).fit(X),
            None
            if Xref is None
            else lambda est, caught, ref=ref_ann, rtol=rtol, Xref=Xref: check_annealed(
                est, Xref, ref, 1, rtol
            ),
            expect=expect,
            keywords=keywords,
            inputs=[X],
        )
        if name in core:
            api_case(
                fam,
                f"kmeans_polish {name}",
                lambda X=X, init=init: kmeans_polish(X, init + 0.1),
                None
                if Xref is None
                else lambda r, caught, ref=ref_pol, rtol=rtol: compare_fit(
                    r[1], r[0], r[2], ref, 1, rtol
                ),
                expect=expect,
                keywords=keywords,
                inputs=[X],
            )
            api_case(
                fam,
                f"rbf_kmeans_loss {name}",
                lambda X=X, init=init: rbf_kmeans_loss(X, init + 0.1, sigma=1.0),
                None
                if Xref is None
                else lambda r, caught, ref=ref_loss, rtol=rtol: (
                    None
                    if close_value(r, ref, rtol)
                    else f"loss {r!r}, expected {ref!r}"
                ),
                expect=expect,
                keywords=keywords,
                inputs=[X],
            )

    # float32 against float64 on the same data, and crossed dtypes.
    X32 = X0.astype(np.float32)
    for cname, make in (
        ("RBFKMeans(init=rows)", lambda X: RBFKMeans(3, init=X[idx]).fit(X)),
        ("AnnealedRBFKMeans", lambda X: AnnealedRBFKMeans(3).fit(X)),
    ):
        est64 = quietly(make, X0)
        ref64 = fit_ref(est64)
        api_case(
            fam,
            f"{cname} float32 agrees with float64",
            lambda make=make: make(X32),
            lambda est, caught, ref=ref64: compare_fit(
                est.labels_, est.cluster_centers_, est.inertia_, ref[:3], 1, 1e-4
            ),
        )
        for src, dst, Xs in (("float64", "float32", X32), ("float32", "float64", X0)):
            fitted = est64 if src == "float64" else quietly(make, X32)

            def cross(_, caught, fitted=fitted, Xs=Xs, ref=ref64):
                labels = fitted.predict(Xs)
                if matching(labels, ref[0]) is None:
                    return "predict labels differ"
                problem = valid_proba(fitted.predict_proba(Xs), len(Xs), 3)
                if problem:
                    return problem
                T = fitted.transform(Xs)
                if not np.all(np.isfinite(T)):
                    return "non-finite transform"
                s = fitted.score(Xs)
                if not close_value(-s, ref[2], 1e-4):
                    return f"score {s:.8g}, expected {-ref[2]:.8g}"
                return None

            api_case(
                fam,
                f"{cname} fitted on {src}, predict/transform/score on {dst}",
                lambda fitted=fitted, Xs=Xs: fitted.predict(Xs),
                cross,
            )
    # Weights of other dtypes.
    w = np.arange(X0.shape[0]) % 3 + 1
    ref_w = quietly(
        lambda: fit_ref(RBFKMeans(3, init=X0[idx]).fit(X0, sample_weight=w))
    )
    for wname, wv, expect in (
        ("int weights", w, "result"),
        ("float32 weights", w.astype(np.float32), "result"),
        ("list weights", w.tolist(), "result"),
        ("object weights", w.astype(object), "result"),
        ("bool weights", w > 1, "either"),
        ("string weights", w.astype(str), "either"),
        ("complex weights", w.astype(complex), "error"),
    ):
        api_case(
            fam,
            f"RBFKMeans(init=rows) with {wname}",
            lambda wv=wv: RBFKMeans(3, init=X0[idx]).fit(X0, sample_weight=wv),
            None
            if wname in ("bool weights",)
            else lambda est, caught: compare_fit(
                est.labels_, est.cluster_centers_, est.inertia_, ref_w, 1, 1e-6
            ),
            expect=expect,
            keywords=("complex", "dtype", "weight", "convert", "float"),
            inputs=[wv],
        )
    del mm, variants
    shutil.rmtree(tmpdir, ignore_errors=True)


# -- 4. sparse ----------------------------------------------------------------


def family_sparse():
    fam = "sparse"
    rng = np.random.default_rng(4)
    n, d, k = 120, 8, 3
    y = np.repeat(np.arange(k), n // k)
    support = np.zeros((k, d), bool)
    for j in range(k):
        support[j, rng.choice(d, 3, replace=False)] = True
    X0 = np.where(support[y], rng.normal(3.0, 0.5, (n, d)), 0.0)
    X0[rng.random((n, d)) < 0.03] = 0.0
    idx = np.array([np.flatnonzero(y == j)[0] for j in range(k)])

    def csr64(A):
        M = sp.csr_matrix(A)
        M.indices = M.indices.astype(np.int64)
        M.indptr = M.indptr.astype(np.int64)
        return M

    def explicit_zeros(A):
        M = sp.csr_matrix(A)
        M.data[::7] = 0.0  # stored zeros
        return M, np.where(M.toarray() == 0, 0, A)

    def unsorted(A):
        M = sp.csr_matrix(A)
        for i in range(M.shape[0]):
            s = slice(M.indptr[i], M.indptr[i + 1])
            M.indices[s] = M.indices[s][::-1]
            M.data[s] = M.data[s][::-1]
        M.has_sorted_indices = False
        return M

    def duplicates(A):
        C = sp.coo_matrix(A)
        half = C.data / 2
        return sp.coo_matrix(
            (np.r_[half, half], (np.r_[C.row, C.row], np.r_[C.col, C.col])),
            shape=A.shape,
        )

    Xz, Xz_dense = explicit_zeros(X0)
    offset_col = X0.copy()
    offset_col[:, 0] += 1e8
    offset_all = X0 + 1e8
    formats = [
        ("csr_matrix", sp.csr_matrix(X0), X0),
        ("csc_matrix", sp.csc_matrix(X0), X0),
        ("coo_matrix", sp.coo_matrix(X0), X0),
        ("lil_matrix", sp.lil_matrix(X0), X0),
        ("dok_matrix", sp.dok_matrix(X0), X0),
        ("dia_matrix", quietly(sp.dia_matrix, X0), X0),
        ("bsr_matrix", sp.bsr_matrix(X0), X0),
        ("csr_array", sp.csr_array(X0), X0),
        ("coo_array", sp.coo_array(X0), X0),
        ("csr int64 indices", csr64(X0), X0),
        ("csr float32", sp.csr_matrix(X0.astype(np.float32)), X0.astype(np.float32)),
        ("csr explicit zeros", Xz, Xz_dense),
        ("csr unsorted indices", unsorted(X0), X0),
        ("coo duplicate entries", duplicates(X0), X0),
        ("csr column 0 offset by 1e8", sp.csr_matrix(offset_col), offset_col),
        ("csr all columns offset by 1e8", sp.csr_matrix(offset_all), offset_all),
    ]
    for name, Xs, Xd in formats:
        rtol = 1e-3 if Xd.dtype == np.float32 else 1e-6
        spread = float(np.abs(Xd - Xd.mean(axis=0)).max())
        # Centres are compared to the data's spread, not to their magnitude.
        atol = rtol * spread + 8 * np.finfo(Xd.dtype).eps * float(np.abs(Xd).max())
        est_rbf = quietly(lambda Xd=Xd: RBFKMeans(3, init=Xd[idx]).fit(Xd))
        est_ann = quietly(lambda Xd=Xd: AnnealedRBFKMeans(3).fit(Xd))

        def fit_check(est, caught, ref=None, Xd=Xd):
            problem = compare_fit(
                est.labels_,
                est.cluster_centers_,
                est.inertia_,
                ref[:3],
                1,
                rtol,
                atol=atol,
            )
            if problem:
                return problem
            if len(ref) > 3:
                if est.certified_ != ref[3]:
                    return f"certified_={est.certified_}, {ref[3]} dense"
                if est.certified_:
                    return lloyd_fixed_point(Xd, est.cluster_centers_, rtol=1e-6)
            return None

        api_case(
            fam,
            f"RBFKMeans(init=rows).fit {name}",
            lambda Xs=Xs, Xd=Xd: RBFKMeans(3, init=Xd[idx]).fit(Xs),
            lambda est, caught, ref=fit_ref(est_rbf): fit_check(est, caught, ref),
            inputs=[Xs],
        )
        api_case(
            fam,
            f"AnnealedRBFKMeans.fit {name}",
            lambda Xs=Xs: AnnealedRBFKMeans(3).fit(Xs),
            lambda est, caught, ref=fit_ref(est_ann): fit_check(est, caught, ref),
            inputs=[Xs],
        )
        for ename, est in (("RBFKMeans", est_rbf), ("AnnealedRBFKMeans", est_ann)):

            def methods(res, caught, est=est, Xd=Xd):
                labels, T, P, s = res
                if not np.array_equal(labels, est.predict(Xd)):
                    return "predict differs from the dense predict"
                Td = est.transform(Xd)
                if not np.all(np.isfinite(T)) or np.abs(T - Td).max() > atol * 10:
                    return f"transform off by {np.abs(T - Td).max():.3g}"
                Pd = est.predict_proba(Xd)
                if not np.all(np.isfinite(P)) or np.abs(P - Pd).max() > 1e-6:
                    return f"predict_proba off by {np.abs(P - Pd).max():.3g}"
                sd = est.score(Xd)
                if not close_value(s, sd, rtol):
                    return f"score {s:.10g}, dense {sd:.10g}"
                return None

            api_case(
                fam,
                f"{ename} fitted dense: predict/transform/predict_proba/score {name}",
                lambda est=est, Xs=Xs: (
                    est.predict(Xs),
                    est.transform(Xs),
                    est.predict_proba(Xs),
                    est.score(Xs),
                ),
                methods,
                inputs=[Xs],
            )
        c, lab, inertia, _ = quietly(kmeans_polish, Xd, Xd[idx])
        api_case(
            fam,
            f"kmeans_polish {name}",
            lambda Xs=Xs, Xd=Xd: kmeans_polish(Xs, Xd[idx]),
            lambda r, caught, ref=(lab, c, inertia): compare_fit(
                r[1], r[0], r[2], ref, 1, rtol, atol=atol
            ),
            inputs=[Xs],
        )
        loss_ref = quietly(rbf_kmeans_loss, Xd, Xd[idx], sigma=1.0)
        api_case(
            fam,
            f"rbf_kmeans_loss {name}",
            lambda Xs=Xs, Xd=Xd: rbf_kmeans_loss(Xs, Xd[idx], sigma=1.0),
            lambda r, caught, ref=loss_ref: (
                None if close_value(r, ref, rtol) else f"loss {r!r}, dense {ref!r}"
            ),
            inputs=[Xs],
        )


# -- 5. ties and duplicates -------------------------------------------------


def distinct_warning(caught):
    return any(
        issubclass(w.category, ConvergenceWarning)
        and "Number of distinct clusters" in str(w.message)
        for w in caught
    )


def family_ties():
    fam = "ties"
    estimators = {
        "RBFKMeans(random_state=0)": lambda k: RBFKMeans(k, random_state=0),
        "RBFKMeans(init='random')": lambda k: RBFKMeans(
            k, init="random", random_state=0
        ),
        "AnnealedRBFKMeans": lambda k: AnnealedRBFKMeans(k),
    }
    rng = np.random.default_rng(5)
    distinct3 = rng.normal(size=(3, 2)) * 5
    datasets = {
        "all rows equal": (np.tile([[1.5, -2.0]], (50, 1)), 1),
        "all rows zero": (np.zeros((50, 2)), 1),
        "all rows equal at 1e8": (np.tile([[1e8, 3e8]], (50, 1)), 1),
        "all rows equal at 1e-300": (np.tile([[1e-300, 3e-300]], (50, 1)), 1),
        "3 distinct rows, k=5": (np.repeat(distinct3, 10, axis=0), 3),
    }
    for dname, (X, n_distinct) in datasets.items():
        for k in (3, 1) if n_distinct == 1 else (5,):
            for ename, make in estimators.items():

                def check(est, caught, X=X, k=k, n_distinct=n_distinct, ename=ename):
                    C = est.cluster_centers_
                    if not np.all(np.isfinite(C)) or not np.isfinite(est.inertia_):
                        return "non-finite centres or inertia"
                    # RBFKMeans is soft: distinct rows pull on each other's
                    # centres by exp(-8) at the default width.
                    soft = ename.startswith("RBFKMeans") and n_distinct > 1
                    rtol = 1e-2 if soft else 1e-12
                    total = float(((X - X.mean(axis=0)) ** 2).sum())
                    bound = rtol * total + 1e-12 * float((X**2).sum())
                    if est.inertia_ > max(bound, TINY):
                        return f"inertia {est.inertia_:.3g}, expected 0"
                    spread = max(float(np.abs(X).max()), TINY)
                    for r in np.unique(X, axis=0):
                        if np.abs(C - r).max(axis=1).min() > rtol * spread:
                            return f"the distinct row {r} is not a centre"
                    if not np.all((est.labels_ >= 0) & (est.labels_ < k)):
                        return "labels out of range"
                    if not np.array_equal(est.predict(X), est.labels_):
                        return "predict(X) differs from labels_"
                    problem = valid_proba(est.predict_proba(X), X.shape[0], k)
                    if problem:
                        return problem
                    if k > n_distinct and not distinct_warning(caught):
                        return "no 'Number of distinct clusters' ConvergenceWarning"
                    if k <= n_distinct and distinct_warning(caught):
                        return "a 'Number of distinct clusters' warning at k=1"
                    if getattr(est, "certified_", False):
                        return lloyd_fixed_point(X, C)
                    return None

                api_case(
                    fam,
                    f"{ename} k={k} on {dname}",
                    lambda make=make, k=k, X=X: make(k).fit(X),
                    check,
                    inputs=[X],
                )
            api_case(
                fam,
                f"kmeans_polish k={k} on {dname}",
                lambda X=X, k=k: kmeans_polish(X, X[:k] + 1.0),
                lambda r, caught, X=X: (
                    None
                    if np.all(np.isfinite(r[0])) and r[2] == 0
                    else f"inertia {r[2]!r}, centres {r[0].tolist()}"
                ),
                inputs=[X],
            )

    # Exact ties: a test point halfway between two centres.
    X = np.array([[-1.2], [-1.0], [-0.8], [0.8], [1.0], [1.2]])
    for ename, make in (
        (
            "RBFKMeans(init=[-1, 1], sigma=0.1)",
            lambda: RBFKMeans(2, init=[[-1.0], [1.0]], sigma=0.1),
        ),
        ("AnnealedRBFKMeans", lambda: AnnealedRBFKMeans(2)),
    ):

        def tie_check(est, caught):
            C = np.sort(est.cluster_centers_.ravel())
            if not np.allclose(C, [-1.0, 1.0], atol=1e-12):
                return f"centres {C}, expected -1 and 1"
            t = np.array([[0.0], [-1.0], [1.0]])
            lab = est.predict(t)
            if lab[0] not in (0, 1) or lab[1] == lab[2]:
                return f"predict {lab}"
            T = est.transform(t)
            if abs(T[0, 0] - T[0, 1]) > 1e-12:
                return f"transform of the tie point {T[0]} not equal"
            P = est.predict_proba(t)
            if not np.all(np.isfinite(P)) or abs(P[0, 0] - P[0, 1]) > 1e-12:
                return f"predict_proba of the tie point {P[0]}"
            return None

        api_case(
            fam,
            f"{ename}: tie point halfway between centres",
            lambda make=make: make().fit(X),
            tie_check,
        )
    # A training point at an exact tie (symmetric data, 1-D and 2-D).
    sym1 = np.array([[-1.2], [-1.0], [-0.8], [0.0], [0.8], [1.0], [1.2]])
    square = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
    square = np.concatenate([square, square * 1.1, [[0.0, 0.0]]])
    for dname, Xt, k in (
        ("symmetric 1-D with 0", sym1, 2),
        ("square with centre", square, 4),
        ("square with centre", square, 2),
    ):
        for ename, make in estimators.items():

            def check(est, caught, Xt=Xt, k=k):
                C = est.cluster_centers_
                if not np.all(np.isfinite(C)) or not np.isfinite(est.inertia_):
                    return "non-finite centres or inertia"
                d = ((Xt[:, None, :] - C[None]) ** 2).sum(axis=2)
                nearest = d[np.arange(len(Xt)), est.labels_]
                if np.any(nearest > d.min(axis=1) * (1 + 1e-12) + 1e-300):
                    return "a label is not a nearest centre"
                expected = float(d.min(axis=1).sum())
                if not close_value(est.inertia_, expected, 1e-9):
                    return f"inertia {est.inertia_!r}, recomputed {expected!r}"
                if getattr(est, "certified_", False):
                    return lloyd_fixed_point(Xt, C)
                return None

            api_case(
                fam,
                f"{ename} k={k} on {dname}",
                lambda make=make, Xt=Xt, k=k: make(k).fit(Xt),
                check,
            )

    # Duplicated rows with integer weights against repeated rows.
    Xu, _, idx = blobs(n=60, seed=6)
    w = np.random.default_rng(6).integers(1, 5, size=Xu.shape[0])
    Xrep = np.repeat(Xu, w, axis=0)
    idx_rep = np.cumsum(w)[idx] - w[idx]  # first copy of each init row
    for ename, make, rows in (
        ("RBFKMeans(init=rows)", lambda X, rows: RBFKMeans(3, init=X[rows]), True),
        ("AnnealedRBFKMeans", lambda X, rows: AnnealedRBFKMeans(3), False),
    ):
        ref = quietly(lambda: fit_ref(make(Xrep, idx_rep).fit(Xrep)))
        ref = (ref[0][np.cumsum(w) - 1], ref[1], ref[2]) + ref[3:]

        def check(est, caught, ref=ref):
            problem = compare_fit(
                est.labels_, est.cluster_centers_, est.inertia_, ref[:3], 1, 1e-6
            )
            if problem:
                return problem + " (weights vs repeated rows)"
            if len(ref) > 3 and est.certified_ != ref[3]:
                return f"certified_={est.certified_}, {ref[3]} with repeated rows"
            return None

        api_case(
            fam,
            f"{ename}: integer weights equal repeated rows",
            lambda make=make: make(Xu, idx).fit(Xu, sample_weight=w),
            check,
            inputs=[w],
        )
    c, lab, inertia, _ = quietly(kmeans_polish, Xrep, Xu[idx])
    api_case(
        fam,
        "kmeans_polish: integer weights equal repeated rows",
        lambda: kmeans_polish(Xu, Xu[idx], sample_weight=w),
        lambda r, caught: compare_fit(
            r[1], r[0], r[2], (lab[np.cumsum(w) - 1], c, inertia), 1, 1e-6
        ),
    )
    for act in ("softmax", "entmax15"):
        ref_loss = rbf_kmeans_loss(
            Xrep, Xu[idx], sigma=0.7, activation=act, return_gradient=True
        )
        api_case(
            fam,
            f"rbf_kmeans_loss({act}): integer weights equal repeated rows",
            lambda act=act: rbf_kmeans_loss(
                Xu,
                Xu[idx],
                sigma=0.7,
                activation=act,
                sample_weight=w,
                return_gradient=True,
            ),
            lambda r, caught, ref=ref_loss: (
                None
                if close_value(r[0], ref[0], 1e-9)
                and np.allclose(r[1], ref[1], rtol=1e-9, atol=1e-9)
                else f"loss {r[0]!r} vs {ref[0]!r} or grad_centers differ"
            ),
        )
    # Weights scaled by a constant; zero weights against removed rows.
    ref_w = quietly(
        lambda: fit_ref(RBFKMeans(3, init=Xu[idx]).fit(Xu, sample_weight=w))
    )
    for c_ in (1e-3, 0.5, 3.0, 1e3, 1e-300, 1e300):
        ws = w * c_
        expected_zone = "either" if c_ in (1e-300, 1e300) else "result"
        api_case(
            fam,
            f"RBFKMeans(init=rows): weights times {c_:g}",
            lambda ws=ws: RBFKMeans(3, init=Xu[idx]).fit(Xu, sample_weight=ws),
            lambda est, caught, c_=c_: compare_fit(
                est.labels_, est.cluster_centers_, est.inertia_ / c_, ref_w, 1, 1e-6
            ),
            expect=expected_zone,
            keywords=("weight", "large", "overflow", "small"),
        )
    keep = np.arange(Xu.shape[0]) % 4 != 1
    keep[idx] = True
    wz = np.where(keep, 1.0, 0.0)
    for ename, make in (
        ("RBFKMeans(init=rows)", lambda: RBFKMeans(3, init=Xu[idx])),
        ("AnnealedRBFKMeans", lambda: AnnealedRBFKMeans(3)),
    ):
        ref = quietly(lambda make=make: fit_ref(make().fit(Xu[keep])))
        api_case(
            fam,
            f"{ename}: zero weights equal removed rows",
            lambda make=make: make().fit(Xu, sample_weight=wz),
            lambda est, caught, ref=ref: compare_fit(
                est.labels_[keep], est.cluster_centers_, est.inertia_, ref[:3], 1, 1e-6
            ),
        )


# -- 6. degenerate k ----------------------------------------------------------


def family_degenerate_k():
    fam = "degenerate-k"
    X, _, idx = blobs(n=40, seed=7)
    n, d = X.shape
    mean = X.mean(axis=0)
    total = float(((X - mean) ** 2).sum())
    fits = {
        "RBFKMeans": lambda k, **kw: RBFKMeans(k, random_state=0, **kw),
        "AnnealedRBFKMeans": lambda k, **kw: AnnealedRBFKMeans(k, **kw),
    }
    for ename, make in fits.items():

        def k1(est, caught):
            if not np.allclose(est.cluster_centers_, mean[None], rtol=1e-9, atol=1e-12):
                return f"centre {est.cluster_centers_} is not the mean {mean}"
            if not close_value(est.inertia_, total, 1e-9):
                return f"inertia {est.inertia_!r}, expected {total!r}"
            if np.any(est.labels_ != 0):
                return "labels not all 0"
            P = est.predict_proba(X)
            if not np.all(P == 1.0):
                return "predict_proba is not all ones"
            return None

        api_case(fam, f"{ename} n_clusters=1", lambda make=make: make(1).fit(X), k1)

        def kn(est, caught, ename=ename):
            C = est.cluster_centers_
            if not np.all(np.isfinite(C)) or not np.isfinite(est.inertia_):
                return "non-finite centres or inertia"
            if ename == "AnnealedRBFKMeans":
                if est.inertia_ > 1e-9 * total:
                    return f"inertia {est.inertia_:.3g}, expected 0 (k = n)"
                if est.certified_:
                    return lloyd_fixed_point(X, C)
                return None
            return valid_proba(est.predict_proba(X), n, n)

        api_case(
            fam, f"{ename} n_clusters=n_samples", lambda make=make: make(n).fit(X), kn
        )
        for bad in (n + 1, 0, -1, 2.5, None, "3"):
            api_case(
                fam,
                f"{ename} n_clusters={bad!r}",
                lambda make=make, bad=bad: make(bad).fit(X),
                expect="error",
                keywords=("n_clusters", "n_samples"),
            )
        api_case(
            fam,
            f"{ename} n_clusters=np.int64(3)",
            lambda make=make: make(np.int64(3)).fit(X),
            lambda est, caught: (
                None if est.cluster_centers_.shape == (3, d) else "wrong shape"
            ),
        )
        # One feature; one sample; two samples.
        X1 = np.r_[
            np.linspace(0, 1, 20), np.linspace(10, 11, 20), np.linspace(30, 31, 20)
        ][:, None]
        km = KMeans(3, n_init=10, random_state=0).fit(X1)

        def one_feature(est, caught):
            if not np.all(np.isfinite(est.cluster_centers_)):
                return "non-finite centres"
            if est.inertia_ > km.inertia_ * 1.01 + 1e-12:
                return f"inertia {est.inertia_:.6g} > KMeans {km.inertia_:.6g}"
            if getattr(est, "certified_", False):
                return lloyd_fixed_point(X1, est.cluster_centers_)
            return None

        api_case(
            fam, f"{ename} one feature", lambda make=make: make(3).fit(X1), one_feature
        )
        x1 = np.array([[3.0, -4.0]])
        api_case(
            fam,
            f"{ename} one sample, k=1",
            lambda make=make: make(1).fit(x1),
            lambda est, caught: (
                None
                if np.array_equal(est.cluster_centers_, x1)
                and est.inertia_ == 0
                and np.array_equal(est.labels_, [0])
                and np.array_equal(est.predict(x1), [0])
                else f"centres {est.cluster_centers_}, inertia {est.inertia_}"
            ),
        )
        api_case(
            fam,
            f"{ename} one sample, k=2",
            lambda make=make: make(2).fit(x1),
            expect="error",
            keywords=("n_clusters", "n_samples"),
        )
        x2 = np.array([[0.0, 0.0], [1.0, 2.0]])
        api_case(
            fam,
            f"{ename} two samples, k=2",
            lambda make=make: make(2).fit(x2),
            lambda est, caught: (
                None
                # RBFKMeans is soft: the two centres pull on each other.
                if est.inertia_ <= 1e-4 * 5.0
                and sorted(est.labels_.tolist()) == [0, 1]
                and np.all(np.isfinite(est.cluster_centers_))
                else f"inertia {est.inertia_}, labels {est.labels_}"
            ),
        )
        api_case(
            fam,
            f"{ename} k=1 with all weight on one sample",
            lambda make=make: make(1).fit(X, sample_weight=np.eye(n)[5]),
            lambda est, caught: (
                None
                if np.allclose(est.cluster_centers_, X[5:6], rtol=1e-12)
                and est.inertia_ == 0
                else f"centre {est.cluster_centers_}, inertia {est.inertia_}"
            ),
        )
        api_case(
            fam,
            f"{ename} k=2 with weight on one sample only",
            lambda make=make: make(2).fit(X, sample_weight=np.eye(n)[5]),
            lambda est, caught: (
                None
                if np.all(np.isfinite(est.cluster_centers_)) and est.inertia_ == 0
                else f"centres {est.cluster_centers_}, inertia {est.inertia_}"
            ),
            expect="either",
            keywords=("weight", "n_clusters", "distinct"),
        )
    # The functions.
    c, lab, inertia, _ = quietly(kmeans_polish, X, X[:1])
    api_case(
        fam,
        "kmeans_polish one centre",
        lambda: kmeans_polish(X, X[:1]),
        lambda r, caught: (
            None
            if np.allclose(r[0], mean[None]) and close_value(r[2], total, 1e-9)
            else f"centre {r[0]}, inertia {r[2]}"
        ),
    )
    api_case(
        fam,
        "kmeans_polish k=n",
        lambda: kmeans_polish(X, X + 0.01),
        lambda r, caught: None if r[2] <= 1e-20 else f"inertia {r[2]}",
    )
    api_case(
        fam,
        "kmeans_polish k>n",
        lambda: kmeans_polish(X[:2], X[:3]),
        expect="error",
        keywords=("n_clusters", "n_samples", "centers"),
    )
    api_case(
        fam,
        "kmeans_polish zero centres",
        lambda: kmeans_polish(X, X[:0]),
        expect="error",
        keywords=("center", "sample", "0"),
    )
    api_case(
        fam,
        "kmeans_polish one sample",
        lambda: kmeans_polish(X[:1], X[:1]),
        lambda r, caught: (
            None if r[2] == 0 and r[1].tolist() == [0] else f"inertia {r[2]}"
        ),
    )
    api_case(
        fam,
        "rbf_kmeans_loss one centre",
        lambda: rbf_kmeans_loss(X, mean[None], sigma=1.0, activation="entmax15"),
        lambda r, caught: (
            None if close_value(r, total, 1e-9) else f"loss {r!r}, expected {total!r}"
        ),
    )
    api_case(
        fam,
        "rbf_kmeans_loss zero centres",
        lambda: rbf_kmeans_loss(X, X[:0], sigma=1.0),
        expect="error",
        keywords=("center", "sample", "0"),
    )
    api_case(
        fam,
        "rbf_kmeans_loss one sample",
        lambda: rbf_kmeans_loss(X[:1], X[:2], sigma=1e-3, activation="entmax15"),
        # 0 <= F <= J + T W log k with J = 0, T = 2 sigma^2, W = 1, k = 2.
        lambda r, caught: (
            None
            if 0 <= r <= 2e-6 * np.log(2)
            else f"loss {r!r}, expected in [0, T log 2]"
        ),
    )
    api_case(
        fam,
        "rbf_kmeans_loss more centres than samples",
        lambda: rbf_kmeans_loss(X[:2], X[:5], sigma=0.5),
        lambda r, caught: None if np.isfinite(r) else f"loss {r!r}",
        expect="either",
    )


# -- 7. bad input -------------------------------------------------------------


def family_bad_input():
    fam = "bad-input"
    X, _, idx = blobs(n=60, seed=8)
    n, d = X.shape
    init = X[idx].copy()

    def with_value(A, value, where=(3, 1)):
        A = A.copy()
        A[where] = value
        return A

    bad_X = [
        ("NaN in X", with_value(X, np.nan), ("nan",)),
        ("inf in X", with_value(X, np.inf), ("inf",)),
        ("-inf in X", with_value(X, -np.inf), ("inf",)),
        ("NaN in sparse X", sp.csr_matrix(with_value(X, np.nan)), ("nan",)),
        ("inf in sparse X", sp.csr_matrix(with_value(X, np.inf)), ("inf",)),
        ("1-D X", X[:, 0].copy(), ("1d", "2d", "shape", "dimension", "reshape")),
        ("3-D X", X[:, :, None].copy(), ("3", "2d", "dimension", "shape")),
        ("empty X (0 rows)", X[:0].copy(), ("0 sample", "sample", "empty")),
        ("X with 0 features", X[:, :0].copy(), ("0 feature", "feature")),
        ("scalar X", np.float64(3.0), ("scalar", "2d", "array")),
    ]
    bad_w = [
        ("NaN weight", with_value(np.ones(n), np.nan, 4), ("nan",)),
        ("inf weight", with_value(np.ones(n), np.inf, 4), ("inf",)),
        ("-inf weight", with_value(np.ones(n), -np.inf, 4), ("inf", "negative")),
        ("negative weight", with_value(np.ones(n), -1.0, 4), ("negative",)),
        ("all-zero weights", np.zeros(n), ("zero",)),
        ("weights of wrong length", np.ones(n - 1), ("shape", "length", "sample")),
        ("2-D weights", np.ones((n, 1)), ("1d", "1 d", "shape", "dimension")),
    ]
    calls = {
        "RBFKMeans.fit": lambda X_, w=None, c=init: RBFKMeans(3, init=c).fit(
            X_, sample_weight=w
        ),
        "AnnealedRBFKMeans.fit": lambda X_, w=None, c=init: AnnealedRBFKMeans(3).fit(
            X_, sample_weight=w
        ),
        "kmeans_polish": lambda X_, w=None, c=init: kmeans_polish(
            X_, c, sample_weight=w
        ),
        "rbf_kmeans_loss": lambda X_, w=None, c=init: rbf_kmeans_loss(
            X_, c, sigma=1.0, sample_weight=w
        ),
    }
    for cname, call in calls.items():
        for bname, Xb, kws in bad_X:
            api_case(
                fam,
                f"{cname}: {bname}",
                lambda call=call, Xb=Xb: call(Xb),
                expect="error",
                keywords=kws,
                inputs=[Xb],
            )
        for bname, wb, kws in bad_w:
            api_case(
                fam,
                f"{cname}: {bname}",
                lambda call=call, wb=wb: call(X, wb),
                expect="error",
                keywords=kws,
                inputs=[X, wb],
            )
    # Weights whose sum overflows: a finite result or a clear error.
    huge = np.full(n, 1e308)
    for cname, call in calls.items():

        def finite(r, caught):
            values = [r.inertia_, r.cluster_centers_] if hasattr(r, "inertia_") else r
            values = values if isinstance(values, (list, tuple)) else [values]
            ok = all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in values)
            return None if ok else "non-finite output"

        api_case(
            fam,
            f"{cname}: weights 1e308 (sum overflows)",
            lambda call=call: call(X, huge),
            finite,
            expect="either",
            finite=False,
            keywords=("weight", "large", "overflow"),
            inputs=[huge],
        )
    bad_init = [
        ("init with k+1 rows", X[:4].copy(), ("shape",)),
        ("init with wrong n_features", np.c_[init, init[:, :1]], ("shape", "feature")),
        ("NaN in init", with_value(init, np.nan, (0, 0)), ("nan",)),
        ("inf in init", with_value(init, np.inf, (0, 0)), ("inf",)),
        ("1-D init", init[:, 0].copy(), ("1d", "2d", "shape", "dimension")),
    ]
    for cname in (
        "RBFKMeans.fit",
        "AnnealedRBFKMeans(init=...).fit",
        "kmeans_polish",
        "rbf_kmeans_loss",
    ):
        for bname, ib, kws in bad_init:
            if cname == "RBFKMeans.fit":
                call = lambda ib=ib: RBFKMeans(3, init=ib).fit(X)  # noqa: E731
            elif cname.startswith("Annealed"):
                call = lambda ib=ib: AnnealedRBFKMeans(3, init=ib).fit(X)  # noqa: E731
            elif cname == "kmeans_polish":
                if bname == "init with k+1 rows":
                    continue  # any number of centres is fine there
                call = lambda ib=ib: kmeans_polish(X, ib)  # noqa: E731
            else:
                if bname == "init with k+1 rows":
                    continue
                call = lambda ib=ib: rbf_kmeans_loss(X, ib, sigma=1.0)  # noqa: E731
            api_case(
                fam,
                f"{cname}: {bname.replace('init', 'centres')}",
                call,
                expect="error",
                keywords=kws,
                inputs=[X, ib],
            )
    # Bad parameters.
    # (sigma=0 is valid: K-Means itself, checked against KMeans in
    # tests/test_zero_width.py.)
    params = [
        ("RBFKMeans(sigma=-1)", lambda: RBFKMeans(3, sigma=-1.0).fit(X)),
        ("RBFKMeans(sigma=nan)", lambda: RBFKMeans(3, sigma=np.nan).fit(X)),
        ("RBFKMeans(max_iter=0)", lambda: RBFKMeans(3, max_iter=0).fit(X)),
        ("RBFKMeans(tol=-1)", lambda: RBFKMeans(3, tol=-1.0).fit(X)),
        ("RBFKMeans(tol=nan)", lambda: RBFKMeans(3, tol=np.nan).fit(X)),
        (
            "RBFKMeans(activation='relu')",
            lambda: RBFKMeans(3, activation="relu").fit(X),
        ),
        ("RBFKMeans(init='bogus')", lambda: RBFKMeans(3, init="bogus").fit(X)),
        (
            "AnnealedRBFKMeans(cooling=1)",
            lambda: AnnealedRBFKMeans(3, cooling=1.0).fit(X),
        ),
        (
            "AnnealedRBFKMeans(sigma_end > sigma_start)",
            lambda: AnnealedRBFKMeans(3, sigma_start=0.1, sigma_end=1.0).fit(X),
        ),
        (
            "AnnealedRBFKMeans(sigma_start=nan)",
            lambda: AnnealedRBFKMeans(3, sigma_start=np.nan).fit(X),
        ),
        ("rbf_kmeans_loss(sigma=0)", lambda: rbf_kmeans_loss(X, init, sigma=0.0)),
        ("rbf_kmeans_loss(sigma=nan)", lambda: rbf_kmeans_loss(X, init, sigma=np.nan)),
        (
            "rbf_kmeans_loss(activation='relu')",
            lambda: rbf_kmeans_loss(X, init, sigma=1.0, activation="relu"),
        ),
    ]
    for pname, call in params:
        api_case(
            fam,
            pname,
            call,
            expect="error",
            keywords=(
                "sigma",
                "max_iter",
                "tol",
                "activation",
                "init",
                "cooling",
                "must",
            ),
        )
    # An infinite width: the limit (uniform responsibilities) or a clear error.
    api_case(
        fam,
        "rbf_kmeans_loss(sigma=inf)",
        lambda: rbf_kmeans_loss(X, init, sigma=np.inf),
        lambda r, caught: None if np.isfinite(r) else f"loss {r!r}",
        expect="either",
        finite=False,
        keywords=("sigma", "finite", "inf"),
    )
    api_case(
        fam,
        "RBFKMeans(sigma=inf)",
        lambda: RBFKMeans(3, init=init, sigma=np.inf).fit(X),
        lambda est, caught: (
            None
            if np.all(np.isfinite(est.cluster_centers_))
            and np.isfinite(est.inertia_)
            and valid_proba(est.predict_proba(X), n, 3) is None
            else "non-finite output"
        ),
        expect="either",
        finite=False,
        keywords=("sigma", "finite", "inf"),
    )
    # Prediction on bad data with a fitted estimator.
    for ename, est in (
        ("RBFKMeans", quietly(lambda: RBFKMeans(3, init=init).fit(X))),
        ("AnnealedRBFKMeans", quietly(lambda: AnnealedRBFKMeans(3).fit(X))),
    ):
        for method in ("predict", "transform", "predict_proba", "score"):
            for bname, Xb, kws in (
                ("NaN in X", with_value(X, np.nan), ("nan",)),
                ("wrong n_features", np.c_[X, X[:, :1]], ("feature",)),
            ):
                api_case(
                    fam,
                    f"{ename}.{method}: {bname}",
                    lambda est=est, method=method, Xb=Xb: getattr(est, method)(Xb),
                    expect="error",
                    keywords=kws,
                    inputs=[Xb],
                )


# -- 8. command line ----------------------------------------------------------


def run_cli(args, cwd, timeout=120, env=None):
    env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "skrbfkmeans", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def leftovers(directory):
    return sorted(f for f in os.listdir(directory) if re.match(r"\..*\.tmp$", f))


def check_assignments(path, n_rows, k):
    """Problem string, or None when ``path`` has ``n_rows`` valid rows."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = ["label"] + [f"resp_{j}" for j in range(k)]
    if not lines or lines[0].split(",") != header:
        return f"bad header {lines[:1]}"
    rows = [line.split(",") for line in lines[1:]]
    if len(rows) != n_rows:
        return f"{len(rows)} output rows for {n_rows} input rows"
    try:
        A = np.array(rows, dtype=float)
    except ValueError:
        return "non-numeric output"
    if not np.all(np.isfinite(A)):
        return "NaN or inf in the output"
    if np.any((A[:, 0] < 0) | (A[:, 0] >= k)) or np.any(A[:, 0] != np.round(A[:, 0])):
        return "labels out of range"
    if np.abs(A[:, 1:].sum(axis=1) - 1).max() > 1e-6:
        return "responsibilities do not sum to 1"
    return None


def classify_cli(proc, expect, check=None):
    """(outcome, detail) of a finished command-line run."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    tail = one_line(" | ".join(lines[-3:]))
    if "Traceback" in proc.stderr:
        return "crash", f"exit {proc.returncode} with a traceback: {tail}"
    if proc.returncode == 2:
        if len(lines) == 1 and lines[0].startswith("skrbfkmeans: error:"):
            return "error", lines[0]
        return "crash", f"exit 2 but {len(lines)} stderr lines: {tail}"
    if proc.returncode == 0:
        if expect == "error":
            return "wrong", "exit 0: accepted without an error"
        problem = check() if check else None
        return ("wrong", problem) if problem else ("correct", "")
    return "crash", f"exit {proc.returncode}: {tail}"


# Each run costs the import of scikit-learn (2-3 s of CPU on a slow machine):
# these run only with --full.
EXTRA_CLI = {
    "blank lines only",
    "header only, --header",
    "'inf' field",
    "header, no trailing newline",
    "first data row with --header",
    "text header and a text row later",
    "spaces around numbers",
    "one column",
    ".npy 1-D",
    ".npy int",
    ".npy with NaN",
    ".npy complex",
    ".npy empty",
    "input is a directory",
    "output is a directory",
    "--centers equal to --output",
    "--sigma 0",
    "--sigma inf",
    "--max-iter 0",
    "reproduce --n-samples 0",
    "reproduce --n-widths 11",
    "'1e999' field (overflows)",
    "header with --no-header",
    "quoted numbers",
    "Latin-1 bytes",
    ".npy object",
    "--sigma nan",
    "unknown command",
    "CRLF line endings",
}


def cli_cases(full=False):
    """(description, files to write, argv, expect, n data rows) of each case."""
    rows = "\n".join(f"{i % 7}.5,{(i * 3) % 11}.25,{i % 2}" for i in range(30))
    header = "x,y,z\n"
    quoted = "\n".join(
        ",".join(f'"{v}"' for v in line.split(",")) for line in rows.split("\n")
    )
    cases = [
        (
            "empty file",
            {"in.csv": ""},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3"],
            "error",
            0,
        ),
        ("blank lines only", {"in.csv": "\n \n\n"}, None, "error", 0),
        ("header only", {"in.csv": header}, None, "error", 0),
        (
            "header only, --header",
            {"in.csv": header},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--header"],
            "error",
            0,
        ),
        ("ragged rows", {"in.csv": rows + "\n1,2\n" + rows}, None, "error", 0),
        ("'NA,2,3' in the first row", {"in.csv": "NA,2,3\n" + rows}, None, "error", 0),
        ("'NA,2,3' in a later row", {"in.csv": rows + "\nNA,2,3\n"}, None, "error", 0),
        (
            "'1,,3' (empty field) in the first row",
            {"in.csv": "1,,3\n" + rows},
            None,
            "error",
            0,
        ),
        (
            "'1,2,' (trailing comma) in a later row",
            {"in.csv": rows + "\n1,2,\n"},
            None,
            "error",
            0,
        ),
        (
            "'1.2.3,2,3' in the first row",
            {"in.csv": "1.2.3,2,3\n" + rows},
            None,
            "error",
            0,
        ),
        (
            "'1.2.3,2,3' in a later row",
            {"in.csv": rows + "\n1.2.3,2,3\n"},
            None,
            "error",
            0,
        ),
        ("'nan' field", {"in.csv": rows + "\nnan,1,2\n"}, None, "error", 0),
        ("'inf' field", {"in.csv": rows + "\n1,inf,2\n"}, None, "error", 0),
        (
            "'1e999' field (overflows)",
            {"in.csv": rows + "\n1,1e999,2\n"},
            None,
            "error",
            0,
        ),
        ("headerless file", {"in.csv": rows + "\n"}, None, "result", 30),
        ("file with a header", {"in.csv": header + rows + "\n"}, None, "result", 30),
        ("header, no trailing newline", {"in.csv": header + rows}, None, "result", 30),
        (
            "header with --no-header",
            {"in.csv": header + rows + "\n"},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--no-header"],
            "error",
            0,
        ),
        (
            "first data row with --header",
            {"in.csv": rows + "\n"},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--header"],
            "result",
            29,
        ),
        (
            "text header and a text row later",
            {"in.csv": header + rows + "\na,b,c\n"},
            None,
            "error",
            0,
        ),
        (
            "blank lines between rows",
            {"in.csv": rows.replace("\n", "\n\n", 5) + "\n"},
            None,
            "result",
            30,
        ),
        (
            "CRLF line endings",
            {"in.csv": (header + rows).replace("\n", "\r\n")},
            None,
            "result",
            30,
        ),
        (
            "UTF-8 BOM and a header",
            {"in.csv": "\ufeff" + header + rows},
            None,
            "result",
            30,
        ),
        ("quoted numbers", {"in.csv": quoted + "\n"}, None, "either", 30),
        (
            "spaces around numbers",
            {"in.csv": rows.replace(",", " , ") + "\n"},
            None,
            "result",
            30,
        ),
        (
            "semicolon-separated",
            {"in.csv": rows.replace(",", ";") + "\n"},
            None,
            "error",
            0,
        ),
        ("Latin-1 bytes", {"in.csv": b"x,\xe9,z\n" + rows.encode()}, None, "error", 0),
        (
            "one column",
            {"in.csv": "\n".join(str(i % 5) for i in range(20)) + "\n"},
            None,
            "result",
            20,
        ),
        (
            ".npy 2-D",
            {"in.npy": np.arange(60.0).reshape(20, 3) % 7},
            None,
            "result",
            20,
        ),
        (".npy 1-D", {"in.npy": np.arange(20.0) % 7}, None, "result", 20),
        (".npy int", {"in.npy": np.arange(60).reshape(20, 3) % 7}, None, "result", 20),
        (".npy 3-D", {"in.npy": np.zeros((4, 5, 3))}, None, "error", 0),
        (".npy with NaN", {"in.npy": np.r_[np.arange(20.0), np.nan]}, None, "error", 0),
        (".npy complex", {"in.npy": np.arange(20.0) + 1j}, None, "error", 0),
        (".npy object", {"in.npy": np.arange(20.0).astype(object)}, None, "error", 0),
        (".npy empty", {"in.npy": np.zeros((0, 3))}, None, "error", 0),
        (".npy corrupt", {"in.npy": b"\x93NUMPY\x01\x00garbage"}, None, "error", 0),
        (
            "unknown extension",
            {"in.txt": rows},
            ["cluster", "in.txt", "-o", "out.csv", "-k", "3"],
            "error",
            0,
        ),
        ("missing input file", {}, None, "error", 0),
        ("input is a directory", {"in.csv/": None}, None, "error", 0),
        (
            "output directory does not exist",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "nodir/out.csv", "-k", "3"],
            "error",
            0,
        ),
        (
            "unwritable output directory",
            {"in.csv": rows, "ro/": 0o555},
            ["cluster", "in.csv", "-o", "ro/out.csv", "-k", "3"],
            "error",
            0,
        ),
        ("output is a directory", {"in.csv": rows, "out.csv/": None}, None, "error", 0),
        (
            "output equal to input",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "in.csv", "-k", "3"],
            "error",
            0,
        ),
        (
            "output equal to input, --force",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "in.csv", "-k", "3", "--force"],
            "result",
            30,
        ),
        (
            "--centers equal to --output",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--centers", "out.csv"],
            "error",
            0,
        ),
        (
            "-k 0",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "0"],
            "error",
            0,
        ),
        (
            "-k -1",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "-1"],
            "error",
            0,
        ),
        (
            "-k abc",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "abc"],
            "error",
            0,
        ),
        (
            "-k larger than the rows",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "31"],
            "error",
            0,
        ),
        (
            "-k equal to the rows, --anneal",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "30", "--anneal"],
            "result",
            30,
        ),
        (
            "--sigma 0",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--sigma", "0"],
            "error",
            0,
        ),
        (
            "--sigma nan",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--sigma", "nan"],
            "error",
            0,
        ),
        (
            "--sigma inf",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--sigma", "inf"],
            "error",
            0,
        ),
        (
            "--max-iter 0",
            {"in.csv": rows},
            ["cluster", "in.csv", "-o", "out.csv", "-k", "3", "--max-iter", "0"],
            "error",
            0,
        ),
        ("--anneal, all rows equal", {"in.csv": "2,3\n" * 20}, None, "result", 20),
        (
            "rows near 1e300",
            {"in.csv": "\n".join(f"{i % 5}e300,1e300" for i in range(20))},
            None,
            "either",
            20,
        ),
        ("unknown command", {}, ["frobnicate"], "error", 0),
        (
            "reproduce --n-samples 1",
            {},
            ["reproduce", "--n-samples", "1", "--output-dir", "rep"],
            "error",
            0,
        ),
        (
            "reproduce --n-samples 2",
            {},
            ["reproduce", "--n-samples", "2", "--output-dir", "rep"],
            "error",
            0,
        ),
        (
            "reproduce --n-samples 0",
            {},
            ["reproduce", "--n-samples", "0", "--output-dir", "rep"],
            "error",
            0,
        ),
        (
            "reproduce --n-widths 11",
            {},
            ["reproduce", "--n-widths", "11", "--output-dir", "rep"],
            "error",
            0,
        ),
    ]
    default = ["cluster", None, "-o", "out.csv", "-k", "3"]
    out = []
    for desc, files, argv, expect, n_rows in cases:
        if not full and desc in EXTRA_CLI:
            continue
        if argv is None:
            inputs = [f for f in files if not f.endswith("/")] or ["in.csv"]
            argv = list(default)
            argv[1] = inputs[0].rstrip("/") if inputs else "in.csv"
            if desc == "input is a directory":
                argv[1] = "in.csv"
            if desc == "--anneal, all rows equal":
                argv.append("--anneal")
        out.append((desc, files, argv, expect, n_rows))
    return out


def guarded(fn, family, desc, *args):
    """``fn(*args)``, or a crash that names the benchmark's own failure."""
    t0 = time.perf_counter()
    try:
        result = fn(*args)
        if REPORT.verbose:
            print(f"  ({time.perf_counter() - t0:5.1f} s) {family}: {desc}", flush=True)
        return result
    except Exception as exc:
        return (
            family,
            desc,
            "crash",
            f"the benchmark itself failed: {describe(exc)}",
            "",
        )


def one_cli_case(root, number, case):
    desc, files, argv, expect, n_rows = case
    cwd = os.path.join(root, f"cli{number:03d}")
    os.makedirs(cwd)
    for name, content in files.items():
        path = os.path.join(cwd, name.rstrip("/"))
        if name.endswith("/"):
            os.makedirs(path)
            if content is not None:
                os.chmod(path, content)
        elif isinstance(content, np.ndarray):
            np.save(path, content)
        elif isinstance(content, bytes):
            with open(path, "wb") as f:
                f.write(content)
        else:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(content)
    if desc == "unwritable output directory" and os.geteuid() == 0:
        # Root writes into a mode-0555 directory: use a file system that
        # refuses every new file instead.
        argv = [a if a != "ro/out.csv" else "/proc/out.csv" for a in argv]
        desc += " (/proc, as root)"
    k = argv[argv.index("-k") + 1] if "-k" in argv else "0"
    k = int(k) if k.lstrip("-").isdigit() else 0
    out_path = os.path.join(cwd, argv[argv.index("-o") + 1]) if "-o" in argv else None
    try:
        proc = run_cli(argv, cwd)
    except subprocess.TimeoutExpired:
        return "cli", desc, "crash", "timed out after 120 s", ""

    def check():
        if argv[0] == "reproduce":
            path = os.path.join(cwd, "rep", "convergence.csv")
            return None if os.path.exists(path) else "no convergence.csv"
        if expect == "either":
            return None
        return check_assignments(out_path, n_rows, k)

    outcome, detail = classify_cli(proc, expect if expect != "either" else "", check)
    note = ""
    if outcome == "error" and expect == "result":
        note = f"error where a result was expected: {detail}"
    if outcome == "correct" and expect == "either" and out_path:
        problem = check_assignments(out_path, n_rows, k)
        if problem:
            outcome, detail = "wrong", problem
    if (
        outcome in ("error", "crash")
        and out_path
        and os.path.isdir(os.path.dirname(out_path))
    ):
        if (
            os.path.isfile(out_path)
            and not os.path.samefile(out_path, os.path.join(cwd, argv[1]))
            and "out.csv/" not in files
        ):
            detail += "; an output file was written"
            outcome = "wrong" if outcome == "error" else outcome
    for directory in {cwd, os.path.dirname(out_path or cwd)}:
        if os.path.isdir(directory) and leftovers(directory):
            detail += f"; temporary files left: {leftovers(directory)}"
            outcome = "wrong" if outcome in ("correct", "error") else outcome
    return "cli", desc, outcome, detail, note


# -- 9. signals ---------------------------------------------------------------


def write_big_inputs(directory, n_rows):
    """A clustered .npy (quick fit), a structureless .npy (slow fit), a .csv."""
    rng = np.random.default_rng(9)
    centres = np.array([0.0, 6.0, 12.0])
    quick = rng.normal(size=(n_rows, 10)) + centres[np.arange(n_rows) % 3, None]
    np.save(os.path.join(directory, "quick.npy"), quick)
    np.save(os.path.join(directory, "slow.npy"), rng.normal(size=(n_rows, 10)))
    np.savetxt(os.path.join(directory, "read.csv"), quick, delimiter=",", fmt="%.5g")


def wait_for(predicate, proc, timeout):
    """Poll ``predicate`` until true; False if the process ends first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        if predicate():
            return True
        time.sleep(0.002)
    return False


def opened(pid, path):
    fd_dir = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(fd_dir):
            with_link = os.readlink(os.path.join(fd_dir, fd))
            if with_link == path:
                return True
    except OSError:
        return False
    return False


def signal_run(directory, sig, phase):
    """Start ``cluster``, send ``sig`` in ``phase``; (outcome, detail, sent)."""
    out_dir = os.path.join(directory, f"out_{sig.name}_{phase}")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "out.csv")
    source = {
        "startup": "quick.npy",
        "reading": "read.csv",
        "fitting": "slow.npy",
        "writing": "quick.npy",
    }[phase]
    k = 8 if phase == "fitting" else 3
    argv = [
        sys.executable,
        "-m",
        "skrbfkmeans",
        "cluster",
        source,
        "-o",
        out,
        "-k",
        str(k),
        "--centers",
        os.path.join(out_dir, "centres.csv"),
        "-v",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    stdout_lines = []
    if phase == "startup":
        time.sleep(0.5)
        sent = proc.poll() is None
    elif phase == "reading":
        path = os.path.join(directory, source)
        sent = wait_for(lambda: opened(proc.pid, path), proc, 60)
    elif phase == "fitting":
        line = proc.stdout.readline()
        stdout_lines.append(line)
        sent = line.startswith("read ") and proc.poll() is None
        if sent:
            time.sleep(0.5)
            sent = proc.poll() is None
    else:
        sent = wait_for(lambda: bool(leftovers(out_dir)), proc, 60)
    if sent:
        proc.send_signal(sig)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return "crash", "did not stop within 120 s of the signal", sent
    lines = [line for line in stderr.splitlines() if line.strip()]
    expected = {
        signal.SIGINT: (130, -signal.SIGINT),
        signal.SIGTERM: (143, -signal.SIGTERM),
    }[sig]
    problems = []
    left = leftovers(out_dir)
    if left:
        problems.append(f"temporary files left: {left}")
    n_rows = np.load(os.path.join(directory, "quick.npy"), mmap_mode="r").shape[0]
    if os.path.exists(out):
        problem = check_assignments(out, n_rows, k)
        if problem:
            problems.append(f"partial output: {problem}")
    if not sent:
        if proc.returncode == 0 and not problems:
            return "correct", "finished before the signal", sent
        return "crash", f"exit {proc.returncode} before the signal", sent
    if "Traceback" in stderr:
        return (
            "crash",
            f"exit {proc.returncode} with a traceback: "
            + one_line(" | ".join(lines[-2:])),
            sent,
        )
    if proc.returncode not in expected:
        return (
            "crash",
            f"exit {proc.returncode}, expected {expected[0]}: "
            + one_line(" | ".join(lines[-2:])),
            sent,
        )
    if len(lines) > 1 or (lines and not lines[0].startswith("skrbfkmeans:")):
        problems.append(f"{len(lines)} stderr lines: {one_line(' | '.join(lines))}")
    if problems:
        problems.append(
            f"exit {proc.returncode}, stderr {one_line(' | '.join(lines))!r}"
        )
        return "wrong", "; ".join(problems), sent
    return "correct", f"exit {proc.returncode}: {lines[0] if lines else ''}", sent


INPUTS_LOCK = threading.Lock()


def big_inputs(root, n_rows):
    """The directory of the inputs with ``n_rows`` rows, written once."""
    directory = os.path.join(root, f"signal_inputs_{n_rows}")
    with INPUTS_LOCK:
        if not os.path.isdir(directory):
            os.makedirs(directory)
            write_big_inputs(directory, n_rows)
    return directory


def one_signal_case(root, sig, phase, n_rows):
    outcome, detail, sent = signal_run(big_inputs(root, n_rows), sig, phase)
    if not sent:
        # Finished before the signal: once more with a bigger input.
        outcome, detail, sent = signal_run(big_inputs(root, 2 * n_rows), sig, phase)
        detail = f"(retried with {2 * n_rows} rows) {detail}"
    return "signals", f"{sig.name} while {phase}", outcome, detail, ""


# -- 10. many rows ------------------------------------------------------------


def family_many_rows():
    """AnnealedRBFKMeans on more rows than its sample (anneals on a sample).

    12000 rows of three blobs at the scales of ``family_scales`` (float64
    and float32), offset by up to 1e8, with weights (zeros, integer counts
    against the rows repeated in place, floats), as CSR, and with
    ``n_clusters="auto"``: the fit of the unit-scale rows, scaled; a
    certified result a Lloyd fixed point of every row.
    """
    fam = "many-rows"
    X0, _, _ = blobs(n=12_000)
    n, d = X0.shape
    mag0 = float(np.abs(X0 - X0.mean(axis=0)).max())
    conservative0 = 4.0 * d * n * mag0**2
    for dtype, rtol in ((np.float64, 1e-6), (np.float32, 1e-3)):
        name = np.dtype(dtype).name
        Xu = X0.astype(dtype)
        ref = quietly(lambda: fit_ref(AnnealedRBFKMeans(3).fit(Xu)))
        for a in (1e-300, 1e-150, 1e-10, 1.0, 1e10, 1e150, 1e152, 1e300):
            X = scaled_rows(Xu, a, rtol)
            if X is None:
                continue
            api_case(
                fam,
                f"AnnealedRBFKMeans {name} a={a:.3g}",
                lambda X=X: AnnealedRBFKMeans(3).fit(X),
                lambda est, caught, a=a, X=X: check_annealed(est, X, ref, a, rtol),
                expect=zone(a, ref[2], conservative0),
                keywords=("large", "overflow"),
                inputs=(X,),
            )
    for b in (1e4, 1e8):
        X = X0 + b
        ref_b = quietly(lambda X=X: fit_ref(AnnealedRBFKMeans(3).fit(X)))

        def offset_check(est, caught, X=X, b=b, ref_b=ref_b):
            problem = compare_fit(
                est.labels_, est.cluster_centers_ - b, est.inertia_,
                (ref_b[0], ref_b[1] - b, ref_b[2]), 1.0, 1e-6, atol=1e-6 * b,
            )  # fmt: skip
            if problem:
                return problem
            return check_annealed(est, X, ref_b, 1.0, 1e-4)

        api_case(
            fam,
            f"AnnealedRBFKMeans offset b={b:.0e} (against the unit rows)",
            lambda X=X: AnnealedRBFKMeans(3).fit(X),
            lambda est, caught, X=X, b=b: compare_fit(
                est.labels_,
                est.cluster_centers_ - b,
                est.inertia_,
                ref[:3],
                1.0,
                1e-6,
                atol=1e-7 * b,
            ),  # fmt: skip
        )
        api_case(
            fam,
            f"AnnealedRBFKMeans offset b={b:.0e}",
            lambda X=X: AnnealedRBFKMeans(3).fit(X),
            offset_check,
            inputs=(X,),
        )
    rng = np.random.default_rng(8)
    counts = rng.integers(1, 3, size=n)
    ref_rep = quietly(
        lambda: fit_ref(AnnealedRBFKMeans(3).fit(np.repeat(X0, counts, axis=0)))
    )

    def weights_check(est, caught):
        problem = compare_fit(
            np.repeat(est.labels_, counts), est.cluster_centers_, est.inertia_,
            ref_rep[:3], 1.0, 1e-9,
        )  # fmt: skip
        if problem:
            return f"against the repeated rows: {problem}"
        if not est.certified_:
            return "not certified"
        return lloyd_fixed_point(X0, est.cluster_centers_, w, 1.0, 1e-9)

    w = counts.astype(float)
    api_case(
        fam,
        "AnnealedRBFKMeans integer weights = rows repeated in place",
        lambda: AnnealedRBFKMeans(3).fit(X0, sample_weight=w),
        weights_check,
        inputs=(X0, w),
    )
    w0 = np.ones(n)
    w0[::2] = 0.0
    ref_half = quietly(lambda: fit_ref(AnnealedRBFKMeans(3).fit(X0[1::2])))

    def zero_check(est, caught):
        problem = compare_fit(
            est.labels_[1::2], est.cluster_centers_, est.inertia_, ref_half[:3],
            1.0, 1e-6,
        )  # fmt: skip
        if problem:
            return f"against the rows of positive weight: {problem}"
        if est.certified_ != ref_half[3]:
            return f"certified_={est.certified_}, {ref_half[3]} without those rows"
        return lloyd_fixed_point(X0, est.cluster_centers_, w0, 1.0, 1e-9)

    api_case(
        fam,
        "AnnealedRBFKMeans half the weights zero = the other rows",
        lambda: AnnealedRBFKMeans(3).fit(X0, sample_weight=w0),
        zero_check,
        inputs=(X0, w0),
    )
    ref_dense = quietly(lambda: fit_ref(AnnealedRBFKMeans(3).fit(X0)))
    api_case(
        fam,
        "AnnealedRBFKMeans CSR rows",
        lambda: AnnealedRBFKMeans(3).fit(sp.csr_array(X0)),
        lambda est, caught: check_annealed(est, X0, ref_dense, 1.0, 1e-9),
    )
    api_case(
        fam,
        "AnnealedRBFKMeans('auto', max_clusters=6)",
        lambda: AnnealedRBFKMeans("auto", max_clusters=6).fit(X0),
        lambda est, caught: (
            None if est.n_clusters_ == 3 else f"{est.n_clusters_} clusters, not 3"
        ),
    )


# -- 11. faults --------------------------------------------------------------
# A fit, refit or partial_fit stopped by an exception, a KeyboardInterrupt or
# a warning raised as an error completes or leaves the estimator exactly as it
# was; a stream of partial_fit survives pickle, joblib and deepcopy; dask
# chunks of every shape give the NumPy results.


class Injected(Exception):
    """The failure of an ``init`` callable or of a dask chunk."""


# Engine functions where a KeyboardInterrupt is injected: (module, name).
FAULT_SITES = [
    ("_scaling", "working_units"),
    ("_engine", "data_offset"),
    ("_engine", "statistics"),
    ("_engine", "m_step"),
    ("_lloyd", "_full_pass"),
    ("_engine", "labels_inertia"),
    ("_engine", "free_energy"),
    ("_engine", "labels_margins"),
    ("_stream", "online_em_step"),
]


def _site_function(site):
    """The function of ``site``, or None where the package has no such one."""
    import importlib

    try:
        module = importlib.import_module(f"skrbfkmeans.{site[0]}")
    except ImportError:
        return None
    return getattr(module, site[1], None)


class Patched:
    """Replace functions wherever the package's modules hold them.

    ``from ._engine import statistics`` makes a module attribute of its own
    in every importer: each one that is the original function is replaced,
    and put back on exit. ``hook(site)`` runs before every call (it may
    raise); ``counts`` holds the calls per site.
    """

    def __init__(self, sites, hook=None):
        self.sites = [s for s in sites if _site_function(s) is not None]
        self.hook = hook
        self.counts = dict.fromkeys(self.sites, 0)
        self._undo = []

    def _wrapper(self, site, func):
        def wrapper(*args, **kwargs):
            self.counts[site] += 1
            if self.hook is not None:
                self.hook(site)
            return func(*args, **kwargs)

        return wrapper

    def __enter__(self):
        originals = {}
        for site in self.sites:
            func = _site_function(site)
            originals[id(func)] = (func, self._wrapper(site, func))
        for name, module in list(sys.modules.items()):
            if not name.startswith("skrbfkmeans") or module is None:
                continue
            for attr, value in list(vars(module).items()):
                if id(value) in originals and originals[id(value)][0] is value:
                    setattr(module, attr, originals[id(value)][1])
                    self._undo.append((module, attr, value))
        return self

    def __exit__(self, *exc):
        for module, attr, value in self._undo:
            setattr(module, attr, value)
        self._undo.clear()
        return False


class InterruptAt:
    """``hook`` for :class:`Patched`: KeyboardInterrupt at the ``n``-th call."""

    def __init__(self, site, n):
        self.site, self.n, self.calls, self.fired = site, n, 0, False

    def __call__(self, site):
        if site == self.site:
            self.calls += 1
            if self.calls == self.n:
                self.fired = True
                raise KeyboardInterrupt


def count_calls(call):
    """Calls of each fault site made by ``call()``: ``{site: count}``."""
    with Patched(FAULT_SITES) as patched:
        quietly(call)
    return {site: n for site, n in patched.counts.items() if n}


def state_difference(a, b, path="est"):
    """Where the snapshots ``a`` and ``b`` differ, or None.

    Arrays compare byte for byte (dtype, shape, bytes), floats bit for bit,
    lazy dask arrays by their graph's name; containers and plain objects
    member by member.
    """
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} became {type(b).__name__}"
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{path}: {a.dtype}{a.shape} became {b.dtype}{b.shape}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                problem = state_difference(x, y, f"{path}[{i}]")
                if problem:
                    return problem
            return None
        return None if a.tobytes() == b.tobytes() else f"{path}: values changed"
    if isinstance(a, (float, np.floating)):
        same = np.float64(a).tobytes() == np.float64(b).tobytes()
        return None if same else f"{path}: {a!r} became {b!r}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            gone, new = sorted(set(a) - set(b)), sorted(set(b) - set(a))
            return f"{path}: attributes removed {gone}, added {new}"
        for key in a:
            problem = state_difference(a[key], b[key], f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} became {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            problem = state_difference(x, y, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if sp.issparse(a):
        return None if unchanged(a, b) else f"{path}: values changed"
    if hasattr(a, "dask") and hasattr(a, "name"):
        return None if a.name == b.name else f"{path}: another dask graph"
    if callable(a) or isinstance(a, type):
        return None if a is b else f"{path}: another object"
    if hasattr(a, "__dict__"):
        return state_difference(vars(a), vars(b), path)
    try:
        return None if bool(a == b) else f"{path}: {a!r} became {b!r}"
    except Exception:
        return None if repr(a) == repr(b) else f"{path}: changed"


FAULT_METHODS = ("predict", "transform", "predict_proba")


def predictions(est, X):
    """``predict``, ``transform`` and ``predict_proba`` of ``X``, in memory."""
    return [np.asarray(getattr(est, m)(X)) for m in FAULT_METHODS]


def surfaced(exc, expected):
    """Whether ``exc`` is the injected fault (or a ValueError raised from it)."""
    if isinstance(exc, expected):
        return True
    cause = exc.__cause__ or exc.__context__
    if cause is None or not isinstance(exc, (ValueError, TypeError)):
        return False
    return surfaced(cause, expected)


def fault_case(
    desc, est, fault, probe=None, expected=KeyboardInterrupt, after=None, reached=None
):
    """Run ``fault(est)``, which must raise, and sort the estimator left.

    ``correct``: every attribute of ``vars(est)`` is as before, byte for
    byte (the parameters the fault changed are restored first), the
    predictions of ``probe`` equal, and ``after(est)`` (what comes next,
    say the rest of a stream) finds no problem. ``wrong``: anything
    changed. ``error``: the model refuses to predict with a clear error
    afterwards. ``crash``: another exception came out of the fault, or out
    of the predictions afterwards. ``reached()`` says whether an injected
    fault was reached (a note if not: nothing was tested); a refit that
    completes without the ConvergenceWarning is a note too.
    """
    fam = "faults"
    params = est.get_params(deep=False)
    before = copy.deepcopy(vars(est))
    predicted = None if probe is None else quietly(predictions, est, probe)
    raised = None
    try:
        with np.errstate(**REPORT.errstate):
            fault(est)
    except BaseException as exc:  # the injected KeyboardInterrupt too
        raised = exc
    finally:
        est.set_params(**params)
    if reached is not None and not reached():
        REPORT.notes.append((fam, desc, "the fault was not reached: not a case"))
        return
    if raised is None and expected is ConvergenceWarning:
        REPORT.notes.append((fam, desc, "the refit converged: not a case"))
        return
    if raised is None:
        REPORT.add(fam, desc, "wrong", "the failure was swallowed: no exception")
        return
    if not surfaced(raised, expected):
        REPORT.add(fam, desc, "crash", f"the fault came out as {describe(raised)}")
        return
    problem = state_difference(before, copy.deepcopy(vars(est)))
    if problem is None and predicted is not None:
        try:
            now = quietly(predictions, est, probe)
        except (ValueError, TypeError) as exc:
            REPORT.add(fam, desc, "error", f"after the fault: {describe(exc)}")
            return
        except Exception as exc:
            REPORT.add(fam, desc, "crash", f"after the fault: {describe(exc)}")
            return
        for method, old, new in zip(FAULT_METHODS, predicted, now):
            if old.dtype != new.dtype or old.tobytes() != new.tobytes():
                problem = f"{method} changed"
                break
    if problem is None and after is not None:
        try:
            problem = after(est)
        except Exception as exc:
            problem = f"afterwards: {describe(exc)}"
    if problem:
        REPORT.add(fam, desc, "wrong", problem)
    else:
        REPORT.add(fam, desc, "correct")


def failing_init(X, n_clusters, random_state):
    raise Injected("the init callable failed")


def fault_refits():
    """(a) A refit that raises: an init callable, interrupts in the engine."""
    X, _, _ = blobs(n=150, seed=1)
    X2, _, _ = blobs(n=150, seed=2)
    estimators = {
        "RBFKMeans": lambda: RBFKMeans(3, random_state=0),
        "RBFKMeans(sigma=0)": lambda: RBFKMeans(3, sigma=0, random_state=0),
        "AnnealedRBFKMeans": lambda: AnnealedRBFKMeans(3, random_state=0),
    }
    # Fitted at scale a, refitted at scale b: the failed refit must not leave
    # the working units of b with the centres of a.
    for a, b in ((1e-200, 1.0), (1.0, 1e-200)):
        scales = f"fit at {a:g}, refit at {b:g}"
        for name, make in estimators.items():
            fitted = quietly(make().fit, X * a)
            fault_case(
                f"{name} refit with a raising init ({scales})",
                fitted,
                lambda est: est.set_params(init=failing_init).fit(X2 * b),
                X * a,
                expected=Injected,
            )
            counts = count_calls(lambda: make().fit(X2 * b))
            for site, count in counts.items():
                for n in sorted({1, (count + 1) // 2, count}):
                    hook = InterruptAt(site, n)

                    def fault(est, hook=hook):
                        with Patched(FAULT_SITES, hook), warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            est.fit(X2 * b)

                    fault_case(
                        f"{name} refit, KeyboardInterrupt at call {n} of "
                        f"{count} of {'.'.join(site)} ({scales})",
                        fitted,
                        fault,
                        X * a,
                        reached=lambda hook=hook: hook.fired,
                    )


def fault_convergence_warnings():
    """(b) A ConvergenceWarning raised as an error during a refit."""
    X, _, _ = blobs(n=150, seed=1)
    # Overlapping blobs: EM at sigma 0.5 takes more than 6 iterations, and
    # the final Lloyd phase of the annealing with 8 clusters more than 2.
    X2, _ = make_blobs(n_samples=500, centers=3, cluster_std=3.0, random_state=1)
    cases = [
        (
            "AnnealedRBFKMeans(8, max_iter=2)",
            lambda a: AnnealedRBFKMeans(8, random_state=0),
            {"max_iter": 2},
        ),
        (
            "RBFKMeans(sigma=0.5, max_iter=6)",
            lambda a: RBFKMeans(3, sigma=0.5 * a, random_state=0),
            {"max_iter": 6},
        ),
    ]
    for name, make, params in cases:
        for a in (1.0, 1e-200):
            fitted = quietly(make(a).fit, X * a)

            def fault(est, a=a, params=params):
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    est.set_params(**params).fit(X2 * a)

            fault_case(
                f"{name} refit, ConvergenceWarning as an error (scale {a:g})",
                fitted,
                fault,
                X * a,
                expected=ConvergenceWarning,
            )


def fault_streams():
    """(c) Streams of partial_fit: round trips and interrupts half-way."""
    import io
    import pickle

    import joblib

    X, _, _ = blobs(n=400, seed=3)
    batches = np.array_split(X, 8)

    def stream(est, parts):
        for batch in parts:
            est.partial_fit(batch)
        return est

    ref = stream(RBFKMeans(3, random_state=0), batches)

    def same_as_ref(est):
        if est.n_steps_ != ref.n_steps_:
            return f"n_steps_={est.n_steps_}, {ref.n_steps_} without the fault"
        if est.cluster_centers_.tobytes() != ref.cluster_centers_.tobytes():
            moved = np.abs(est.cluster_centers_ - ref.cluster_centers_).max()
            return f"centres differ from the uninterrupted stream's by {moved:.3g}"
        return None

    def joblib_copy(est):
        buffer = io.BytesIO()
        joblib.dump(est, buffer)
        buffer.seek(0)
        return joblib.load(buffer)

    copies = {
        "pickle": lambda est: pickle.loads(pickle.dumps(est)),
        "joblib": joblib_copy,
        "deepcopy": copy.deepcopy,
    }
    for m in (1, 4):
        for how, round_trip in copies.items():
            api_case(
                "faults",
                f"partial_fit stream, {how} round trip after {m} of 8 batches",
                lambda m=m, round_trip=round_trip: stream(
                    round_trip(stream(RBFKMeans(3, random_state=0), batches[:m])),
                    batches[m:],
                ),
                lambda est, caught: same_as_ref(est),
            )
    for m in (0, 1, 4):
        sites = [("_stream", "online_em_step"), ("_engine", "statistics")]
        sites.append(("_engine", "m_step"))
        if m == 0:
            # The first call sets the working units of the stream.
            sites.append(("_scaling", "working_units"))
        for site in sites:
            if _site_function(site) is None:
                continue
            hook = InterruptAt(site, 1)

            def fault(est, m=m, hook=hook):
                with Patched(FAULT_SITES, hook):
                    est.partial_fit(batches[m])

            fault_case(
                f"partial_fit after {m} of 8 batches, KeyboardInterrupt at "
                f"{'.'.join(site)}; then the rest of the stream",
                stream(RBFKMeans(3, random_state=0), batches[:m]),
                fault,
                X if m else None,
                after=lambda est, m=m: same_as_ref(stream(est, batches[m:])),
                reached=lambda hook=hook: hook.fired,
            )


DASK_LAYOUTS = {
    "empty first chunk": (0, 200, 200),
    "empty middle chunk": (150, 0, 250),
    "empty last chunk": (400, 0),
    "several empty chunks": (0, 100, 0, 0, 300, 0),
    "unequal chunks": (7, 193, 1, 199),
}


def fault_dask():
    """(d) Dask: chunks of every shape, pd.NA, failing chunks, pickles."""
    try:
        import dask
        import dask.array as da
        import dask.dataframe as dd
        import pandas as pd
    except ImportError:
        REPORT.notes.append(("faults", "dask", "dask is not installed: skipped"))
        return
    with dask.config.set(scheduler="synchronous"):
        dask_chunks(da, dd, pd)
        dask_missing_values(dd, pd)
        dask_failing_chunks(da)
        dask_pickle(da)


def dask_inputs(X, da, dd, pd):
    """``{description: dask array}`` of ``X`` in every chunk layout."""
    inputs = {
        desc: da.from_array(X, chunks=(chunks, X.shape[1]))
        for desc, chunks in DASK_LAYOUTS.items()
    }
    frame = dd.from_pandas(pd.DataFrame(X, columns=["a", "b"]), npartitions=4)
    inputs["unknown chunk sizes (to_dask_array())"] = frame.to_dask_array()
    inputs["unknown chunk sizes (.values)"] = frame.values
    return inputs


def dask_chunks(da, dd, pd):
    """Every layout against the NumPy fit and predictions."""
    X, _, _ = blobs(n=400, seed=4)
    estimators = {
        "RBFKMeans": lambda: RBFKMeans(3, random_state=0),
        "RBFKMeans(sigma=0, entmax15)": lambda: RBFKMeans(
            3, sigma=0, activation="entmax15", random_state=0
        ),
        "AnnealedRBFKMeans": lambda: AnnealedRBFKMeans(3, random_state=0),
    }
    for name, make in estimators.items():
        ref = quietly(make().fit, X)
        expected = [*quietly(predictions, ref, X), np.float64(ref.score(X))]

        def check(result, caught, ref=ref, expected=expected):
            centers, labels, got = result
            if not np.allclose(centers, ref.cluster_centers_, rtol=1e-10, atol=0):
                return "centres differ from the NumPy fit's"
            if not np.array_equal(labels, ref.labels_):
                return "labels_ differ from the NumPy fit's"
            for method, old, new in zip((*FAULT_METHODS, "score"), expected, got):
                if not np.allclose(new, old, rtol=1e-9, atol=1e-12):
                    return f"{method} differs from the NumPy model's"
            return None

        for desc, Xd in dask_inputs(X, da, dd, pd).items():

            def call(make=make, Xd=Xd):
                est = make().fit(Xd)
                got = [np.asarray(getattr(est, m)(Xd)) for m in FAULT_METHODS]
                got.append(np.float64(est.score(Xd)))
                return est.cluster_centers_, np.asarray(est.labels_), got

            api_case("faults", f"dask {name}, {desc}", call, check)
    ref = RBFKMeans(3, random_state=0)
    for start in range(0, 400, 100):
        ref.partial_fit(X[start : start + 100])
    chunks = (0, 100, 0, 100, 100, 0, 100)
    api_case(
        "faults",
        "dask partial_fit, empty chunks skipped",
        lambda: RBFKMeans(3, random_state=0).partial_fit(
            da.from_array(X, chunks=(chunks, 2))
        ),
        lambda est, caught: (
            None
            if est.n_steps_ == 4
            and np.allclose(est.cluster_centers_, ref.cluster_centers_, 1e-12, 0)
            else f"n_steps_={est.n_steps_} and centres unlike 4 steps in memory"
        ),
    )


def dask_missing_values(dd, pd):
    """pd.NA in a dask DataFrame: the clear error of the pandas frame."""
    X, _, _ = blobs(n=60, seed=5)
    frame = pd.DataFrame(np.round(X * 10), columns=["a", "b"]).astype("Float64")
    frame.iloc[7, 1] = pd.NA
    ddf = dd.from_pandas(frame, npartitions=3)
    km = quietly(RBFKMeans(3, random_state=0).fit, X)
    calls = {
        "fit": lambda: RBFKMeans(3).fit(ddf),
        "partial_fit": lambda: RBFKMeans(3).partial_fit(ddf),
        "AnnealedRBFKMeans fit": lambda: AnnealedRBFKMeans(3).fit(ddf),
        "predict": lambda: km.predict(ddf).compute(),
        "score": lambda: km.score(ddf),
    }
    for desc, call in calls.items():
        api_case(
            "faults",
            f"dask DataFrame holding pd.NA: {desc}",
            call,
            expect="error",
            keywords=("nan",),
        )


def failing_chunk(X, da, fails):
    """``X`` as dask chunks of 100 rows; ``fails(chunk, run)`` says when to raise.

    ``run`` counts the computations of that chunk, from 1.
    """
    runs = {}

    def block(Xb, block_info=None):
        if block_info is None or Xb.size == 0:
            return Xb  # dask's trial run on an empty block
        chunk = block_info[0]["chunk-location"][0]
        runs[chunk] = runs.get(chunk, 0) + 1
        if fails(chunk, runs[chunk]):
            raise Injected(f"chunk {chunk} failed on its computation {runs[chunk]}")
        return Xb

    return da.from_array(X, chunks=(100, X.shape[1])).map_blocks(block, dtype=X.dtype)


def dask_failing_chunks(da):
    """A dask fit or partial_fit whose chunk raises part-way."""
    X, _, _ = blobs(n=400, seed=6)
    X2, _, _ = blobs(n=400, seed=7)
    for run in (1, 2, 4):
        fault_case(
            f"dask refit, chunk 1 raises on its computation {run}",
            quietly(RBFKMeans(3, random_state=0).fit, X),
            lambda est, run=run: quietly(
                est.fit, failing_chunk(X2, da, lambda c, r: c == 1 and r == run)
            ),
            X,
            expected=Injected,
        )
    for chunk in (0, 2, 3):
        for first in (False, True):
            est = RBFKMeans(3, random_state=0)
            if not first:
                est.partial_fit(X[:100])
            fault_case(
                f"dask partial_fit ({'first call' if first else 'fitted'}), "
                f"chunk {chunk} of 4 raises",
                est,
                lambda est, chunk=chunk: est.partial_fit(
                    failing_chunk(X2, da, lambda c, r: c == chunk)
                ),
                None if first else X,
                expected=Injected,
            )


def dask_pickle(da):
    """A dask-fitted model pickles small, and every attribute of it works."""
    import pickle

    rng = np.random.default_rng(0)
    centres = np.eye(4, 8) * 8.0
    X = rng.normal(size=(1_000_000, 8)) + np.repeat(centres, 250_000, axis=0)
    probe = X[::1000]

    def call():
        est = RBFKMeans(4, sigma=0, random_state=0).fit(
            da.from_array(X, chunks=(250_000, 8))
        )
        data = pickle.dumps(est)
        return est, pickle.loads(data), len(data)

    def check(result, caught):
        est, loaded, size = result
        if size >= 1 << 20:
            return f"the pickle of a 4 x 8 model holds {size / 2**20:.1f} MiB"
        for name, value in vars(loaded).items():
            if name.endswith("_") and hasattr(value, "compute"):
                value.compute()  # raises if the graph did not survive
        if not np.array_equal(loaded.predict(probe), est.predict(probe)):
            return "the loaded model predicts other labels"
        return None

    api_case("faults", "pickle of a dask-fitted RBFKMeans (1e6 x 8 rows)", call, check)


def fault_cli():
    """(e) An output name as long as the file system allows, and one longer."""
    directory = tempfile.mkdtemp(prefix="bench_reliability_")
    try:
        X, _, _ = blobs(n=40, seed=8)
        np.savetxt(os.path.join(directory, "in.csv"), X, delimiter=",")
        limit = os.pathconf(directory, "PC_NAME_MAX")
        for n_bytes, expect in ((limit, "result"), (limit + 1, "error")):
            name = "a" * (n_bytes - len(".csv")) + ".csv"
            proc = run_cli(["cluster", "in.csv", "-k", "3", "-o", name], directory)
            path = os.path.join(directory, name)
            outcome, detail = classify_cli(
                proc, expect, lambda path=path: check_assignments(path, 40, 3)
            )
            if leftovers(directory):
                outcome = "wrong" if outcome in ("correct", "error") else outcome
                detail += f"; temporary files left: {leftovers(directory)}"
            REPORT.add("faults", f"cli output name of {n_bytes} bytes", outcome, detail)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def family_faults():
    """A fit is all or nothing; streams and dask chunks under faults.

    (a) refits that raise (an ``init`` callable, a KeyboardInterrupt at the
    first, middle and last call of each engine function the refit makes),
    on data at scale 1e-200 and 1; (b) a ConvergenceWarning raised as an
    error; the previous model must be unchanged, byte for byte, with the
    same predictions. (c) pickle, joblib and deepcopy in the middle of a
    partial_fit stream give the uninterrupted stream's centres bit for bit;
    an interrupted partial_fit changes nothing. (d) dask chunks of 0 rows,
    unequal and of unknown size give the NumPy results; pd.NA is a clear
    error; a failing chunk changes nothing; a dask-fitted model pickles
    small and whole. (e) long output names on the command line.
    """
    fault_refits()
    fault_convergence_warnings()
    fault_streams()
    fault_dask()
    fault_cli()


# -- driver -------------------------------------------------------------------


API_FAMILIES = {
    "scales": family_scales,
    "offsets": family_offsets,
    "dtypes": family_dtypes,
    "sparse": family_sparse,
    "ties": family_ties,
    "degenerate-k": family_degenerate_k,
    "bad-input": family_bad_input,
    "many-rows": family_many_rows,
    "faults": family_faults,
}
FAMILIES = [*API_FAMILIES, "cli", "signals"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=None, help=f"comma-separated families of {FAMILIES}"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="command-line runs at a time (default 2)"
    )
    parser.add_argument("--signal-rows", type=int, default=200_000)
    parser.add_argument(
        "--full", action="store_true", help=f"{len(EXTRA_CLI)} more command lines"
    )
    parser.add_argument(
        "--raise-fp",
        action="store_true",
        help="run every API call under np.errstate(all='raise')",
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    only = FAMILIES if args.only is None else args.only.split(",")
    unknown = set(only) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; choose from {FAMILIES}")
    REPORT.verbose = args.verbose
    if args.raise_fp:
        REPORT.errstate = {"all": "raise"}
    start = time.perf_counter()
    times = {}
    with tempfile.TemporaryDirectory(
        prefix="bench_reliability_", ignore_cleanup_errors=True
    ) as root:
        # The subprocesses run while this process works through the API.
        jobs = []
        pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
        if "signals" in only:
            big_inputs(root, args.signal_rows)
            for phase in ("startup", "reading", "fitting", "writing"):
                for sig in (signal.SIGINT, signal.SIGTERM):
                    desc = f"{sig.name} while {phase}"
                    jobs.append(
                        pool.submit(
                            guarded,
                            one_signal_case,
                            "signals",
                            desc,
                            root,
                            sig,
                            phase,
                            args.signal_rows,
                        )
                    )
        if "cli" in only:
            for number, case in enumerate(cli_cases(args.full)):
                jobs.append(
                    pool.submit(
                        guarded, one_cli_case, "cli", case[0], root, number, case
                    )
                )
        with threadpool_limits(1):
            for name, family in API_FAMILIES.items():
                if name in only:
                    t0 = time.perf_counter()
                    family()
                    times[name] = time.perf_counter() - t0
        results = [job.result() for job in jobs]
        pool.shutdown()
        for family, desc, outcome, detail, note in sorted(
            results, key=lambda r: FAMILIES.index(r[0])
        ):
            REPORT.add(family, desc, outcome, detail, note)
        # Make the read-only directories removable again.
        for dirpath, dirnames, _ in os.walk(root):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
    elapsed = time.perf_counter() - start

    fp = "; API calls under np.errstate(all='raise')" if args.raise_fp else ""
    print(f"adversarial inputs, 1 thread{fp}; {elapsed:.1f} s in all")
    print(
        f"{'family':>13} {'tried':>6} {'correct':>8} {'error':>6} {'wrong':>6} "
        f"{'crash':>6}"
    )
    totals = dict.fromkeys(OUTCOMES, 0)
    for family in FAMILIES:
        cases = [c for c in REPORT.cases if c[0] == family]
        if not cases:
            continue
        counts = {o: sum(c[2] == o for c in cases) for o in OUTCOMES}
        for o in OUTCOMES:
            totals[o] += counts[o]
        print(
            f"{family:>13} {len(cases):>6} {counts['correct']:>8} "
            f"{counts['error']:>6} {counts['wrong']:>6} {counts['crash']:>6}"
        )
    print(
        f"{'all':>13} {sum(totals.values()):>6} {totals['correct']:>8} "
        f"{totals['error']:>6} {totals['wrong']:>6} {totals['crash']:>6}"
    )
    failed = [c for c in REPORT.cases if c[2] in ("wrong", "crash")]
    print()
    print(f"wrong or crash: {len(failed)}")
    for family, desc, outcome, detail in failed:
        print(f"  {outcome:>5}  {family}: {desc}\n         {detail}")
    if REPORT.notes:
        print()
        print(f"notes (not failures): {len(REPORT.notes)}")
        for family, desc, note in REPORT.notes:
            print(f"  {family}: {desc}\n         {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
