"""kiln._extends.parse.compile_config -- MindSpore's graph-compiler switches, as module attributes.

MindSpore code sets these (``compile_config.FALLBACK_SUPPORT_LIST_DICT_INPLACE = 0``) to steer
its graph compiler. Each is accepted and kept here so such code runs unchanged; ``NO_EFFECT``
says, per switch, why kiln's compiler does not read it (documented in docs/graph_mode.md).
An empty string means "MindSpore's default".
"""

NO_EFFECT = {
    "COMPILE_PROFILE": "compile-time profiling of MindSpore's pipeline actions; kiln reports "
                       "compile counts and seconds in get_jit_stats()",
    "COMPILE_PROFILE_FINISH_ACTION": "names a MindSpore pipeline action; kiln has none",
    "FALLBACK_SUPPORT_LIST_DICT_INPLACE": "kiln has no switch for what list and dict methods "
                                          "do in compiled code (docs/graph_mode.md)",
    "FALLBACK_FORCE_ANY": "a type-inference setting of MindSpore's JIT Fallback",
    "IF_PARALLEL_CALL": "the shape of MindSpore's if-subgraphs; kiln builds one if-region per "
                        "tensor condition",
    "FOR_HALF_UNROLL": "kiln unrolls a for over a constant sequence and keeps tensor loops",
    "NOT_WAIT_BRANCH_EVAL": "an evaluation order of MindSpore's type inference",
    "RECURSIVE_EVAL": "an evaluation strategy of MindSpore's type inference",
    "SINGLE_EVAL": "threading of MindSpore's type inference; kiln's runs in the calling thread",
    "ENABLE_DDE": "MindSpore's dead-element elimination; kiln's passes remove unused values",
    "DDE_ONLY_MARK": "a variant of MindSpore's dead-element elimination",
    "BOOST_PARSE": "kiln decides constant if-conditions while it builds the graph, always",
    "GREED_PARSE": "a parsing strategy of MindSpore's front end",
    "AMP_ENABLE_ALL_FG": "MindSpore's mixed-precision markers on subgraphs",
    "DUMP_IR_CONFIG": "MindSpore's IR dump format; kiln dumps with set_context(save_graphs=True)",
    "TRAVERSE_SUBSTITUTIONS_MODE": "the order MindSpore applies its IR passes in",
    "PRE_LIFT": "a MindSpore compile-speed transformation",
    "COMPILE_PRINT": "MindSpore prints inferred types at compile time; kiln's print acts at run "
                     "time",
    "ENABLE_FIX_CODE_LINE": "kiln always keeps source lines (errors and IR locations use them)",
    "RECORD_MEMORY": "memory tags on MindSpore's compile actions",
    "TRACE_LABEL_WITH_UNIQUE_ID": "naming in MindSpore's IR dumps",
    "DUMP_IR_DDE_DETAIL": "detail in MindSpore's IR dumps",
    "COMBINE_LIKE_GRAPHS": "MindSpore's sharing of graphs between like Cells",
    "DUMP_VALIDATE_BEFORE_RESET_ID": "a MindSpore IR dump point",
}

__all__ = list(NO_EFFECT)

COMPILE_PROFILE = ""
COMPILE_PROFILE_FINISH_ACTION = ""
FALLBACK_SUPPORT_LIST_DICT_INPLACE = ""
FALLBACK_FORCE_ANY = ""
IF_PARALLEL_CALL = ""
FOR_HALF_UNROLL = ""
NOT_WAIT_BRANCH_EVAL = ""
RECURSIVE_EVAL = ""
SINGLE_EVAL = ""
ENABLE_DDE = ""
DDE_ONLY_MARK = ""
BOOST_PARSE = ""
GREED_PARSE = ""
AMP_ENABLE_ALL_FG = ""
DUMP_IR_CONFIG = ""
TRAVERSE_SUBSTITUTIONS_MODE = ""
PRE_LIFT = ""
COMPILE_PRINT = ""
ENABLE_FIX_CODE_LINE = ""
RECORD_MEMORY = ""
TRACE_LABEL_WITH_UNIQUE_ID = ""
DUMP_IR_DDE_DETAIL = ""
COMBINE_LIKE_GRAPHS = ""
DUMP_VALIDATE_BEFORE_RESET_ID = ""
