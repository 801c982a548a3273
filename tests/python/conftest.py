"""pytest configuration for the Python suite: every test starts from kiln's default context."""

import pytest

import kiln as ms


@pytest.fixture(autouse=True)
def _default_context():
    """A test that switches to Graph mode or changes an option cannot leak it into the next."""
    yield
    ms.reset_context()
