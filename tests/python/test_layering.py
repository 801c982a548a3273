"""kiln's layering, read from the source: which C++ folder includes which, and which Python module
imports which. docs/architecture.md ("What each folder may include", "The Python package's
layers") states the same tables; change both together."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# ---- C++: csrc/<folder> and bindings/ ----

# Each folder and the folders its files may #include (besides its own). Data flows down the
# pipeline frontend -> ir -> analysis -> passes / autodiff -> engine -> runtime -> kernels/cpu,
# with ops the one registry and core the base; an include points the other way, at what a folder
# builds on. passes and autodiff are peers (neither includes the other), and so are passes and
# runtime: a pass never runs eager kernels, and the executor never rewrites a graph.
ALLOWED_INCLUDES = {
    "core": set(),
    # libkiln_comm.so: MPI behind core/comm_abi.h, a plain C table; it includes nothing else
    "comm": {"core"},
    "dataset": {"core"},  # the data pipeline's engine: stages, queues, core tensors; no ops
    "kernels/cpu": {"core"},
    "ops": {"core", "kernels/cpu"},
    "ir": {"core", "kernels/cpu", "ops"},
    "analysis": {"core", "kernels/cpu", "ops", "ir"},
    "passes": {"core", "kernels/cpu", "ops", "ir", "analysis"},
    "autodiff": {"core", "kernels/cpu", "ops", "ir", "analysis"},
    "runtime": {"core", "kernels/cpu", "ops", "ir", "analysis"},
    # include/kiln: the public C++ API (runtime.h), which includes nothing of kiln's; engine
    # implements it.
    "public": set(),
    "engine": {"core", "kernels/cpu", "ops", "ir", "analysis", "passes", "autodiff", "runtime",
               "public"},
    "frontend": {"core", "kernels/cpu", "ops", "ir", "analysis", "passes", "autodiff", "runtime",
                 "engine"},
    "bindings": None,  # converts between Python and any part of the engine: may include anything
}

# (file, include) pairs that break the rules above, each while work that removes it is under
# way; the test fails when one of them no longer occurs, so that it is deleted from here at once.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _folder_of_path(path):
    """The table's folder for a path under csrc/ (relative to csrc) or None; "kiln/..." is the
    public header folder include/kiln."""
    if path.startswith("kiln/"):
        return "public"
    for folder in sorted(ALLOWED_INCLUDES, key=len, reverse=True):
        if path == folder or path.startswith(folder + "/"):
            return folder
    return None


def _cpp_sources():
    files = [p for d in ("csrc", "bindings", "include") for p in (ROOT / d).rglob("*")
             if p.suffix in (".h", ".cc", ".def")]
    assert files, "no C++ sources found"
    return sorted(files)


def _source_folder(path):
    rel = path.relative_to(ROOT).as_posix()
    if rel.startswith("bindings/"):
        return "bindings"
    if rel.startswith("include/"):
        return _folder_of_path(rel[len("include/"):])
    return _folder_of_path(rel[len("csrc/"):])


def _include_folder(source, include):
    """The folder an #include "..." names: a path from csrc/, or (no slash) a file beside the
    including one."""
    if "/" not in include:
        return _source_folder(source)
    return _folder_of_path(include)


def _violations_in(source, text):
    """(file, include, reason) for each #include of `text` (the file `source`) that the table
    does not allow."""
    rel = source.relative_to(ROOT).as_posix()
    folder = _source_folder(source)
    if folder is None:
        return [(rel, "", "is in a folder the table does not list")]
    allowed, found = ALLOWED_INCLUDES[folder], []
    for include in _INCLUDE.findall(text):
        target = _include_folder(source, include)
        if target is None:
            found.append((rel, include, "names no folder of the table"))
        elif allowed is not None and target != folder and target not in allowed:
            found.append((rel, include, f"{folder} may not include {target}"))
    return found


def include_violations():
    return [v for source in _cpp_sources() for v in _violations_in(source, source.read_text())]


def test_every_cpp_folder_is_in_the_table():
    folders = {p.relative_to(ROOT / "csrc").as_posix() for p in (ROOT / "csrc").iterdir()
               if p.is_dir()}
    folders = {f if f != "kernels" else "kernels/cpu" for f in folders}
    assert folders - set(ALLOWED_INCLUDES) == set()
    assert {p.name for p in (ROOT / "csrc/kernels").iterdir() if p.is_dir()} == {"cpu"}


def test_cpp_folders_include_only_the_folders_below_them():
    unexpected = [v for v in include_violations() if v[:2] not in KNOWN_VIOLATIONS]
    assert unexpected == [], "\n".join(f"{f}: #include \"{i}\": {why}" for f, i, why in unexpected)


def test_known_include_violations_still_occur():
    """A fixed violation must leave KNOWN_VIOLATIONS, so the list never hides a new one."""
    occurring = {v[:2] for v in include_violations()}
    assert KNOWN_VIOLATIONS - occurring == set(), "fixed: delete these from KNOWN_VIOLATIONS"


def test_the_include_check_sees_a_violation():
    text = '#include "ops/registry.h"\n#include "runtime/eager.h"\n#include "convert.h"\n'
    assert _violations_in(ROOT / "csrc/ir/new.cc", text) == [
        ("csrc/ir/new.cc", "runtime/eager.h", "ir may not include runtime")]
    assert _violations_in(ROOT / "bindings/new.cc", text) == []
    assert _violations_in(ROOT / "csrc/engine/new.cc", text) == []
    assert _violations_in(ROOT / "csrc/runtime/new.cc", '#include "engine/x.h"')[0][2] == (
        "runtime may not include engine")


# ---- Python: the kiln package ----

PACKAGE = ROOT / "python" / "kiln"

# The package's layers, lowest first: a module may import modules of its own layer or a lower
# one, never a higher one. An entry names a module and everything under it. kiln._C (the C++
# extension) is below them all.
LAYERS = [
    ("base", ["kiln._version", "kiln._graph_state", "kiln.log", "kiln.context", "kiln._extends",
              "kiln.common", "kiln.common.dtype", "kiln.common._arrays", "kiln.common.mutable",
              "kiln._auto_parallel"]),
    ("ops", ["kiln.ops"]),  # the functional API, primitives, grad; makes Tensors through _C
    ("communication", ["kiln.communication"]),  # init, groups; comm_func over kiln.ops
    ("tensor", ["kiln.common.initializer", "kiln.common.tensor", "kiln.common.parameter",
                "kiln.common.sparse_tensor", "kiln.common.tensor_methods",
                "kiln.common.tensor_inplace", "kiln.common._tensor_breadth"]),
    ("dataset", ["kiln.dataset"]),  # the data pipeline: sources, operations, transforms
    ("jit", ["kiln.jit"]),  # Graph mode; knows Cells only through kiln.jit.cell_interface
    ("nn", ["kiln.nn", "kiln.mint"]),
    ("api", ["kiln.train", "kiln.common.api", "kiln", "kiln.run", "kiln._msrun"]),
]


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts), parts[-1] == "__init__"


def _modules():
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name, is_package = _module_name(path)
        modules[name] = (path, is_package)
    return modules


MODULES = _modules()


def _ancestors(name):
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _absolute(module, is_package, node):
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(module, is_package, node):
    """The kiln modules an import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _absolute(module, is_package, node)
    names = [f"{base}.{alias.name}" for alias in node.names]
    return [n if n in MODULES or n == "kiln._C" else base for n in names]


