"""Dense BLAS products, whose floating-point flags carry no information.

The engine's products take finite operands (validated data in working
units, centres, masks, weights and probabilities). Two flags can still come
out of them, and under a caller's ``np.errstate(..., "raise")`` either would
become a ``FloatingPointError`` with nothing wrong:

- underflow, where tiny terms round to subnormals or 0 (scores at a huge
  width, weights far from their centre): their values at working precision,
  as everywhere in the engine;
- invalid, which OpenBLAS's single-precision kernels can set on finite
  operands (seen on blocks of 5 float32 columns, 2 in 20000 calls, depending
  on the memory around the operands; the products were exact).

These products ignore both; overflow and division by zero still reach the
caller's error state.
"""

import numpy as np


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)`` of dense, finite operands."""
    with np.errstate(under="ignore", invalid="ignore"):
        return np.matmul(a, b, out=out)
