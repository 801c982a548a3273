"""Reading a function's source: the AST, where it lives, and STRICT-syntax checks."""

import ast
import inspect
import linecache
import textwrap

# Constructs outside STRICT syntax, with what to do instead.
_UNSUPPORTED = {
    ast.Try: ("try/except", "check conditions with if and raise, or run this part in PyNative"),
    ast.With: ("with", "use the LAX syntax level, or move the with-block outside the compiled "
                        "function"),
    ast.ClassDef: ("class definitions", "define the class outside the compiled function"),
    ast.Global: ("global", "pass the value in as an argument or return it"),
    ast.Nonlocal: ("nonlocal", "return the new value instead"),
    ast.Import: ("import", "import at module level"),
    ast.ImportFrom: ("import", "import at module level"),
    ast.Delete: ("del", "rebind the name instead"),
    ast.Yield: ("yield", "return a tuple or list instead of a generator"),
    ast.YieldFrom: ("yield from", "return a tuple or list instead of a generator"),
    ast.Await: ("await", "compiled functions are not coroutines"),
    ast.AsyncFunctionDef: ("async def", "compiled functions are not coroutines"),
    ast.AsyncFor: ("async for", "compiled functions are not coroutines"),
    ast.AsyncWith: ("async with", "compiled functions are not coroutines"),
    ast.SetComp: ("set comprehensions", "use a list or dict comprehension"),
    ast.Set: ("set literals", "use a tuple or list"),
    ast.GeneratorExp: ("generator expressions", "use a list comprehension or the LAX level"),
    ast.Match: ("match statements", "use if/elif"),
}


class GraphSyntaxError(RuntimeError):
    """The function uses syntax Graph mode (STRICT) does not support; lists every place."""


class FunctionSource:
    """A function's parsed definition, with the file and line numbers of the original code."""

    _cache = {}

    def __init__(self, fn):
        code = fn.__code__
        self.filename = code.co_filename
        self.name = fn.__qualname__
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise GraphSyntaxError(
                f"cannot compile {self.name}: its source is not available ({e}); define it in a "
                f"file, or run it in PyNative mode"
            ) from None
        src = textwrap.dedent("".join(lines))
        tree = _parse(src)
        ast.increment_lineno(tree, first - 1)
        node = tree.body[0]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Lambda):
            node = node.value
        shift = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
        self.node = _find_def(tree, code, shift) or node
        self.first_line = first

    @classmethod
    def of(cls, fn):
        key = fn.__code__
        hit = cls._cache.get(key)
        if hit is None:
            hit = cls._cache[key] = cls(fn)
        return hit

    def line_text(self, lineno):
        return linecache.getline(self.filename, lineno).strip()


def _parse(src):
    """The source's AST; a lambda in a block header (`for x in map(lambda v: ..., xs):`) comes
    with the header alone, completed here with an empty body so that it parses."""
    try:
        return ast.parse(src)
    except SyntaxError:
        if not src.rstrip().endswith(":"):
            raise
        return ast.parse(src.rstrip() + "\n    pass\n")


