"""Tests of the all-or-nothing rule: a fit completes or changes nothing.

Every fitting method (``fit``, ``fit_predict``, ``fit_transform``,
``partial_fit``) of both estimators is interrupted at points spread over
its whole run (a ``KeyboardInterrupt`` raised at the N-th call of a function
of the package, N swept), by a raising ``init`` callable, by a
``ConvergenceWarning`` raised as an error and by a failing dask chunk; the
previous model's attributes must be byte-identical afterwards and its
predictions unchanged. The stream of ``partial_fit`` must survive pickle,
joblib and deepcopy to the bit, and a pickled fit keeps every attribute.
"""

import copy
import io
import os
import pickle
import sys
import warnings
from contextlib import contextmanager

import joblib
import numpy as np
import pytest
import sklearn
from _data import ACTIVATIONS, blobs
from numpy.testing import assert_array_equal
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning, InconsistentVersionWarning

import skrbfkmeans
from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

_PACKAGE_DIR = os.path.dirname(os.path.abspath(skrbfkmeans.__file__)) + os.sep

ESTIMATORS = {
    "lloyd": lambda: RBFKMeans(3, sigma=0, random_state=0),
    "softmax": lambda: RBFKMeans(3, random_state=0),
    "entmax15": lambda: RBFKMeans(3, activation="entmax15", random_state=0),
    "annealed": lambda: AnnealedRBFKMeans(3),
    "annealed-kmeans++": lambda: AnnealedRBFKMeans(
        3, init="k-means++", n_init=2, random_state=0
    ),
}


