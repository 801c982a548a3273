"""CellBase: what Graph mode knows of a Cell, so that kiln.jit never imports kiln.nn."""


class CellBase:
    """The base of kiln.nn.Cell as the compiler sees it.

    An instance is compiled through its ``construct``: inside compiled code it is seen through
    a CellProxy (jit/scope.py), so its Parameters become graph inputs and its other attributes
    guarded constants, and it is compared by identity in cache guards. Its compiled variants are
    kept on the instance (``_kiln_graph_fn``), compiled with the JitConfig of its
    ``_jit_config_dict``. A class deriving from it that compiled code calls is built at compile
    time. kiln.nn.Cell provides all of this; the compiler asks only ``isinstance(x, CellBase)``.
    """

    __slots__ = ()
