"""kiln.ops.functional (imported as ``F``): every functional op, as in mindspore.ops.functional."""
from kiln.ops import *  # noqa: F401,F403
