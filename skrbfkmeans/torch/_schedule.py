"""Annealing of an RBF K-Means layer's width while a network trains."""

import math
import numbers

import torch

from .._schedule import critical_factor
from ._checks import check_activation, check_codes, check_row_weights, check_sigma
from ._layer import RBFKMeansLayer, margins


def first_critical_temperature(z, sample_weight, activation):
    """``T_c = c lambda_max(Cov_w z)``: where coincident centres first split.

    ``c`` is 2 for softmax and ``2 sqrt(2)`` for entmax-1.5 (a group splitting
    in two); the covariance is weighted and computed in float64.
    """
    z = z.detach().reshape(-1, z.shape[-1]).to(torch.float64)
    w = sample_weight.detach().to(torch.float64)
    W = w.sum()
    mean = (w @ z) / W
    zc = z - mean
    cov = (zc * w[:, None]).T @ zc / W
    lam = float(torch.linalg.eigvalsh(0.5 * (cov + cov.T))[-1].clamp(min=0.0))
    return critical_factor(activation) * lam


def is_one_hot(margin, sigma, activation, dtype):
    """Whether every row is one-hot at ``sigma`` given the smallest margin.

    Entmax-1.5: exactly, when ``margin >= 4 sigma^2``. Softmax: to working
    precision, when the runner-up's ``exp(-margin / T)`` is below half an
    ulp of 1 (``margin > T log(2 / eps)``).
    """
    T = 2.0 * sigma * sigma
    if activation == "entmax15":
        return margin >= 2.0 * T
    return margin > T * math.log(2.0 / torch.finfo(dtype).eps)


