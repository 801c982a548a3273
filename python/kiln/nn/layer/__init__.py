"""kiln.nn.layer -- layers."""
from kiln.nn.layer.activation import *  # noqa: F401,F403
from kiln.nn.layer.basic import *  # noqa: F401,F403
from kiln.nn.layer.container import *  # noqa: F401,F403
from kiln.nn.layer.conv import Conv2d  # noqa: F401
from kiln.nn.layer.embedding import *  # noqa: F401,F403
from kiln.nn.layer.normalization import *  # noqa: F401,F403
from kiln.nn.layer.pooling import *  # noqa: F401,F403
