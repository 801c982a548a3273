"""kiln._extends.parse -- holds compile_config, MindSpore's graph-compiler switches."""
from kiln._extends.parse import compile_config  # noqa: F401
