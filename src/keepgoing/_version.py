"""The package version, importable by any layer without the public surface."""

__all__ = ["__version__"]

__version__ = "0.1.0"
