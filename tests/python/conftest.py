"""pytest configuration for the Python suite: every test starts from kiln's default context."""

import pytest

import kiln as ms

# PyNative's tape drops every value a gradient rule does not read, not only large ones, so any
# test that differentiates an op checks what its registry entry declares (OpDef::grad_reads).
ms._C.set_tape_hollow_from_bytes(0)


@pytest.fixture(autouse=True)
def _default_context():
    """A test that switches to Graph mode or changes an option cannot leak it into the next."""
    yield
    ms.reset_context()