def imports(module):
    """(imported module, line, at module level?) for each kiln module `module` imports,
    directly or as the package that importing it runs first (an import of kiln.ops._core from
    outside kiln.ops runs kiln/ops/__init__.py)."""
    path, is_package = MODULES[module]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            local = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, is_package, child):
                    named = [target] + [a for a in _ancestors(target)
                                        if a not in _ancestors(module) and a != module]
                    found.extend((t, child.lineno, not local) for t in named
                                 if t in MODULES and t != module)
            visit(child, local)

    visit(ast.parse(path.read_text(), str(path)), False)
    return sorted(set(found), key=lambda edge: (edge[1], edge[0]))


def import_graph():
    return {m: imports(m) for m in MODULES}


def _strongly_connected(graph):
    """Tarjan's algorithm: the groups of modules that import each other, directly or not."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted({t for t, _, _ in graph[v]}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _layer_of(module):
    best = None
    for rank, (_, entries) in enumerate(LAYERS):
        for entry in entries:
            if module == entry or module.startswith(entry + "."):
                if best is None or len(entry) > len(best[1]):
                    best = (rank, entry)
    return None if best is None else best[0]


def test_the_package_is_found():
    assert {"kiln", "kiln.ops._core", "kiln.jit.api", "kiln.nn.cell"} <= set(MODULES)


def _shortest_cycle(graph, group):
    """One shortest cycle through the first module of `group`, as its import edges."""
    start, members = group[0], set(group)
    paths, seen = {start: []}, {start}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target, line, top in graph[module]:
                if target == start:
                    return paths[module] + [(module, target, line, top)]
                if target in members and target not in seen:
                    seen.add(target)
                    paths[target] = paths[module] + [(module, target, line, top)]
                    following.append(target)
        frontier = following
    return []


def test_no_import_cycles():
    """Counting imports inside functions too: a lazy import that only dodges a cycle at import
    time still ties the two modules together."""
    graph = import_graph()
    cycles = _strongly_connected(graph)
    described = [", ".join(group) + "\n" + "\n".join(
        f"  {m} imports {t} (line {line}{'' if top else ', inside a function'})"
        for m, t, line, top in _shortest_cycle(graph, group))
        for group in cycles]
    assert cycles == [], "modules that import each other:\n" + "\n".join(described)


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _layer_of(m) is None] == []


def test_modules_import_only_their_layer_and_below():
    wrong = []
    for module, found in import_graph().items():
        for target, line, _ in found:
            if _layer_of(target) > _layer_of(module):
                wrong.append(f"{module} (layer {LAYERS[_layer_of(module)][0]}) imports "
                             f"{target} (layer {LAYERS[_layer_of(target)][0]}), line {line}")
    assert wrong == [], "\n".join(wrong)


def test_jit_never_reaches_nn():
    """Graph mode knows Cells only through the interface nn implements, so kiln.jit imports
    nothing of kiln.nn, directly or through another module."""
    graph = import_graph()
    reached, todo = set(), [m for m in MODULES if m == "kiln.jit" or m.startswith("kiln.jit.")]
    while todo:
        module = todo.pop()
        for target, _, _ in graph[module]:
            if target not in reached:
                reached.add(target)
                todo.append(target)
    assert sorted(m for m in reached if m == "kiln.nn" or m.startswith("kiln.nn.")) == []


def _names_used(tree):
    """Every attribute and name a module's code mentions (x.attr, name, from m import name)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(alias.name for alias in node.names)
    return names


