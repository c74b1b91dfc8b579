"""grid-spec: the executable specification of GRID.

``Language`` defines L, Prefix(L) and the mask by brute force (``spec``); the
property predicates in ``properties`` are what other packages' tests assert.
"""

from grid_spec.spec import Language

__all__ = ["Language"]
