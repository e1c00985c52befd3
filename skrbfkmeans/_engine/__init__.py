"""The engine: named passes over rows in blocks, and what they run on.

The block loop and its buffers, the block kernels, the BLAS products, the
pool of threads and the entmax row kernels. Nothing here knows about
estimators.
"""