def test_only_the_emitter_touches_the_graph_builder():
    """GraphEmitter is the front end's one door to the C++ graph builder: no other module
    names _C.GraphBuilder or reaches into an emitter's builder."""
    users = sorted(m for m, (path, _) in MODULES.items() if m != "kiln.jit.emitter"
                   and {"GraphBuilder", "_builder"} & _names_used(ast.parse(path.read_text())))
    assert users == []


class _Source:
    """A module's text for the checker's own test."""

    def __init__(self, text):
        self.text = text

    def read_text(self):
        return self.text

    def __str__(self):
        return "<test>"


@pytest.mark.parametrize("source, cycle", [
    ("import kiln.b\n", True),
    ("def f():\n    from kiln import b\n", True),  # a lazy import closes the cycle too
    ("from kiln.c import x\n", True),  # kiln.c is a package whose __init__ imports kiln.a
    ("from kiln import _C\n", False),
    ("from kiln.c.d import x\n", True),  # importing kiln.c.d runs kiln/c/__init__.py first
])
def test_the_cycle_check_sees_every_kind_of_import(monkeypatch, source, cycle):
    """The checker itself, on a small package in which kiln.b and kiln.c import kiln.a."""
    texts = {"kiln.a": (source, False), "kiln.b": ("import kiln.a\n", False),
             "kiln.c": ("from kiln import a\n", True), "kiln.c.d": ("x = 1\n", False)}
    monkeypatch.setitem(globals(), "MODULES",
                        {name: (_Source(text), pkg) for name, (text, pkg) in texts.items()})
    assert bool(_strongly_connected(import_graph())) == cycle
