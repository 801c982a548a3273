"""SequentialCell and CellList, whose children are named "0", "1", ... (or dict keys), and
CellDict, whose children are named by their keys."""
from collections import OrderedDict
from collections.abc import Mapping

from kiln.nn.cell import Cell

__all__ = ["SequentialCell", "CellList", "CellDict"]


def _check_cell(cell, who, index):
    if not isinstance(cell, Cell):
        raise TypeError(f"{who}: item {index} must be a Cell, got {type(cell).__name__}")
    return cell


def _container_args(who, args, kwargs, what):
    """auto_prefix and the one optional initial argument (None if absent) of a container."""
    auto_prefix = kwargs.pop("auto_prefix", True)
    if kwargs:
        raise TypeError(f"{who}: unexpected keyword arguments {sorted(kwargs)}")
    if len(args) > 1:
        raise TypeError(f"{who}: takes one {what}, got {len(args)} arguments")
    return auto_prefix, (args[0] if args else None)


class SequentialCell(Cell):
    """Runs its cells in order, each on the previous one's output.

    ``SequentialCell(c1, c2, ...)``, ``SequentialCell([c1, c2])`` or
    ``SequentialCell(OrderedDict(name=cell, ...))``.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for name, cell in args[0].items():
                self.insert_child_to_cell(name, _check_cell(cell, "SequentialCell", name))
        else:
            cells = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
            for i, cell in enumerate(cells):
                self.insert_child_to_cell(str(i), _check_cell(cell, "SequentialCell", i))

    def _items(self):
        return list(self._cells.items())

    def __getitem__(self, index):
        items = self._items()
        if isinstance(index, slice):
            return SequentialCell(OrderedDict(items[index]))
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"SequentialCell: index must be an int or a slice, got "
                            f"{type(index).__name__}")
        if not -len(items) <= index < len(items):
            raise IndexError(f"SequentialCell: index {index} out of range for {len(items)} cells")
        return items[index][1]

    def __setitem__(self, index, cell):
        items = self._items()
        if not -len(items) <= index < len(items):
            raise IndexError(f"SequentialCell: index {index} out of range for {len(items)} cells")
        self.insert_child_to_cell(items[index][0], _check_cell(cell, "SequentialCell", index))

    def __delitem__(self, index):
        items = self._items()
        names = [n for n, _ in (items[index] if isinstance(index, slice) else [items[index]])]
        for name in names:
            del self._cells[name]
        if all(k.isdigit() for k in self._cells):  # keep "0", "1", ... contiguous
            cells = list(self._cells.values())
            self._cells.clear()
            for i, cell in enumerate(cells):
                self._cells[str(i)] = cell

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def append(self, cell):
        """Adds cell at the end; returns None, as in MindSpore."""
        self.insert_child_to_cell(str(len(self)), _check_cell(cell, "SequentialCell", len(self)))

    def construct(self, x):
        for cell in self._cells.values():
            x = cell(x)
        return x


class CellList(Cell):
    """A list of cells, registered as children "0", "1", ...; not callable itself."""

    def __init__(self, *args, **kwargs):
        auto_prefix, cells = _container_args("CellList", args, kwargs, "list of cells")
        super().__init__(auto_prefix=auto_prefix)
        if cells is not None:
            self.extend(cells)

    def __getitem__(self, index):
        cells = list(self._cells.values())
        if isinstance(index, slice):
            return CellList(cells[index])
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"CellList: index must be an int or a slice, got "
                            f"{type(index).__name__}")
        if not -len(cells) <= index < len(cells):
            raise IndexError(f"CellList: index {index} out of range for {len(cells)} cells")
        return cells[index]

    def __setitem__(self, index, cell):
        if not -len(self) <= index < len(self):
            raise IndexError(f"CellList: index {index} out of range for {len(self)} cells")
        self.insert_child_to_cell(str(index % len(self)), _check_cell(cell, "CellList", index))

    def __delitem__(self, index):
        cells = list(self._cells.values())
        del cells[index]
        self._cells.clear()
        for i, cell in enumerate(cells):
            self._cells[str(i)] = cell

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.values())

    def append(self, cell):
        """Adds cell at the end; returns None (extend returns the list), as in MindSpore."""
        self.insert_child_to_cell(str(len(self)), _check_cell(cell, "CellList", len(self)))

    def extend(self, cells):
        if isinstance(cells, Cell) and not isinstance(cells, (CellList, SequentialCell)):
            raise TypeError("CellList.extend: expected an iterable of cells, got one Cell")
        for cell in cells:
            self.append(cell)
        return self

    def insert(self, index, cell):
        cells = list(self._cells.values())
        cells.insert(index, _check_cell(cell, "CellList", index))
        self._cells.clear()
        for i, c in enumerate(cells):
            if c is cell:
                self.insert_child_to_cell(str(i), c)
            else:
                self._cells[str(i)] = c

    def construct(self, *inputs):
        raise NotImplementedError("CellList is a container; call its cells instead")


class CellDict(Cell):
    """Cells by name, in insertion order, registered as children under their keys (so their
    Parameters are found and named "key.weight"); not callable itself.

    ``CellDict({"conv": c1, "act": c2})``, ``CellDict([("conv", c1), ("act", c2)])`` or another
    CellDict. Keys are non-empty str without ".". In a compiled construct, ``self.cells["conv"]``
    with a constant key and loops over ``keys()``, ``values()`` and ``items()`` work as in
    PyNative.
    """

    def __init__(self, *args, **kwargs):
        auto_prefix, cells = _container_args("CellDict", args, kwargs, "mapping or list of pairs")
        super().__init__(auto_prefix=auto_prefix)
        if cells is not None:
            self.update(cells)

    def __getitem__(self, key):
        if key not in self._cells:
            raise KeyError(f"CellDict: no cell named {key!r}")
        return self._cells[key]

    def __setitem__(self, key, cell):
        self.insert_child_to_cell(key, _check_cell(cell, "CellDict", key))

    def __delitem__(self, key):
        self.pop(key)

    def __len__(self):
        return len(self._cells)

    def __iter__(self):
        return iter(self._cells.keys())

    def __contains__(self, key):
        return key in self._cells

    def keys(self):
        return self._cells.keys()

    def values(self):
        return self._cells.values()

    def items(self):
        return self._cells.items()

    def clear(self):
        for key in list(self._cells):
            self.pop(key)

    def pop(self, key):
        """Removes the cell named key and returns it."""
        cell = self[key]
        del self._cells[key]
        return cell

    def update(self, cells):
        """Adds or replaces cells from a mapping (a dict, OrderedDict or CellDict) or an
        iterable of (key, cell) pairs, in its order."""
        if isinstance(cells, Cell) and not isinstance(cells, CellDict):
            raise TypeError("CellDict.update: expected a mapping or pairs, got one Cell")
        pairs = cells.items() if isinstance(cells, (Mapping, CellDict)) else cells
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"CellDict.update: item {i} must be a (key, cell) pair, got "
                                f"{type(pair).__name__}")
            self[pair[0]] = pair[1]

    def construct(self, *inputs):
        raise NotImplementedError("CellDict is a container; call its cells instead")