def _same(a, b):
    """Whether two attribute values are equal to the bit (recursively)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.dtype == object:  # strings: their bytes are pointers
            return _same(a.tolist(), b.tolist())
        return a.tobytes() == b.tobytes()
    if isinstance(a, (tuple, list)):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b


def _fitted_state(est):
    """A deep copy of the attributes of ``est`` that are not its parameters."""
    params = est.get_params(deep=False)
    return copy.deepcopy({k: v for k, v in vars(est).items() if k not in params})


def _changed(est, state):
    after = _fitted_state(est)
    if after.keys() != state.keys():
        return sorted(after.keys() ^ state.keys())
    return [name for name in state if not _same(state[name], after[name])]


def assert_same_state(est, before, completed=None):
    """Assert that ``est`` holds the state ``before`` (or ``completed``).

    ``completed`` is the state of the finished refit: an interrupt after
    the fit (in the ``transform`` of ``fit_transform``, or in scikit-learn's
    wrapper of ``fit`` once it returned) leaves it.
    """
    changed = _changed(est, before)
    if changed and completed is not None and not _changed(est, completed):
        return "completed"
    assert not changed, f"attributes changed by the fault: {changed}"
    return "before"


def _outputs(est, X):
    return est.predict(X), est.transform(X), est.predict_proba(X)


def assert_same_outputs(est, X, expected):
    for got, want in zip(_outputs(est, X), expected):
        assert_array_equal(got, want)


class _Interrupt:
    """A trace hook raising KeyboardInterrupt at the N-th call into the package."""

    def __init__(self, at=None):
        self.at, self.calls = at, 0

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            self.calls += 1
            if self.calls == self.at:
                raise KeyboardInterrupt(f"injected at call {self.at}")
        return None


@contextmanager
def _traced(hook):
    previous = sys.gettrace()
    sys.settrace(hook)
    try:
        yield hook
    finally:
        sys.settrace(previous)


def _count_calls(make, run):
    """Calls into the package of ``run(make())``, counted on a second run.

    The first run may import modules of the package (more calls); the
    second is the run every interrupted one repeats. Returns the count and
    the estimator of the counted run.
    """
    run(make())
    est = make()
    with _traced(_Interrupt()) as counter:
        run(est)
    return counter.calls, est


def _fitting_call(est, method, X):
    if method == "partial_fit":
        return lambda: est.partial_fit(X)
    return lambda: getattr(est, method)(X)


def _points(n_calls, n_points):
    """N values spread over a run of ``n_calls`` calls, the first and last too."""
    return np.unique(np.linspace(1, n_calls, n_points).round().astype(int))


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("method", ["fit", "fit_predict", "fit_transform"])
@pytest.mark.parametrize("scale", [1.0, 1e-200], ids=["unit", "tiny"])
def test_interrupted_refit_keeps_the_previous_model(name, method, scale):
    # Check that a refit interrupted at any point of its run (data at 1e-200
    # too, where the refit's working units differ from the unit scale) leaves
    # every attribute of the previous model byte-identical and its
    # predictions unchanged.
    X_old = blobs(0, n_samples=90, n_features=2, centers=3) * scale
    X_new = blobs(1, n_samples=120, n_features=2, centers=3) * (scale * 3.0)
    est = ESTIMATORS[name]().fit(X_old)
    before = _fitted_state(est)
    expected = _outputs(est, X_old)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        counter, refit = _count_calls(
            lambda: copy.deepcopy(est), lambda e: _fitting_call(e, method, X_new)()
        )
        completed = _fitted_state(refit)
        for at in _points(counter, 9):
            with pytest.raises(KeyboardInterrupt), _traced(_Interrupt(at)):
                _fitting_call(est, method, X_new)()
            if assert_same_state(est, before, completed) == "before":
                assert_same_outputs(est, X_old, expected)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_interrupted_partial_fit_keeps_the_stream(activation):
    # Check that a partial_fit interrupted at any point leaves the centres,
    # the step count and the running statistics as they were, and that the
    # stream then continues as if the interrupted call never happened.
    X = blobs(0, n_samples=90, n_features=2, centers=3)
    batches = [X[i::3] for i in range(3)]
    reference = RBFKMeans(3, activation=activation, random_state=0)
    for batch in batches:
        reference.partial_fit(batch)
    est = RBFKMeans(3, activation=activation, random_state=0).partial_fit(batches[0])
    saved, before = copy.deepcopy(est), _fitted_state(est)
    counter, stepped = _count_calls(
        lambda: copy.deepcopy(est), lambda e: e.partial_fit(batches[1])
    )
    completed = _fitted_state(stepped)
    for at in _points(counter, 12):
        with pytest.raises(KeyboardInterrupt), _traced(_Interrupt(at)):
            est.partial_fit(batches[1])
        if assert_same_state(est, before, completed) == "completed":
            est = copy.deepcopy(saved)
    est = copy.deepcopy(saved)
    for batch in batches[1:]:
        est.partial_fit(batch)
    assert est.n_steps_ == reference.n_steps_ == 3
    assert_array_equal(est.cluster_centers_, reference.cluster_centers_)


def test_interrupted_first_partial_fit_leaves_an_unfitted_estimator():
    # Check that interrupting the very first partial_fit leaves no attribute
    # behind (the estimator is as unfitted as it was).
    X = blobs(0, n_samples=90, n_features=2, centers=3)
    est = RBFKMeans(3, random_state=0)
    before = _fitted_state(est)
    counter, stepped = _count_calls(
        lambda: RBFKMeans(3, random_state=0), lambda e: e.partial_fit(X)
    )
    completed = _fitted_state(stepped)
    for at in _points(counter, 8):
        with pytest.raises(KeyboardInterrupt), _traced(_Interrupt(at)):
            est.partial_fit(X)
        if assert_same_state(est, before, completed) == "completed":
            est = RBFKMeans(3, random_state=0)


class _TwoInterrupts:
    """A first KeyboardInterrupt at the N-th call into the package, a second later.

    The first comes from a trace hook (``trace``); from then on a profile
    hook (``profile``) sees every event, Python calls and returns and the
    calls into C (``dict.clear``, ``dict.update``) alike, and raises the
    second interrupt at the M-th. Those are the points where CPython
    delivers a signal: at a call, a return from C or a loop's jump, never
    inside one bytecode. ``events`` counts what followed the first.
    """

    def __init__(self, first, second=None):
        self.first, self.second = first, second
        self.calls = self.events = 0
        self.active = True

    def trace(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
            self.calls += 1
            if self.calls == self.first:
                raise KeyboardInterrupt("first")

    def profile(self, frame, event, arg):
        if not self.active or self.calls < self.first:
            return
        self.events += 1
        if self.events == self.second:
            raise KeyboardInterrupt("second")

    def run(self, call):
        # A hook that raises is removed: the first interrupt leaves the
        # profile hook, which raises the second.
        sys.setprofile(self.profile)
        sys.settrace(self.trace)
        try:
            call()
        except KeyboardInterrupt:
            pass
        finally:
            self.active = False
            sys.settrace(None)
            sys.setprofile(None)
        return self


@pytest.mark.parametrize(
    "make, method",
    [
        (lambda: RBFKMeans(3, random_state=0), "fit"),
        (lambda: AnnealedRBFKMeans(3), "fit"),
        (lambda: RBFKMeans(3, random_state=0), "partial_fit"),
    ],
    ids=["softmax-fit", "annealed-fit", "softmax-partial_fit"],
)
def test_second_interrupt_keeps_the_previous_model(make, method):
    # Check that a second Ctrl-C, pressed while the refit interrupted by the
    # first unwinds and puts the previous model back, cannot leave the
    # estimator empty or half restored: the second interrupt is raised at
    # every call and return from the first one on (the restore emptied the
    # attributes with dict.clear and refilled them with dict.update, and a
    # second interrupt between the two left no attribute at all, not even
    # the parameters: get_params failed).
    X_old = blobs(0, n_samples=90, n_features=2, centers=3)
    X_new = blobs(1, n_samples=120, n_features=2, centers=3)
    est = make().fit(X_old)
    before, expected = _fitted_state(est), _outputs(est, X_old)
    params = est.get_params()
    counter, _ = _count_calls(
        lambda: copy.deepcopy(est), lambda e: _fitting_call(e, method, X_new)()
    )
    first = counter // 2
    counting = _fitting_call(copy.deepcopy(est), method, X_new)
    n_events = _TwoInterrupts(first).run(counting).events
    assert n_events > 0
    config = sklearn.get_config()
    for second in range(1, n_events + 1):
        refit = copy.deepcopy(est)
        try:
            _TwoInterrupts(first, second).run(_fitting_call(refit, method, X_new))
        finally:
            # An interrupt can land inside scikit-learn's own config_context
            # (the fit's skip_parameter_validation) and leave its global
            # setting behind: put it back, or later tests' parameter checks
            # are skipped.
            sklearn.set_config(**config)
        assert refit.get_params() == params
        assert_same_state(refit, before)
    assert_same_outputs(refit, X_old, expected)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_raising_init_keeps_the_previous_model(name):
    # Check the reproducer: a model fitted on data at 1e-200, then a
    # refit whose init callable raises, still predicts three clusters and
    # gives non-zero distances.
    X = blobs(0, n_samples=90, n_features=2, centers=3) * 1e-200
    est = ESTIMATORS[name]().fit(X)
    before = _fitted_state(est)
    expected = _outputs(est, X)

    def init(X, n_clusters, random_state):
        raise RuntimeError("init failed")

    est.set_params(init=init)
    if name.startswith("annealed"):
        est.set_params(n_init=1)
    with pytest.raises(RuntimeError, match="init failed"):
        est.fit(X * 7.0)
    assert_same_state(est, before)
    assert_same_outputs(est, X, expected)
    assert np.unique(est.predict(X)).size == 3
    assert np.all(est.transform(X).max(axis=1) > 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: AnnealedRBFKMeans(3, init="k-means++", max_iter=2, random_state=0),
        lambda: RBFKMeans(3, sigma=0.5, max_iter=6, tol=0, random_state=0),
    ],
    ids=["annealed", "soft"],
)
def test_convergence_warning_as_error_keeps_the_previous_model(make):
    # Check that a ConvergenceWarning raised as an error (pytest -W error)
    # by a refit leaves the previous, fully fitted model as it was: the
    # warning comes before any attribute is assigned.
    X_old = blobs(0, n_samples=90, n_features=2, centers=3)
    est = make().set_params(max_iter=300).fit(X_old)
    before = _fitted_state(est)
    expected = _outputs(est, X_old)
    est.set_params(max_iter=make().max_iter)
    # Structureless data: Lloyd needs more than two iterations.
    X_new = np.random.RandomState(0).uniform(size=(300, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="did not converge"):
            est.fit(X_new)
    assert_same_state(est, before)
    assert_same_outputs(est, X_old, expected)
    # Without the filter the same refit completes, warning once.
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        est.fit(X_new)
    assert not est.converged_


def _stream(make, batches, between=None):
    est = make()
    for i, batch in enumerate(batches):
        est.partial_fit(batch)
        if between is not None and i == 1:
            est = between(est)
    return est


def _joblib_round_trip(est):
    buffer = io.BytesIO()
    joblib.dump(est, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


@pytest.mark.parametrize(
    "round_trip",
    [
        lambda est: pickle.loads(pickle.dumps(est)),
        _joblib_round_trip,
        copy.deepcopy,
    ],
    ids=["pickle", "joblib", "deepcopy"],
)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_stream_survives_a_round_trip(round_trip, activation):
    # Check that saving and loading the estimator in the middle of a stream
    # gives the uninterrupted stream's centres and step count, to the bit.
    X, _ = make_blobs(n_samples=600, centers=[[0, 0], [0, 10], [10, 0]],
                      random_state=0)  # fmt: skip
    batches = np.array_split(X, 6)

    def make():
        return RBFKMeans(3, activation=activation, sigma=1.0, random_state=0)

    plain = _stream(make, batches)
    saved = _stream(make, batches, between=round_trip)
    assert saved.n_steps_ == plain.n_steps_ == len(batches)
    assert_array_equal(saved.cluster_centers_, plain.cluster_centers_)


def test_fit_restarts_the_stream():
    # Check that a fit between partial_fit calls starts a new stream (its
    # centres replace the running statistics), and that changing the centres
    # by hand does too.
    X = blobs(0, n_samples=90, n_features=2, centers=3)
    est = RBFKMeans(3, sigma=1.0, random_state=0)
    est.partial_fit(X).partial_fit(X)
    est.fit(X)
    assert not hasattr(est, "n_steps_")
    est.partial_fit(X)
    assert est.n_steps_ == 1
    est.partial_fit(X)
    est.cluster_centers_ = est.cluster_centers_ + 1.0
    est.partial_fit(X)
    assert est.n_steps_ == 1


def test_pickle_carries_a_version_stamp(monkeypatch):
    # Check that a model saved by another version of the package warns when
    # loaded (as scikit-learn does for its estimators), and that one saved by
    # this version loads silently.
    X = blobs(0, n_samples=90, n_features=2, centers=3)
    est = RBFKMeans(3, random_state=0).fit(X)
    data = pickle.dumps(est)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(data)
    monkeypatch.setattr(skrbfkmeans._base, "__version__", "0.0.1")
    older = pickle.dumps(est)
    monkeypatch.undo()
    with pytest.warns(InconsistentVersionWarning, match="skrbfkmeans version 0.0.1"):
        loaded = pickle.loads(older)
    assert_array_equal(loaded.predict(X), est.predict(X))


@pytest.mark.parametrize("name", ESTIMATORS)
def test_pickle_keeps_every_attribute(name):
    # Check that a pickled fit loads with every attribute equal to the bit
    # (scikit-learn's check_estimators_pickle compares the predictions of
    # a few estimators only) and gives the same outputs and score.
    X = blobs(0, n_samples=90, n_features=2, centers=3)
    est = ESTIMATORS[name]().fit(X)
    loaded = pickle.loads(pickle.dumps(est))
    assert vars(loaded).keys() == vars(est).keys()
    for attr, value in vars(est).items():
        assert _same(vars(loaded)[attr], value), attr
    assert_same_outputs(loaded, X, _outputs(est, X))
    assert loaded.score(X) == est.score(X)


def _dask_rows(X, chunks, fail_block=None):
    """``X`` as a dask array; computing the block ``fail_block`` raises."""
    da = pytest.importorskip("dask.array")
    Xd = da.from_array(X, chunks=(chunks, X.shape[1]))
    if fail_block is None:
        return Xd

    def fail(block, block_info=None):
        if block_info[0]["chunk-location"][0] == fail_block:
            raise OSError("chunk unreadable")
        return block

    return Xd.map_blocks(fail, dtype=Xd.dtype)


@pytest.mark.parametrize("name", ["lloyd", "softmax", "annealed"])
def test_failing_dask_refit_keeps_the_previous_model(synchronous_dask, name):
    # Check that a dask refit whose third chunk cannot be read leaves the
    # previous model (fitted on data at 1e-200, in other working units than
    # dask's) byte-identical, with the same predictions.
    X = blobs(0, n_samples=90, n_features=2, centers=3) * 1e-200
    est = ESTIMATORS[name]().fit(X)
    before, expected = _fitted_state(est), _outputs(est, X)
    X_new = blobs(1, n_samples=400, n_features=2, centers=3)
    with pytest.raises(OSError, match="chunk unreadable"):
        est.fit(_dask_rows(X_new, 100, fail_block=2))
    assert_same_state(est, before)
    assert_same_outputs(est, X, expected)


def test_failing_dask_partial_fit_keeps_the_stream(synchronous_dask):
    # Check that a partial_fit on dask input whose last block fails (after
    # steps on the first blocks) leaves the centres and n_steps_ unchanged.
    X = blobs(0, n_samples=400, n_features=2, centers=3)
    est = RBFKMeans(3, sigma=1.0, random_state=0).partial_fit(X[:100])
    before = _fitted_state(est)
    with pytest.raises(OSError, match="chunk unreadable"):
        est.partial_fit(_dask_rows(X, 100, fail_block=3))
    assert_same_state(est, before)
    est.partial_fit(_dask_rows(X, 100))
    assert est.n_steps_ == 5


@pytest.mark.parametrize("name", ["lloyd", "annealed"])
def test_dask_fitted_model_pickles_small(synchronous_dask, name):
    # Check that the pickle of a model fitted on 2e5 x 8 from_array rows
    # (12.8 MB) does not carry the training data, that every attribute of
    # the loaded model works, and that labels_ (lazy: not saved) says how to
    # get the labels.
    X, _ = make_blobs(n_samples=200_000, n_features=8, centers=3, random_state=0)
    est = ESTIMATORS[name]().fit(_dask_rows(X, 50_000))
    data = pickle.dumps(est)
    assert len(data) < 100_000
    loaded = pickle.loads(data)
    saved = dict(vars(loaded))
    assert saved.pop("_labels_not_saved")
    assert saved.keys() == vars(est).keys() - {"labels_"}
    for attr, value in saved.items():
        assert _same(value, vars(est)[attr]), attr
    assert_array_equal(loaded.predict(X[:1000]), est.predict(X[:1000]))
    assert_array_equal(est.labels_[:1000].compute(), est.predict(X[:1000]))
    assert not hasattr(loaded, "labels_")
    with pytest.raises(AttributeError, match="call predict on the training data"):
        loaded.labels_
