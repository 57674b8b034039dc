"""curvekit's version (one place, read by the package and its metadata)."""

__version__ = "0.1.0"