class AnnealingSchedule:
    """Cool a K-Means layer's width from the codes' first critical width to hard.

    Deterministic annealing while a network trains: :meth:`start` sets the
    width just above the width where coincident centres first split for the
    current codes; each :meth:`step` (call it once per epoch, or every few
    batches) multiplies the width by ``cooling``, until every row of the
    codes it is given is one-hot (entmax-1.5: every margin ``d_(2) - d_(1)``
    at least ``4 sigma^2``): from then on the layer is K-Means, the loss is
    the K-Means distortion (plus a constant) and the width stays (``done``).

    Parameters
    ----------
    layer : RBFKMeansLayer or None, default=None
        The layer whose ``sigma`` buffer the schedule sets. ``None``: the
        schedule only computes widths (pass ``centers`` to :meth:`step` and
        the width to :func:`rbf_kmeans_loss` yourself).
    cooling : float, default=0.9
        Factor in ``(0, 1)`` applied to the width at each step: smaller cools
        faster. ``0.9`` halves the width in about 7 steps and divides it by
        100 in about 44. AnnealedRBFKMeans's ``cooling`` applies to
        ``sigma^2``: its default 0.9 is about 0.95 on the width.
    sigma_end : float, default=None
        Smallest width: the schedule stops there even if some rows are not
        one-hot. None: no floor, only the one-hot test stops it.
    activation : {"entmax15", "softmax"}, default=None
        The layer's activation, or, without a layer, the map the widths are
        meant for ("entmax15" if None). It sets the critical width and the
        one-hot test (softmax: one-hot to working precision, ``margin > 2
        sigma^2 log(2 / eps)``).
    reassignment_ratio : float or None, default=0.01
        At each :meth:`step` given codes, the layer's centres whose
        responsibility mass on the codes is at most this fraction of the
        largest centre's are dead and are moved onto the codes that cost
        much (:meth:`RBFKMeansLayer.reseed_dead_centers`), before the
        one-hot test. None (or without a layer): no centre is moved.
    random_state : int, default=0
        Seeds the re-seeding draws (a CPU ``torch.Generator`` of the
        schedule's own, reset by :meth:`start`): the same codes give the
        same moves.

    Attributes
    ----------
    sigma : float or None
        The current width; None before :meth:`start`.
    done : bool
        Whether the schedule has stopped cooling.
    n_steps : int
        Number of cooling steps taken since :meth:`start`.
    n_reseeded : int
        Number of centres moved by :meth:`step` since :meth:`start` (a
        centre moved twice counts twice).
    last_reseeded : torch.Tensor of shape (n_moved,)
        Indices (int64) of the centres the last :meth:`step` moved (empty
        when it moved none), for instance to reset an optimiser's state for
        them.

    See Also
    --------
    RBFKMeansLayer : The layer whose width this schedule sets.
    skrbfkmeans.AnnealedRBFKMeans : Annealing as an estimator, with splits,
        merges and a certificate.

    Notes
    -----
    With every centre at the (weighted) mean of the codes, the coincident
    configuration becomes unstable below the critical temperature ``T_c = c
    lambda_max`` (``T = 2 sigma^2``, ``lambda_max`` the largest eigenvalue of
    the codes' weighted covariance, ``c = 2`` for softmax and ``2 sqrt(2)``
    for entmax-1.5). :meth:`start` sets ``sigma = sqrt(0.55 T_c)``, 10%
    above ``T_c`` in temperature, as AnnealedRBFKMeans does. Unlike the
    estimator this schedule does not split or merge centres: it only sets
    the width, and the optimiser moves the centres (and the codes).

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import AnnealingSchedule, RBFKMeansLayer
    >>> z = torch.tensor([[0.0], [1.0], [4.0], [5.0]], dtype=torch.float64)
    >>> layer = RBFKMeansLayer(2, 1, dtype=torch.float64)
    >>> with torch.no_grad():
    ...     layer.centers.copy_(torch.tensor([[0.5], [4.5]]))
    Parameter containing:
    tensor([[0.5000],
            [4.5000]], dtype=torch.float64, requires_grad=True)
    >>> schedule = AnnealingSchedule(layer, cooling=0.8)
    >>> schedule.start(z)  # sqrt(0.55 * 2 sqrt(2) * 4.25), the variance 4.25
    2.5712...
    >>> while not schedule.done:  # in training: an epoch, then a step
    ...     sigma = schedule.step(z)
    >>> schedule.n_steps, sigma  # every margin (12 or more) >= 4 sigma^2
    (2, 1.6456...)
    >>> float(layer.sigma)
    1.6456...
    """

    def __init__(
        self,
        layer=None,
        *,
        cooling=0.9,
        sigma_end=None,
        activation=None,
        reassignment_ratio=0.01,
        random_state=0,
    ):
        if layer is not None and not isinstance(layer, RBFKMeansLayer):
            raise TypeError(
                f"layer must be an RBFKMeansLayer or None, got {type(layer).__name__}."
            )
        if (
            isinstance(cooling, bool)
            or not isinstance(cooling, numbers.Real)
            or not 0 < cooling < 1
        ):
            raise ValueError(f"cooling must be a number in (0, 1), got {cooling!r}.")
        if sigma_end is not None:
            sigma_end = check_sigma(sigma_end)
        if layer is not None:
            if activation is not None and activation != layer.activation:
                raise ValueError(
                    f"activation={activation!r} differs from the layer's "
                    f"{layer.activation!r}."
                )
            activation = layer.activation
        self.layer = layer
        self.cooling = float(cooling)
        self.sigma_end = sigma_end
        self.activation = check_activation(activation or "entmax15")
        self.sigma = None
        self.done = False
        self.n_steps = 0
        self.n_reseeded = 0
        self.last_reseeded = torch.zeros(0, dtype=torch.int64)
        if reassignment_ratio is not None and (
            isinstance(reassignment_ratio, bool)
            or not isinstance(reassignment_ratio, numbers.Real)
            or not 0 <= reassignment_ratio < 1
        ):
            raise ValueError(
                "reassignment_ratio must be None or a number in [0, 1), got "
                f"{reassignment_ratio!r}."
            )
        self.reassignment_ratio = reassignment_ratio
        self.random_state = int(random_state)
        self._generator = torch.Generator().manual_seed(self.random_state)

    def _set(self, sigma):
        self.sigma = float(sigma)
        if self.layer is not None:
            with torch.no_grad():
                self.layer.sigma.fill_(self.sigma)
        return self.sigma

    def start(self, z, sample_weight=None):
        """Set the width just above the first critical width of the codes.

        Parameters
        ----------
        z : torch.Tensor of shape (n_samples, n_features)
            Codes (a batch or all of them); not differentiated.
        sample_weight : torch.Tensor of shape (n_samples,), default=None
            Non-negative weights of the rows.

        Returns
        -------
        sigma : float
            The starting width ``sqrt(0.55 T_c)``.

        Raises
        ------
        ValueError
            If the codes have no spread (every row equal): they have no
            critical width.
        """
        if self.layer is not None:
            check_codes(z, self.layer.centers)
        w = check_row_weights(sample_weight, z, torch.float64)
        T_c = first_critical_temperature(z, w, self.activation)
        if not T_c > 0:
            raise ValueError(
                "The codes have no spread (every row is the same): there is no "
                "critical width to start from."
            )
        self.done = False
        self.n_steps = 0
        self.n_reseeded = 0
        self._generator.manual_seed(self.random_state)
        return self._set(math.sqrt(0.55 * T_c))

    def step(self, z=None, sample_weight=None, centers=None):
        """Cool the width by ``cooling``, unless the schedule is done.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features), default=None
            Codes (computed under ``torch.no_grad()``, with the network in
            ``eval()`` mode so that batch-norm statistics do not move) on
            which the layer's dead centres are re-seeded (see
            ``reassignment_ratio``) and then the new width is tested: when
            every row of positive weight is one-hot, the schedule is
            ``done``. None: cool without either.
        sample_weight : torch.Tensor of shape z.shape[:-1], default=None
            Non-negative weights of the rows; rows of weight 0 are ignored.
        centers : torch.Tensor of shape (n_clusters, n_features), default=None
            The centres for the test; None uses the layer's.

        Returns
        -------
        sigma : float
            The width after the step.
        """
        if self.sigma is None:
            raise RuntimeError("Call start(z) before step().")
        if self.done:
            return self.sigma
        self.last_reseeded = torch.zeros(0, dtype=torch.int64)
        sigma = self.cooling * self.sigma
        if self.sigma_end is not None and sigma <= self.sigma_end:
            sigma, self.done = self.sigma_end, True
        self._set(sigma)
        self.n_steps += 1
        if z is not None and not self.done:
            if self.layer is not None and self.reassignment_ratio is not None:
                moved = self.layer.reseed_dead_centers(
                    z,
                    sample_weight=sample_weight,
                    reassignment_ratio=self.reassignment_ratio,
                    generator=self._generator,
                )
                self.n_reseeded += int(moved.numel())
                self.last_reseeded = moved
            if centers is None:
                if self.layer is None:
                    raise ValueError("Without a layer, step(z) needs the centers.")
                centers = self.layer.centers
            self.done = is_one_hot(
                _smallest_margin(z, centers, sample_weight),
                sigma,
                self.activation,
                z.dtype,
            )
        return self.sigma


def _smallest_margin(z, centers, sample_weight):
    """``min_i d_i(2) - d_i(1)`` over the rows of positive weight (inf if none)."""
    check_codes(z, centers)
    margin = margins(z.reshape(-1, z.shape[-1]), centers)
    if sample_weight is not None:
        w = check_row_weights(sample_weight, z, margin.dtype)
        margin = margin[w > 0]
    if margin.numel() == 0:
        return math.inf
    return float(margin.min())
