"""The number of clusters from the annealing path (``n_clusters="auto"``).

The choice against structureless references has its own tests
(test_count_reference.py); these check the exploration and its lifetimes.

Oracles: the path of a fit with a fixed, larger number of clusters (the
exploration must follow it up to its stopping point, and the lifetimes are
recomputed from its ``sigma_path_`` and ``n_distinct_centers_path_`` by the
definition in the docstring); the fit with ``n_clusters=n_clusters_``, which
the auto fit must equal; generated data whose number of clusters is
known; SciPy's own checks of linkage matrices.
"""

import numpy as np
import pytest
from _data import unequal_clusters
from numpy.testing import assert_allclose, assert_array_equal
from scipy.cluster.hierarchy import cophenet, fcluster, is_valid_linkage
from scipy.spatial.distance import squareform
from sklearn.utils._param_validation import InvalidParameterError

from skrbfkmeans import AnnealedRBFKMeans
from skrbfkmeans._anneal import count_lifetimes
from skrbfkmeans._count import choose_count

# Every fitted attribute that the auto fit must share with the fit at
# n_clusters=n_clusters_ (all but n_iter_total_ and the lifetimes).
_SHARED = [
    "cluster_centers_", "labels_", "inertia_", "objective_", "sigma_",
    "n_iter_", "converged_", "certified_", "sigma_path_", "centers_path_",
    "objective_path_", "inertia_path_", "n_distinct_centers_path_",
    "activation_path_", "critical_sigmas_", "n_polish_moves_",
    "split_linkage_", "n_clusters_",
]  # fmt: skip


def _separated_blobs(K, seed, n_features=2, spread=0.5):
    """``K`` blobs of unequal sizes on a circle of radius 10 (spacing >= 6)."""
    rng = np.random.default_rng(seed)
    angles = 2 * np.pi * np.arange(K) / max(K, 3) + rng.uniform(0, 0.3)
    centers = np.zeros((K, n_features))
    centers[:, 0], centers[:, 1] = 10 * np.cos(angles), 10 * np.sin(angles)
    sizes = rng.integers(40, 120, size=K)
    X = np.concatenate(
        [
            c + spread * rng.standard_normal((m, n_features))
            for c, m in zip(centers, sizes)
        ]
    )
    y = np.repeat(np.arange(K), sizes)
    return X, y


def _lifetimes_from_path(sigmas, counts, n_max):
    """The docstring's definition, written out: stage s's count holds until s+1."""
    out = np.zeros(n_max)
    for s in range(len(sigmas) - 1):
        out[counts[s] - 1] += np.log(sigmas[s] / sigmas[s + 1])
    return out


