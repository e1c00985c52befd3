"""RBFKMeansLayer: the centres and width of RBF K-Means as a PyTorch module."""

import numbers

import numpy as np
import torch
from torch import nn

from ._checks import (
    check_activation,
    check_codes,
    check_row_weights,
    check_sigma,
    work_dtype,
)
from ._geometry import geometry, score_factor
from ._geometry import squared_distances as _distances
from ._loss import rbf_kmeans_loss, responsibilities, without_autocast


def _check_count(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _row_geometry(z, centers):
    """:func:`geometry` of rows (n x d) without autograd, in the working dtype."""
    with torch.no_grad(), without_autocast(z.device):
        dtype = work_dtype(z.dtype, centers.dtype)
        return geometry(z.to(dtype), centers.to(dtype))


def squared_distances(z, centers):
    """``||z_i - mu_j||^2`` (n x k), without autograd, in the working dtype.

    Each row in its own units (see :mod:`._geometry`): a row's distances
    depend on that row and the centres only, and overflow only where their
    value does.
    """
    geo = _row_geometry(z, centers)
    return _distances(geo, geo.h)


def margins(z, centers):
    """``d_i(2) - d_i(1)`` per row (n,), from the differences of ``h``.

    Exact to rounding of the difference itself, at any distance of the row
    (the row's norm, which cancels, is never added). One centre: inf.
    """
    if centers.shape[0] == 1:
        return torch.full(z.shape[:1], torch.inf, device=z.device)
    geo = _row_geometry(z, centers)
    top = torch.topk(geo.h, 2, dim=1).values
    return ((top[:, 0] - top[:, 1]) * geo.r[:, 0]) * geo.c


class RBFKMeansLayer(nn.Module):
    """RBF K-Means as a layer: soft or sparse cluster responsibilities of codes.

    Holds the centres (a parameter) and the width (a buffer) of RBF K-Means.
    Its ``forward`` gives each row's responsibilities over the centres,
    differentiable in the rows and in the centres; :meth:`loss` is the free
    energy that a network minimises to cluster its codes. At a width where
    every row's margin is at least ``4 sigma^2`` the entmax-1.5 layer is
    exactly K-Means.

    Parameters
    ----------
    n_clusters : int
        Number of centres ``k``.
    n_features : int
        Dimension ``d`` of the codes.
    sigma : float, default=1.0
        Width, a finite number ``>= 0`` (temperature ``T = 2 sigma^2``); kept
        in the buffer ``sigma``, which :class:`AnnealingSchedule` updates.
        ``0`` is the hard limit (one-hot responsibilities, the K-Means
        distortion as loss).
    activation : {"entmax15", "softmax"}, default="entmax15"
        The responsibilities' map. Entmax-1.5 is sparse (exact zeros) and
        exactly one-hot at a finite width; softmax is never exactly one-hot
        and its gradients vanish at small widths.
    device : torch.device, default=None
        Device of the centres and the width.
    dtype : torch.dtype, default=None
        Floating dtype of the centres and the width (PyTorch's default dtype
        if None).

    Attributes
    ----------
    centers : torch.nn.Parameter of shape (n_clusters, n_features)
        The centres, drawn from a standard normal distribution at creation:
        copy in a better start (``from_estimator``, or rows of the codes).
    sigma : torch.Tensor of shape ()
        The width (a buffer: saved in ``state_dict``, moved by ``to``, read
        on the device so that a new value needs no new compiled graph). Set
        it in place (``layer.sigma.fill_(value)``), as
        :class:`AnnealingSchedule` does.
    activation : str
        The responsibilities' map (saved in ``state_dict`` too).

    See Also
    --------
    rbf_kmeans_loss : The loss as a function.
    AnnealingSchedule : Cools ``sigma`` while the network trains.
    skrbfkmeans.RBFKMeans : The estimator; ``from_estimator`` and
        ``to_estimator`` convert.

    Notes
    -----
    The scores are ``-||z_i - mu_j||^2 / (2 sigma^2)`` for both maps,
    computed from ``2 z . mu - ||mu||^2`` with each row in its own units:
    centred on the first centre (state of the layer, never a statistic of
    the batch) and divided by a power of 2 of the row's magnitude, so that
    they neither overflow nor cancel and row ``i``'s output depends on
    ``z_i`` and the layer only. The backward of ``forward`` is the map's
    closed-form Jacobian; that of ``loss`` uses the optimal
    responsibilities (Danskin), and its own derivative is exact.

    The width is read from the ``sigma`` buffer on the device, never on
    the host: ``torch.compile(model, fullgraph=True)`` traces the layer
    once for a whole annealing schedule, and ``torch.export`` exports its
    forward. Under ``torch.autocast`` the distances and the map run in
    float32 (the wider of the codes' and the centres' dtypes), the
    responsibilities come back in the codes' dtype and the loss in float32.

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import RBFKMeansLayer
    >>> layer = RBFKMeansLayer(2, 2, sigma=0.5, dtype=torch.float64)
    >>> with torch.no_grad():
    ...     layer.centers.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
    Parameter containing:
    tensor([[0., 0.],
            [1., 0.]], dtype=torch.float64, requires_grad=True)
    >>> z = torch.tensor([[0.1, 0.0], [0.5, 0.0], [2.0, 0.0]], dtype=torch.float64)
    >>> layer(z).detach()  # sparse: the third row is exactly one-hot
    tensor([[0.9665, 0.0335],
            [0.5000, 0.5000],
            [0.0000, 1.0000]], dtype=torch.float64)
    >>> layer.predict(z)
    tensor([0, 0, 1])
    >>> layer.loss(z).item()
    1.6481...
    """

    def __init__(
        self,
        n_clusters,
        n_features,
        *,
        sigma=1.0,
        activation="entmax15",
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.n_clusters = _check_count(n_clusters, "n_clusters")
        self.n_features = _check_count(n_features, "n_features")
        self.activation = check_activation(activation)
        factory = {"device": device, "dtype": dtype}
        self.centers = nn.Parameter(torch.empty(n_clusters, n_features, **factory))
        self.register_buffer("sigma", torch.tensor(check_sigma(sigma), **factory))
        self.reset_parameters()

    def reset_parameters(self):
        """Draw the centres from a standard normal distribution.

        A start that knows nothing of the codes: prefer :meth:`init_centers`
        (k-means++ on a batch of codes) or :meth:`from_estimator`.
        """
        nn.init.normal_(self.centers)

    def extra_repr(self):
        return (
            f"n_clusters={self.n_clusters}, n_features={self.n_features}, "
            f"activation={self.activation!r}, sigma={float(self.sigma):.4g}"
        )

    def get_extra_state(self):
        return {"activation": self.activation}

    def set_extra_state(self, state):
        self.activation = check_activation(state["activation"])

    def forward(self, z):
        """Return the responsibilities of the centres for each row of ``z``.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features)
            Codes on the layer's device, with its dtype (float16 or bfloat16
            codes, as an encoder gives under autocast, are computed in
            float32 against the centres).

        Returns
        -------
        resp : torch.Tensor of shape (..., n_clusters)
            Each row sums to one; exact zeros outside the support with
            entmax-1.5. In the dtype of ``z``; differentiable in ``z`` and
            in the centres. Row ``i`` depends on ``z_i`` and the layer only:
            a NaN row gives NaN in that row alone.
        """
        check_codes(z, self.centers)
        dtype = work_dtype(z.dtype, self.centers.dtype)
        with without_autocast(z.device):
            geo = geometry(z.reshape(-1, z.shape[-1]).to(dtype), self.centers.to(dtype))
            resp = responsibilities(geo, score_factor(geo, self.sigma), self.activation)
        return resp.reshape(*z.shape[:-1], self.n_clusters).to(z.dtype)

    def loss(self, z, sample_weight=None, reduction="sum"):
        """Return the RBF K-Means free energy of ``z`` at the layer's width.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features)
            Codes on the layer's device.
        sample_weight : torch.Tensor of shape z.shape[:-1], default=None
            Non-negative weights of the rows.
        reduction : {"sum", "mean"}, default="sum"
            ``"mean"`` divides by the total weight.

        Returns
        -------
        loss : torch.Tensor of shape ()
            :func:`rbf_kmeans_loss` with the layer's centres, width and
            activation; differentiable in ``z`` and in the centres.
        """
        return rbf_kmeans_loss(
            z,
            self.centers,
            self.sigma,
            self.activation,
            sample_weight=sample_weight,
            reduction=reduction,
        )

    def predict(self, z):
        """Return the index of the nearest centre of each row of ``z``.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features)
            Codes on the layer's device.

        Returns
        -------
        labels : torch.Tensor of shape z.shape[:-1]
            Indices (int64) of the nearest centres; ties go to the first. A
            row that is not finite (NaN or infinite) has no nearest centre
            and gets -1.
        """
        check_codes(z, self.centers)
        flat = z.reshape(-1, z.shape[-1])
        # The largest h is the nearest centre; h holds the differences
        # between a row's distances without the row's own norm, which at a
        # far row would round them all alike.
        labels = _row_geometry(flat, self.centers).h.argmax(dim=1)
        finite = torch.isfinite(flat).all(dim=1)
        labels = torch.where(finite, labels, -1)
        return labels.reshape(z.shape[:-1])

    @torch.no_grad()
    def init_centers(self, z, *, sample_weight=None, random_state=None):
        """Set the centres by k-means++ on a batch of codes.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features)
            Codes (a first batch, or all of them), with at least
            ``n_clusters`` finite rows; not differentiated.
        sample_weight : torch.Tensor of shape z.shape[:-1], default=None
            Non-negative weights of the rows.
        random_state : int, RandomState instance or None, default=None
            Seeds the draws, as in :func:`sklearn.cluster.kmeans_plusplus`
            (which this calls, in float64 on the CPU).

        Returns
        -------
        self : RBFKMeansLayer
            The layer, its centres set to ``n_clusters`` rows of ``z``.
        """
        from sklearn.cluster import kmeans_plusplus

        check_codes(z, self.centers)
        w = check_row_weights(sample_weight, z, torch.float64).cpu().numpy()
        X = z.detach().reshape(-1, z.shape[-1]).to("cpu", torch.float64).numpy()
        centers, _ = kmeans_plusplus(
            X, self.n_clusters, sample_weight=w, random_state=random_state
        )
        self.centers.copy_(torch.from_numpy(centers))
        return self

    @torch.no_grad()
    def reseed_dead_centers(
        self, z, *, sample_weight=None, reassignment_ratio=0.01, generator=None
    ):
        """Move the centres that no row of ``z`` uses onto rows that cost much.

        A centre is dead when its responsibility mass on ``z`` (at the
        layer's width, with its activation) is at most ``reassignment_ratio``
        times the largest centre's, as scikit-learn's ``MiniBatchKMeans``
        reassigns centres with few rows. Each dead centre, in index order,
        is moved onto a row drawn with probability proportional to its cost
        (weighted squared distance to the nearest centre in use or already
        moved), as k-means++ seeds: the draw favours the costliest regions
        of the codes without landing on a lone outlier that would leave the
        centre dead again. Centres that share their mass (coincident copies
        at a large width) are not dead.

        Parameters
        ----------
        z : torch.Tensor of shape (..., n_features)
            Codes (a batch, or all of them); not differentiated. Rows that
            are not finite are ignored.
        sample_weight : torch.Tensor of shape z.shape[:-1], default=None
            Non-negative weights of the rows.
        reassignment_ratio : float, default=0.01
            The mass, relative to the largest, at or below which a centre is
            dead.
        generator : torch.Generator, default=None
            The draws' generator (on the CPU); None uses PyTorch's global
            one, so that ``torch.manual_seed`` makes them reproducible.

        Returns
        -------
        moved : torch.Tensor of shape (n_moved,)
            Indices (int64) of the centres moved, in order. An optimiser's
            state for them (Adam's moments) is left as it was.
        """
        check_codes(z, self.centers)
        flat = z.reshape(-1, z.shape[-1])
        dtype = work_dtype(z.dtype, self.centers.dtype)
        w = check_row_weights(sample_weight, z, dtype)
        w = torch.where(torch.isfinite(flat).all(dim=1), w, 0.0)
        flat = torch.where(w[:, None] > 0, flat.to(dtype), 0.0)
        mass = w @ self(flat).to(dtype)
        dead = torch.nonzero(mass <= reassignment_ratio * mass.max()).flatten()
        alive = torch.ones_like(mass, dtype=torch.bool)
        alive[dead] = False
        if dead.numel() == 0 or not bool(alive.any()):
            return dead[:0]
        cost = w * squared_distances(flat, self.centers[alive]).amin(dim=1)
        moved = []
        for j in dead.tolist():
            if not bool(cost.sum() > 0):
                break  # every row sits on a centre
            weights = cost.to("cpu", torch.float64)
            i = int(torch.multinomial(weights, 1, generator=generator))
            self.centers[j] = flat[i].to(self.centers.dtype)
            moved.append(j)
            to_new = squared_distances(flat, flat[i : i + 1])[:, 0]
            cost = torch.minimum(cost, w * to_new)
        return torch.tensor(moved, dtype=torch.int64, device=mass.device)

    @classmethod
    def from_estimator(cls, estimator, *, device=None, dtype=None):
        """Build a layer from a fitted K-Means estimator.

        Parameters
        ----------
        estimator : fitted estimator with ``cluster_centers_``
            RBFKMeans or AnnealedRBFKMeans (the layer takes their
            ``cluster_centers_``, ``sigma_`` and the activation of the final
            fit: for AnnealedRBFKMeans with ``activation="auto"``, the one it
            ended with), or any other estimator with ``cluster_centers_``,
            such as scikit-learn's ``KMeans`` and ``MiniBatchKMeans``: a
            layer at width 0 (the hard limit, K-Means itself) with the
            entmax-1.5 activation. ``sigma_ = 0`` (``RBFKMeans(sigma=0)``)
            also gives width 0.
        device : torch.device, default=None
            Device of the layer.
        dtype : torch.dtype, default=None
            Dtype of the layer; None keeps that of ``cluster_centers_``.

        Returns
        -------
        layer : RBFKMeansLayer
            Its ``predict`` equals the estimator's (ties aside).

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the estimator has no ``cluster_centers_``.
        """
        from sklearn.exceptions import NotFittedError

        if not hasattr(estimator, "cluster_centers_"):
            raise NotFittedError(
                f"This {type(estimator).__name__} instance is not fitted yet "
                "(it has no cluster_centers_): call fit before building a "
                "layer from it."
            )
        centers = torch.as_tensor(np.asarray(estimator.cluster_centers_))
        if centers.dim() != 2 or not centers.is_floating_point():
            raise ValueError(
                "cluster_centers_ must be a floating array of shape "
                f"(n_clusters, n_features), got {tuple(centers.shape)} "
                f"{centers.dtype}."
            )
        if dtype is None:
            dtype = centers.dtype
        # AnnealedRBFKMeans(activation="auto") ends with the activation it
        # chose; RBFKMeans keeps its parameter; K-Means has neither.
        final = getattr(estimator, "_final_activation", None)
        activation = final() if final is not None else None
        activation = activation or getattr(estimator, "activation", "entmax15")
        layer = cls(
            centers.shape[0],
            centers.shape[1],
            sigma=float(getattr(estimator, "sigma_", 0.0)),
            activation=activation,
            device=device,
            dtype=dtype,
        )
        with torch.no_grad():
            layer.centers.copy_(centers.to(device=layer.centers.device, dtype=dtype))
        return layer

    def to_estimator(self):
        """Return a fitted RBFKMeans with the layer's centres, width and activation.

        The estimator is fitted on the centres themselves, each its own
        cluster, at width 0 (Lloyd's algorithm leaves them in place), then
        given the layer's width: ``cluster_centers_`` are the centres
        (float64, or float32 for float32 and lower), ``sigma_`` and the
        ``sigma`` parameter the layer's width, ``objective_`` the free energy
        of the centres at that width. ``labels_``, ``inertia_`` and
        ``n_iter_`` describe that fit on the centres, not your data; equal
        centres make it warn, as KMeans does, and centres too large for the
        NumPy engine raise its error.

        Returns
        -------
        estimator : RBFKMeans
            Its ``predict`` equals the layer's (ties aside) and its
            ``predict_proba`` the layer's ``forward``.
        """
        from .._loss import rbf_kmeans_loss as numpy_loss
        from .._rbf_kmeans import RBFKMeans

        centers = self.centers.detach().to("cpu")
        np_dtype = np.float64 if centers.dtype == torch.float64 else np.float32
        C = centers.to(torch.float64).numpy().astype(np_dtype)
        sigma = check_sigma(self.sigma)
        estimator = RBFKMeans(
            n_clusters=self.n_clusters,
            init=C,
            n_init=1,
            sigma=0,
            activation=self.activation,
        ).fit(C)
        # Lloyd's mean of one point, computed in centred coordinates, is that
        # point to an ulp: keep the layer's centres bit for bit.
        estimator.cluster_centers_ = C.copy()
        estimator.set_params(sigma=sigma)
        estimator.sigma_ = sigma
        if sigma > 0:
            estimator.objective_ = float(
                numpy_loss(C, C, sigma=sigma, activation=self.activation)
            )
        return estimator
