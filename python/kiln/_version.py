"""The kiln version: one place, read by the package and written into exported models."""
__version__ = "0.1.0"