@pytest.mark.parametrize("K", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finds_the_number_of_separated_blobs(K, seed):
    # Check that the lifetime rule finds K on blobs far apart relative to
    # their spread (unequal sizes), whatever the seed.
    X, y = _separated_blobs(K, seed)
    km = AnnealedRBFKMeans("auto", max_clusters=10).fit(X)
    assert km.n_clusters_ == K
    # And the clusters are the blobs.
    table = np.zeros((K, K), dtype=int)
    np.add.at(table, (y, km.labels_), 1)
    assert np.all((table > 0).sum(axis=1) == 1)


@pytest.mark.parametrize(
    "settings",
    [{}, {"cooling": 0.8, "polish": False}, {"activation": "softmax", "tol": 1e-3}],
    ids=["defaults", "cooling-no-polish", "softmax-tol"],
)
def test_auto_is_the_fit_with_that_many_clusters(settings):
    # Check that the auto fit equals, attribute by attribute and to the bit,
    # the fit with n_clusters=n_clusters_ and the same settings (each of
    # them reaches the fit that follows the choice), except its total
    # iterations (they include the exploration) and its lifetimes.
    X, _ = _separated_blobs(4, 1)
    auto = AnnealedRBFKMeans("auto", max_clusters=8, **settings).fit(X)
    fixed = AnnealedRBFKMeans(auto.n_clusters_, **settings).fit(X)
    for name in _SHARED:
        assert_array_equal(getattr(auto, name), getattr(fixed, name), err_msg=name)
    assert auto.n_iter_total_ > fixed.n_iter_total_


@pytest.mark.parametrize("max_clusters", [3, 6])
def test_lifetimes_follow_the_path_of_a_larger_fit(max_clusters):
    # Check that the exploration follows the path of a fit with
    # max_clusters + 1 clusters up to its first stage with more than
    # max_clusters distinct centres, and that the lifetimes are the
    # definition's on that path: they add up to the log-range of widths
    # from the first stage to the stopping one.
    X, _ = _separated_blobs(5, 3, spread=1.5)
    auto = AnnealedRBFKMeans("auto", max_clusters=max_clusters).fit(X)
    ref = AnnealedRBFKMeans(max_clusters + 1).fit(X)
    counts = ref.n_distinct_centers_path_
    stop = int(np.flatnonzero(counts > max_clusters)[0])
    sigmas = ref.sigma_path_[: stop + 1]
    expected = _lifetimes_from_path(sigmas, counts[: stop + 1], max_clusters)
    assert auto.cluster_count_lifetimes_.shape == (max_clusters,)
    assert_allclose(auto.cluster_count_lifetimes_, expected, rtol=1e-12, atol=0)
    total = np.log(sigmas[0] / sigmas[-1])
    assert auto.cluster_count_lifetimes_.sum() == pytest.approx(total, rel=1e-12)
    assert auto.sigma_path_[0] == ref.sigma_path_[0]


def test_lifetimes_of_a_fixed_count_span_its_path():
    # Check that with an integer n_clusters the lifetimes are measured on
    # sigma_path_ itself: they add up to log(sigma_path_[0] / sigma_path_[-1])
    # and follow the definition, up to the largest count on the path.
    X, _ = _separated_blobs(4, 0)
    km = AnnealedRBFKMeans(4).fit(X)
    counts = km.n_distinct_centers_path_
    expected = _lifetimes_from_path(km.sigma_path_, counts, counts.max())
    assert_allclose(km.cluster_count_lifetimes_, expected, rtol=1e-12, atol=0)
    total = np.log(km.sigma_path_[0] / km.sigma_path_[-1])
    assert km.cluster_count_lifetimes_.sum() == pytest.approx(total, rel=1e-12)
    assert km.n_clusters_ == 4


def test_a_count_that_cannot_split_lives_for_ever():
    # Check that with fewer distinct points than max_clusters the schedule
    # ends when no group can split: that count's lifetime is infinite and it
    # is chosen.
    X = np.repeat([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]], 20, axis=0)
    km = AnnealedRBFKMeans("auto", max_clusters=10).fit(X)
    assert km.n_clusters_ == 3
    assert np.isinf(km.cluster_count_lifetimes_[2])
    assert np.isfinite(km.cluster_count_lifetimes_[:2]).all()
    # The centres are means about the data's mean (10/3, 10/3): a centre at
    # the origin is 0 to the rounding of that offset, not exactly.
    assert_allclose(
        np.sort(km.cluster_centers_, axis=0),
        [[0, 0], [0, 0], [10, 10]],
        atol=16 * np.finfo(np.float64).eps * 10,
    )


