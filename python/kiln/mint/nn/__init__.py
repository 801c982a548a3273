"""kiln.mint.nn -- mindspore.mint.nn: its functional API (the Cells are not in kiln yet)."""
from kiln.common._missing import missing_attribute as _missing_attribute
from kiln.mint.nn import functional  # noqa: F401

__getattr__ = _missing_attribute("kiln.mint.nn", "mindspore.mint.nn")
