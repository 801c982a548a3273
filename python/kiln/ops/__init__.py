"""kiln.ops -- functional ops (MindSpore 2.x names and signatures) and primitive classes."""
from kiln.ops.function.elementwise import *  # noqa: F401,F403