def _two_pairs(seed):
    """Two pairs of blobs: the pairs 30 apart, the blobs of a pair 3 apart."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 0.0], [0.0, 3.0], [30.0, 0.0], [30.0, 3.0]])
    X = np.concatenate([c + 0.3 * rng.standard_normal((50, 2)) for c in centers])
    return X


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_linkage_is_the_hierarchy(seed):
    # Check that split_linkage_ is a valid SciPy linkage whose leaf i is
    # cluster i: cut into two, the leaves group the clusters by pair (read
    # from their centres); its heights are critical widths, the root the
    # first, and the cophenetic width of two clusters of a pair is below
    # that of two clusters of different pairs.
    X = _two_pairs(seed)
    km = AnnealedRBFKMeans(4).fit(X)
    Z = km.split_linkage_
    assert Z.shape == (3, 4) and is_valid_linkage(Z)
    pair = (km.cluster_centers_[:, 0] > 15).astype(int)
    top = fcluster(Z, 2, criterion="maxclust")
    assert len(set(zip(top, pair))) == 2
    assert set(Z[:, 2]) <= set(km.critical_sigmas_) | {km.sigma_}
    assert Z[:, 2].max() == km.critical_sigmas_.max()
    C = squareform(cophenet(Z))
    same = pair[:, None] == pair[None, :]
    np.fill_diagonal(same, False)
    assert C[same].max() < C[pair[:, None] != pair[None, :]].min()
    # The labels are those leaves: samples of cluster i sit at centre i.
    for i in range(4):
        assert_allclose(X[km.labels_ == i].mean(axis=0), km.cluster_centers_[i])


def test_polish_moves_enter_the_tree_at_the_final_width():
    # Check that a polish move makes the moved cluster the sibling of the one
    # it split, at sigma_: on data where the polish keeps a move, sigma_ is a
    # height of the tree and the linkage stays valid.
    # Four clusters of sizes 2000/150/60/40, the small ones far and tight:
    # annealing spends all four centres on the small ones, the polish moves
    # one to the big cluster (tests/_data.py, unequal_clusters).
    X = unequal_clusters(0)
    km = AnnealedRBFKMeans(4).fit(X)
    nopolish = AnnealedRBFKMeans(4, polish=False).fit(X)
    assert km.n_polish_moves_ >= 1, "the data should need the polish"
    assert is_valid_linkage(km.split_linkage_)
    assert km.sigma_ in set(km.split_linkage_[:, 2])
    assert km.sigma_ not in set(nopolish.split_linkage_[:, 2])


def test_explicit_init_tree_is_flat():
    # Check that without annealing (an init array) every pair of clusters is
    # separated at one width, the first critical width.
    X, y = _separated_blobs(3, 0)
    init = np.array([X[y == j][0] for j in range(3)])
    km = AnnealedRBFKMeans(3, init=init).fit(X)
    assert is_valid_linkage(km.split_linkage_)
    assert km.n_polish_moves_ == 0
    assert np.unique(km.split_linkage_[:, 2]).size == 1


def test_max_clusters_one_and_constant_data():
    # Check the degenerate cases: max_clusters=1 gives one cluster at the
    # mean, an empty linkage and a lifetime for count 1 only; constant data
    # give one cluster whatever max_clusters.
    X, _ = _separated_blobs(3, 0)
    km = AnnealedRBFKMeans("auto", max_clusters=1).fit(X)
    assert km.n_clusters_ == 1 and km.cluster_centers_.shape == (1, 2)
    assert_allclose(km.cluster_centers_[0], X.mean(axis=0), rtol=1e-12)
    assert km.split_linkage_.shape == (0, 4)
    assert km.cluster_count_lifetimes_.shape == (1,)
    const = np.ones((30, 2))
    km = AnnealedRBFKMeans("auto", max_clusters=5).fit(const)
    assert km.n_clusters_ == 1
    assert_array_equal(km.cluster_centers_, [[1.0, 1.0]])
    assert km.certified_


def test_weights_equal_repetition_and_determinism():
    # Check that integer weights give the fit of repeated rows (the count,
    # its lifetimes, the centres) and that two fits with the same
    # random_state (the references' draws) are identical.
    X, _ = _separated_blobs(4, 1)
    w = np.random.default_rng(0).integers(1, 4, size=X.shape[0])
    auto = {"max_clusters": 8, "random_state": 0}
    weighted = AnnealedRBFKMeans("auto", **auto).fit(X, sample_weight=w)
    repeated = AnnealedRBFKMeans("auto", **auto).fit(np.repeat(X, w, axis=0))
    assert weighted.n_clusters_ == repeated.n_clusters_ == 4
    assert_allclose(
        weighted.cluster_count_lifetimes_, repeated.cluster_count_lifetimes_, rtol=1e-9
    )
    assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-9)
    again = AnnealedRBFKMeans("auto", **auto).fit(X, sample_weight=w)
    names = ["cluster_count_lifetimes_", "cluster_count_reference_lifetimes_"]
    for name in _SHARED + names + ["cluster_count_gap_", "n_iter_total_"]:
        assert_array_equal(getattr(again, name), getattr(weighted, name), err_msg=name)


@pytest.mark.parametrize(
    "params, error, match",
    [
        ({"max_clusters": 0}, InvalidParameterError, "max_clusters"),
        ({"max_clusters": 2.5}, InvalidParameterError, "max_clusters"),
        ({"max_clusters": "5"}, InvalidParameterError, "max_clusters"),
        ({"max_clusters": 500}, ValueError, "should be >= max_clusters=500"),
        ({"init": "k-means++"}, ValueError, 'needs init="anneal"'),
        ({"sigma_end": 0.1}, ValueError, 'needs sigma_end="auto"'),
        ({"n_clusters": "many"}, InvalidParameterError, "n_clusters"),
    ],
)
def test_bad_settings_give_clear_errors(params, error, match):
    # Check that each bad value of max_clusters (0, a float, a string, more
    # than n_samples) and each setting auto cannot work with raises an error
    # naming it, and that the caller's array is left as it was.
    X, _ = _separated_blobs(3, 0)
    before = X.copy()
    params = {"n_clusters": "auto", **params}
    with pytest.raises(error, match=match):
        AnnealedRBFKMeans(**params).fit(X)
    assert_array_equal(X, before)


def test_dask_input_chooses_the_same_count():
    # Check that a dask array (all rows fit in the sample) gives the count,
    # lifetimes and tree of the in-memory fit.
    da = pytest.importorskip("dask.array")
    X, _ = _separated_blobs(4, 2)
    auto = {"max_clusters": 8, "random_state": 0}
    mem = AnnealedRBFKMeans("auto", **auto).fit(X)
    lazy = AnnealedRBFKMeans("auto", **auto).fit(da.from_array(X, chunks=100))
    assert lazy.n_clusters_ == mem.n_clusters_ == 4
    assert_array_equal(lazy.cluster_count_lifetimes_, mem.cluster_count_lifetimes_)
    assert_allclose(
        lazy.cluster_count_reference_lifetimes_,
        mem.cluster_count_reference_lifetimes_,
        rtol=1e-12,
    )
    assert_allclose(lazy.split_linkage_, mem.split_linkage_, rtol=1e-12)
    assert_allclose(lazy.cluster_centers_, mem.cluster_centers_, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="should be >= max_clusters=500"):
        AnnealedRBFKMeans("auto", max_clusters=500).fit(da.from_array(X, chunks=100))


def test_choose_count_rule():
    # Check the choice on hand-made lifetimes: the longest from 2 up; counts
    # within one resolution step of the longest are equal and the smallest
    # of them wins; an infinite lifetime wins; 1 only when no other count
    # lived; count 1's own lifetime never counts.
    step = 0.05
    assert choose_count(np.array([0.1, 0.3, 1.2, 0.2]), step) == 3
    assert choose_count(np.array([0.1, 1.16, 1.2, 0.2]), step) == 2
    assert choose_count(np.array([0.1, 1.1, 1.2, 0.2]), step) == 3
    assert choose_count(np.array([0.1, 0.05, 0.05, 0.0527]), step) == 2
    assert choose_count(np.array([0.1, 0.3, np.inf]), step) == 3
    assert choose_count(np.array([5.0, 0.0, 0.0]), step) == 1
    assert choose_count(np.array([np.inf]), step) == 1
    assert choose_count(np.array([9.0, 0.2, 0.1]), step) == 2


def test_count_lifetimes_definition():
    # Check count_lifetimes on a hand-made path against the sums written
    # out: stage s's count holds from sigma_s to sigma_{s+1}; counts that
    # come back accumulate; open_end makes the last count infinite.
    sigmas = np.array([8.0, 4.0, 2.0, 1.0, 0.5])
    counts = np.array([1, 2, 3, 2, 3])
    expected = [np.log(2), 2 * np.log(2), np.log(2)]
    assert_allclose(count_lifetimes(sigmas, counts), expected, rtol=1e-15)
    assert_allclose(count_lifetimes(sigmas, counts, 5)[3:], 0.0)
    assert count_lifetimes(sigmas, counts, open_end=True)[2] == np.inf
    assert_allclose(count_lifetimes([3.0], [1]), [0.0])
