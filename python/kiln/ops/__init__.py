"""kiln.ops -- functional ops (MindSpore 2.x names and signatures) and primitive classes."""
from kiln.ops.function.elementwise import *  # noqa: F401,F403
from kiln.ops.function.reduce import *  # noqa: F401,F403
from kiln.ops.function.normalization import *  # noqa: F401,F403
from kiln.ops.function.array import *  # noqa: F401,F403
from kiln.ops.function.linalg import *  # noqa: F401,F403
from kiln.ops.function.nn import *  # noqa: F401,F403
