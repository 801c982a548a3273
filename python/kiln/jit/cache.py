"""The compile cache of one jitted function: variants per owner, input signature and guard values.

Per owner (the `self` of a method, or none): a Cell's variants live on the Cell itself, so they
die with it and a recycled id can never reach another instance's graphs. Per input signature,
variants are grouped by *what* compilation read (the guards' names, in order); within a group
they are found by hashing the tuple of the guarded values, so a function with many variants
(a global step counter) is looked up in constant time instead of by a scan.
"""

import threading
import weakref

_ATTRIBUTE = "_kiln_jit_variants"  # on an owner: {JitFunction: Variants}


class _PerOwner(dict):
    """The variants kept on an owner; a copy of the owner starts with none (compiled graphs
    hold C++ objects and the copy's Parameters are other tensors)."""

    def __copy__(self):
        return _PerOwner()

    def __deepcopy__(self, memo):
        return _PerOwner()


class _SignatureVariants:
    """The variants compiled for one input signature."""

    def __init__(self):
        self.groups = {}  # guard names -> (the first variant's guards, {guard values: compiled})
        self.last = None  # the variant found last: checked first (cheap while nothing changed)

    def lookup(self):
        last = self.last
        if last is not None and last.guards.first_failure() is None:
            return last
        for guards, table in list(self.groups.values()):  # a copy: other threads may insert
            values = guards.current_values()
            hit = None if values is None else table.get(values)
            if hit is not None:
                hit.guards.mark_passed()
                self.last = hit
                return hit
        return None

    def insert(self, compiled):
        _, table = self.groups.setdefault(compiled.guards.names(), (compiled.guards, {}))
        table[compiled.guards.values()] = compiled
        compiled.guards.mark_passed()
        self.last = compiled

    def all(self):
        return [c for _, table in list(self.groups.values()) for c in list(table.values())]


class Variants:
    """The compiled variants of one function for one owner."""

    def __init__(self):
        self.by_signature = {}  # input signature -> _SignatureVariants
        self.count = 0

    def lookup(self, key):
        entry = self.by_signature.get(key)
        return None if entry is None else entry.lookup()

    def insert(self, key, compiled):
        self.by_signature.setdefault(key, _SignatureVariants()).insert(compiled)
        self.count += 1

    def miss_reason(self, key):
        """Why `key` found no variant: the guard that changed, or a new input signature; None
        for the first compile."""
        entry = self.by_signature.get(key)
        if entry is not None and entry.last is not None:
            return entry.last.guards.first_failure() or "a guarded value changed"
        return "new input signature" if self.by_signature else None

    def values(self):
        """Lists of compiled variants, one per input signature."""
        return [entry.all() for entry in list(self.by_signature.values())]


class CompileCache:
    """Variants by owner. Lookups take no lock; compiling and inserting hold `lock`, so two
    threads calling the same function compile each variant once (eager ops never wait)."""

    def __init__(self):
        self.lock = threading.RLock()
        self._unowned = Variants()
        self._owners = weakref.WeakSet()  # owners holding variants, for graph_text
        self._strong = {}  # id -> (owner, Variants) for owners without __dict__ or weakrefs

    def of(self, jitted, owner):
        """The Variants of `jitted` for `owner` (created empty on first use)."""
        if owner is None:
            return self._unowned
        per_owner = getattr(owner, "__dict__", None)
        if not isinstance(per_owner, dict):  # __slots__, or a class's read-only mapping
            return self._strong_variants(owner)
        table = per_owner.get(_ATTRIBUTE)
        if table is None:
            table = per_owner[_ATTRIBUTE] = _PerOwner()
        variants = table.get(jitted)
        if variants is None:
            variants = table[jitted] = Variants()
            try:
                self._owners.add(owner)
            except TypeError:  # not weakly referenceable: graph_text can't list its variants
                pass
        return variants

    def _strong_variants(self, owner):
        # No place on the owner: keep the owner alive with its variants, so its id is never
        # reused by another object while the entry exists.
        hit = self._strong.get(id(owner))
        if hit is None:
            hit = self._strong[id(owner)] = (owner, Variants())
        return hit[1]

    def all_variants(self, jitted):
        groups = [self._unowned] + [hit[1] for hit in list(self._strong.values())]
        for owner in list(self._owners):
            variants = owner.__dict__.get(_ATTRIBUTE, {}).get(jitted)
            if variants is not None:
                groups.append(variants)
        return [entries for variants in groups for entries in variants.values()]