def _find_def(tree, code, shift=0):
    """The def or lambda node of `code`. Several on its first line (two lambdas) are told apart
    by the columns of the code's own instructions (`shift`: the indentation dedent removed)."""
    on_line = [node for node in ast.walk(tree)
               if isinstance(node, (ast.FunctionDef, ast.Lambda))
               and getattr(node, "lineno", None) == code.co_firstlineno]
    if len(on_line) > 1:
        columns = [c for line, _, c, end in code.co_positions()  # (RESUME has 0..0)
                   if line == code.co_firstlineno and c is not None and end and end > c]
        start = min(columns) - shift if columns else None
        inside = [n for n in on_line if isinstance(n, ast.Lambda) and start is not None
                  and n.body.col_offset <= start < (n.body.end_col_offset or 1 << 30)]
        if inside:  # the innermost lambda whose body holds the code's first instruction
            return max(inside, key=lambda n: n.body.col_offset)
    if on_line:
        return on_line[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == code.co_name:
            return node
    return None


# What the LAX level adds to STRICT syntax (run by the converter, jit/statements.py).
_LAX_SYNTAX = (ast.With, ast.GeneratorExp)


def check_strict(source, lax=False):
    """Raises GraphSyntaxError listing every unsupported construct of the function at once."""
    problems = []
    body = source.node.body if isinstance(source.node, ast.FunctionDef) else [source.node.body]
    for stmt in body:
        for node in ast.walk(stmt):
            if lax and isinstance(node, _LAX_SYNTAX):
                continue
            hit = _UNSUPPORTED.get(type(node))
            if hit is not None:
                what, instead = hit
                problems.append(
                    f'  File "{source.filename}", line {node.lineno}\n'
                    f"    {source.line_text(node.lineno)}\n"
                    f"    {what} is not supported in Graph mode: {instead}"
                )
    if problems:
        raise GraphSyntaxError(
            f"{source.name} uses syntax that Graph mode (STRICT) cannot compile "
            f"({len(problems)} place{'s' if len(problems) > 1 else ''}):\n"
            + "\n".join(problems)
            + "\nRewrite these parts, or run the function in PyNative mode."
        )


def assigned_names(stmts):
    """Names a block of statements may bind (not counting nested functions' bodies)."""
    names = []

    def add(name):
        if name not in names:
            names.append(name)

    def targets(t):
        if isinstance(t, ast.Name):
            add(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e)
        elif isinstance(t, ast.Starred):
            targets(t.value)
        elif isinstance(t, ast.Subscript):  # y[i] = v rebinds y to the updated tensor
            base = t.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                add(base.id)

    def visit(node):
        if isinstance(node, (ast.Assign,)):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets(node.target)
        elif isinstance(node, ast.For):
            targets(node.target)
        elif isinstance(node, ast.FunctionDef):
            add(node.name)
            return
        elif isinstance(node, ast.NamedExpr):
            targets(node.target)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.Lambda)):
                visit(child)

    for s in stmts:
        visit(s)
    return names


def always_returns(stmts):
    """True when a block ends every path with return or raise."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return always_returns(last.body) and always_returns(last.orelse)
    return False


def contains_return(stmts):
    """Whether a return appears anywhere in the block (not counting nested functions)."""
    return any(isinstance(n, ast.Return) for s in stmts for n in _walk_no_defs(s))


def _walk_no_defs(node):
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.Lambda)):
            yield from _walk_no_defs(child)


def bind_arguments(node, defaults, kw_defaults, args, kwargs):
    """Python's argument binding for a nested `def` (positional-only, keyword-only, *args,
    **kwargs and defaults), as a dict of the local names."""
    a, P, empty = node.args, inspect.Parameter, inspect.Parameter.empty
    positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + [
        (x, P.POSITIONAL_OR_KEYWORD) for x in a.args
    ]
    pos_defaults = [empty] * (len(positional) - len(defaults)) + list(defaults)
    params = [P(x.arg, kind, default=d) for (x, kind), d in zip(positional, pos_defaults)]
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [
        P(x.arg, P.KEYWORD_ONLY, default=empty if d is None and nd is None else d)
        for x, d, nd in zip(a.kwonlyargs, kw_defaults, a.kw_defaults)
    ]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    try:
        bound = inspect.Signature(params).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{node.name}(): {e}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def assigned_attributes(node):
    """(name, attr) for each `name.attr = ...` / `name.attr op= ...` in a function's body."""
    cached = getattr(node, "_kiln_assigned_attrs", None)
    if cached is not None:
        return cached
    found = set()

    def add(target):  # `self.x = ...`, also unpacked (`self.x, y = ...`); not `self.x[i] = ...`
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            found.add((target.value.id, target.attr))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                add(t)
        elif isinstance(target, ast.Starred):
            add(target.value)

    for n in ast.walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else (
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            add(t)
    node._kiln_assigned_attrs = found
    return found
