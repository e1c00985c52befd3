"""RBFKMeansLayer: the centres and width of RBF K-Means as a PyTorch module."""

import numbers

import numpy as np
import torch
from torch import nn

from ._loss import (
    check_activation,
    check_codes,
    check_sigma,
    rbf_kmeans_loss,
    scores,
    temperature,
    work_dtype,
    working_units,
)
from ._maps import entmax15


def _check_count(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def squared_distances(z, centers):
    """``||z_i - mu_j||^2`` (n x k), without autograd, in working units.

    Returns the distances and the power of 2 they are divided by (squared).
    """
    with torch.no_grad():
        dtype = work_dtype(z.dtype)
        zc, mc, scale = working_units(z.to(dtype), centers.to(dtype))
        d = (zc * zc).sum(dim=1, keepdim=True) + (mc * mc).sum(dim=1)
        d = (d - 2.0 * zc @ mc.T).clamp(min=0.0)
    return d, scale


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
        The width (a buffer: saved in ``state_dict``, moved by ``to``).
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
    computed from ``2 z . mu - ||mu||^2`` in working units (centred, and
    scaled by a power of 2 when far from 1) so that they neither overflow
    nor cancel. The backward of ``forward`` is the map's closed-form
    Jacobian; that of ``loss`` uses the optimal responsibilities (Danskin).

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
        """Draw the centres from a standard normal distribution."""
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
        z : torch.Tensor of shape (n_samples, n_features)
            Codes, with the layer's dtype and device.

        Returns
        -------
        resp : torch.Tensor of shape (n_samples, n_clusters)
            Each row sums to one; exact zeros outside the support with
            entmax-1.5. Differentiable in ``z`` and in the centres.
        """
        check_codes(z, self.centers)
        dtype = work_dtype(z.dtype)
        zc, mc, scale = working_units(z.to(dtype), self.centers.to(dtype))
        s = scores(zc, mc, temperature(check_sigma(self.sigma), scale, dtype))
        resp = torch.softmax(s, dim=1) if self.activation == "softmax" else entmax15(s)
        return resp.to(z.dtype)

    def loss(self, z, sample_weight=None, reduction="sum"):
        """Return the RBF K-Means free energy of ``z`` at the layer's width.

        Parameters
        ----------
        z : torch.Tensor of shape (n_samples, n_features)
            Codes, with the layer's dtype and device.
        sample_weight : torch.Tensor of shape (n_samples,), default=None
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
        z : torch.Tensor of shape (n_samples, n_features)
            Codes, with the layer's dtype and device.

        Returns
        -------
        labels : torch.Tensor of shape (n_samples,)
            Indices (int64) of the nearest centres; ties go to the first.
        """
        check_codes(z, self.centers)
        d, _ = squared_distances(z, self.centers)
        return d.argmin(dim=1)

    @classmethod
    def from_estimator(cls, estimator, *, device=None, dtype=None):
        """Build a layer from a fitted RBFKMeans or AnnealedRBFKMeans.

        Parameters
        ----------
        estimator : RBFKMeans or AnnealedRBFKMeans
            A fitted estimator: the layer takes its ``cluster_centers_``,
            ``sigma_`` and the activation of its final fit (for
            AnnealedRBFKMeans with ``activation="auto"``, the one it ended
            with). ``sigma_ = 0`` (``RBFKMeans(sigma=0)``, KMeans's fit)
            gives a layer at width 0, the hard limit.
        device : torch.device, default=None
            Device of the layer.
        dtype : torch.dtype, default=None
            Dtype of the layer; None keeps that of ``cluster_centers_``.

        Returns
        -------
        layer : RBFKMeansLayer
            Its ``predict`` equals the estimator's (ties aside).
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator, ["cluster_centers_", "sigma_"])
        centers = torch.as_tensor(np.asarray(estimator.cluster_centers_))
        if dtype is None:
            dtype = centers.dtype
        # AnnealedRBFKMeans(activation="auto") ends with the activation it
        # chose; RBFKMeans keeps its parameter.
        final = getattr(estimator, "_final_activation", None)
        activation = final() if final is not None else estimator.activation
        layer = cls(
            centers.shape[0],
            centers.shape[1],
            sigma=float(estimator.sigma_),
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
