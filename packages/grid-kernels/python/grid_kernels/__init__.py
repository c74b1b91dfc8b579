"""GRID kernels: the compiled hot path.

The native module is private; this package re-exports what it offers. Until the
kernels issue lands it carries only ``ABI_VERSION``, which ``grid_core`` checks
before it would use any kernel.
"""

from grid_kernels._native import ABI_VERSION

__all__ = ["ABI_VERSION"]
