"""Type stub for the private native module (checked with mypy.stubtest)."""

__all__ = ["ABI_VERSION"]

ABI_VERSION: int
"""Version of the table and buffer layout shared with grid_core."""
