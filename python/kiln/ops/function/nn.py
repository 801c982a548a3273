"""nn functional ops (being written)."""

__all__ = []
