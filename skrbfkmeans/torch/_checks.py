"""Checks of the PyTorch extra's arguments, with errors that name the problem.

Values are read on the host only outside ``torch.compile`` (where a read
would break the graph); shapes, dtypes and devices are checked everywhere.
"""

import math
import numbers

import torch

ACTIVATIONS = ("softmax", "entmax15")
REDUCTIONS = ("sum", "mean")


def compiling():
    """Whether the code is being traced (``torch.compile`` or ``torch.export``)."""
    return torch.compiler.is_compiling()


def work_dtype(*dtypes):
    """Return the dtype the distances are computed in: float32 at least.

    float16 and bfloat16 compute in float32 (mixed precision keeps the
    sensitive part in float32); a mixture (bfloat16 codes against float32
    centres under autocast) computes in the wider of the two.
    """
    dtype = torch.float32
    for other in dtypes:
        dtype = torch.promote_types(dtype, other)
    return dtype


def check_sigma(sigma):
    """Return ``sigma`` (a real number or a 0-d tensor) as a float ``>= 0``."""
    if isinstance(sigma, torch.Tensor):
        if sigma.numel() != 1:
            raise ValueError(
                f"sigma must be a number or a 0-d tensor, got shape "
                f"{tuple(sigma.shape)}."
            )
        sigma = float(sigma)
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real):
        raise TypeError(f"sigma must be a real number, got {sigma!r}.")
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}.")
    return sigma


def width_tensor(sigma, device, dtype):
    """Return the width as a 0-d tensor, checked on the host unless compiling.

    A tensor stays a tensor (no read on the host while compiling: a new
    value then needs no new graph); a number becomes a tensor of ``dtype``
    (the working dtype: a device without float64 needs none) on ``device``.
    """
    if isinstance(sigma, torch.Tensor):
        if sigma.numel() != 1:
            raise ValueError(
                f"sigma must be a number or a 0-d tensor, got shape "
                f"{tuple(sigma.shape)}."
            )
        if not compiling():
            check_sigma(sigma)
        return sigma.reshape(())
    if not compiling():
        # Compiling, a number is a constant of the graph (a new value
        # recompiles): no check on the host, which the tracer cannot follow.
        sigma = check_sigma(sigma)
    return torch.tensor(sigma, dtype=dtype, device=device)


def check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {ACTIVATIONS}, got {activation!r}."
        )
    return activation


def _is_low_precision(dtype):
    return torch.finfo(dtype).bits < 32


def check_codes(z, centers):
    """Validate the rows ``z`` (..., d) against the centres (k x d).

    The dtypes must match, except that float16 or bfloat16 on one side
    (mixed precision: an encoder's codes under autocast) meets any floating
    dtype on the other.
    """
    for x, name in [(z, "z"), (centers, "centers")]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}.")
    if z.dim() < 1:
        raise ValueError("z must have shape (..., n_features), got a scalar.")
    if centers.dim() != 2:
        raise ValueError(
            f"centers must have shape (n_clusters, n_features), got "
            f"{tuple(centers.shape)}."
        )
    if z.shape[-1] != centers.shape[1]:
        raise ValueError(
            f"centers has {centers.shape[1]} features but z has {z.shape[-1]}."
        )
    if centers.shape[0] == 0:
        raise ValueError("centers needs at least one row.")
    mixed = _is_low_precision(z.dtype) or _is_low_precision(centers.dtype)
    if (z.dtype != centers.dtype and not mixed) or z.device != centers.device:
        raise ValueError(
            f"z ({z.dtype}, {z.device}) and centers ({centers.dtype}, "
            f"{centers.device}) must have the same dtype and device (float16 "
            "or bfloat16 codes may meet centres of another floating dtype)."
        )


def check_row_weights(sample_weight, z, dtype):
    """Return the weights of the rows of ``z`` (..., d), flattened, as ``dtype``.

    Ones if None. Values (finite, non-negative) are checked on the host
    unless compiling.
    """
    rows = z.shape[:-1]
    if sample_weight is None:
        return torch.ones(math.prod(rows), dtype=dtype, device=z.device)
    w = torch.as_tensor(sample_weight, dtype=dtype, device=z.device)
    if w.shape != rows:
        raise ValueError(
            f"sample_weight must have shape {tuple(rows)} (z's shape without "
            f"its last dimension), got {tuple(w.shape)}."
        )
    if not compiling() and (not bool(torch.isfinite(w).all()) or bool((w < 0).any())):
        raise ValueError("sample_weight must be finite and non-negative.")
    return w.reshape(-1)
