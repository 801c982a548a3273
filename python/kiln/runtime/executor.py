"""Execution control: kiln's ops run synchronously on the host already."""


def launch_blocking():
    """Makes every op finish before the call that launched it returns: MindSpore's debugging
    switch for asynchronous devices. kiln always runs this way (an op's call returns its
    computed result, and an error names the op that raised it), so there is nothing to switch."""


def synchronize():
    """Waits for all work launched so far: on kiln's host runtime it is done when its call
    returns, so this returns at once."""
