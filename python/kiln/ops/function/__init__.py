"""Functional ops, one module per op family; kiln.ops re-exports them all."""
