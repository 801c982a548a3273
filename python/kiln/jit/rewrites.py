"""AST rewrites: conditional expressions into select calls, loop exits and returns into flags."""

import ast
import copy

# Names the rewritten code calls; the converter puts them in the scope expressions run in.
SELECT_FN, NOT_FN, NOTE_RETURN_FN = "__kiln_select__", "__kiln_not__", "__kiln_note_return__"
CONTAINS_FN = "__kiln_contains__"
HAS_KEY_FN = "__kiln_has_key__"
# Checked list/tuple methods and shifts (builtin_checks; found through the graph builtins).
CALL_METHOD_FN, LSHIFT_FN, RSHIFT_FN = "__kiln_call_method__", "__kiln_lshift__", "__kiln_rshift__"
_CHECKED_METHODS = ("pop", "insert", "index")  # insert: when list_method does not take it
FSTRING_FN, STR_FORMAT_FN = "__kiln_fstring__", "__kiln_str_format__"
LIST_METHOD_FN = "__kiln_list_method__"
BUILTIN_FN = "__kiln_builtin__"
GENERATOR_FN = "__kiln_generator__"
_VALUE_BUILTINS = ("int", "float", "str")  # need a value: of a graph value, when it runs (LAX)
# list methods that change the list (Converter.list_method; pop goes through call_method)
_LIST_WRITES = ("append", "extend", "insert", "remove", "clear", "reverse", "sort")
# Locals the rewritten loops set; names starting with "__kiln_" are the converter's own.
BREAK_FLAG, SKIP_FLAG = "__kiln_brk", "__kiln_skip"
RETURN_VALUE, RETURNED_FLAG = "__kiln_ret", "__kiln_returned"


def has_return(stmts):
    """Whether a return appears in the block or in the ifs it holds (not in nested loops)."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and (has_return(s.body) or has_return(s.orelse)):
            return True
    return False


def rewrite_returns(stmts):
    """return v -> __kiln_ret = v; __kiln_returned = True; break (through nested ifs)."""
    out = []
    for s in stmts:
        if isinstance(s, ast.Return):
            value = s.value if s.value is not None else ast.Constant(value=None)
            note = ast.Call(
                func=ast.Name(id=NOTE_RETURN_FN, ctx=ast.Load()), args=[value], keywords=[]
            )
            remember = ast.Assign(targets=[ast.Name(id=RETURN_VALUE, ctx=ast.Store())], value=note)
            out += [
                ast.fix_missing_locations(ast.copy_location(remember, s)),
                _flag(RETURNED_FLAG, True, s),
                ast.fix_missing_locations(ast.copy_location(ast.Break(), s)),
            ]
        elif isinstance(s, ast.If) and (has_return(s.body) or has_return(s.orelse)):
            node = ast.If(
                test=s.test, body=rewrite_returns(s.body), orelse=rewrite_returns(s.orelse)
            )
            out.append(ast.fix_missing_locations(ast.copy_location(node, s)))
        else:
            out.append(s)
    return out


def has_loop_exit(stmts):
    """Whether break/continue of *this* loop appear (nested loops' own are not counted)."""
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return True
        if isinstance(s, ast.If) and (has_loop_exit(s.body) or has_loop_exit(s.orelse)):
            return True
    return False


def loop_body_with_exits(stmts, like):
    """A loop body whose break/continue set flags instead (see _rewrite_exits)."""
    return [_flag(SKIP_FLAG, False, like)] + _rewrite_exits(stmts)


def _flag(name, value, like):
    node = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value=value))
    return ast.fix_missing_locations(ast.copy_location(node, like))


def _rewrite_exits(stmts):
    """break -> set the break and skip flags; continue -> set the skip flag; the statements after
    one that may exit run only while the skip flag is unset. With flags that are tensors (an exit
    under a tensor condition), those guards become graph ifs."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Break):
            out += [_flag(BREAK_FLAG, True, s), _flag(SKIP_FLAG, True, s)]
            return out
        if isinstance(s, ast.Continue):
            out.append(_flag(SKIP_FLAG, True, s))
            return out
        if isinstance(s, ast.If) and (has_loop_exit(s.body) or has_loop_exit(s.orelse)):
            node = ast.If(
                test=s.test,
                body=_rewrite_exits(s.body) or [ast.Pass()],
                orelse=_rewrite_exits(s.orelse),
            )
            out.append(ast.fix_missing_locations(ast.copy_location(node, s)))
            rest = stmts[i + 1 :]
            if rest:
                guard = ast.If(test=_not_name(SKIP_FLAG), body=_rewrite_exits(rest), orelse=[])
                out.append(ast.fix_missing_locations(ast.copy_location(guard, rest[0])))
            return out
        out.append(s)
    return out


def unless_broken(body, like):
    """`if not __kiln_brk: body`, for the iterations after one that may have broken at run time."""
    guard = ast.If(test=_not_name(BREAK_FLAG), body=body, orelse=[])
    return ast.fix_missing_locations(ast.copy_location(guard, like))


def _not_name(name):
    return ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=name, ctx=ast.Load()))


def as_load(target):
    """An assignment target (`x`, `a.b`, `y[i]`) as the expression that reads it."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(node, target)


def rewrite_conditionals(node):
    """A copy of the expression with its conditionals rewritten (see _ConditionalExpressions)."""
    return _ConditionalExpressions().visit(copy.deepcopy(node))


class _ConditionalExpressions(ast.NodeTransformer):
    """Rewrites `a if c else b`, `a and b`, `a or b` and `not a` into calls the converter
    resolves, so a tensor condition becomes graph control flow instead of a Python bool."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _call(SELECT_FN, [node.test, _thunk(node.body), _thunk(node.orelse)], node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            # a and b == b if a else a;  a or b == a if a else b (a evaluated once via a lambda arg)
            name = "__kiln_v"
            left = ast.Name(id=name, ctx=ast.Load())
            if isinstance(node.op, ast.And):
                body = _call(SELECT_FN, [left, _thunk(result), _thunk(left)], node)
            else:
                body = _call(SELECT_FN, [left, _thunk(left), _thunk(result)], node)
            lam = ast.Lambda(
                args=ast.arguments(
                    posonlyargs=[],
                    args=[ast.arg(arg=name)],
                    kwonlyargs=[],
                    kw_defaults=[],
                    defaults=[],
                ),
                body=body,
            )
            result = ast.Call(func=lam, args=[value], keywords=[])
            ast.copy_location(result, node)
        return result

    def visit_Call(self, node):
        """obj.has_key(k) -> __kiln_has_key__(obj, k): MindSpore's Graph mode gives dicts a
        has_key method, which a Python dict lacks (conditions.has_key)."""
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "has_key" and len(node.args) == 1
                and not node.keywords and not isinstance(node.args[0], ast.Starred)):
            return _call(HAS_KEY_FN, [func.value, node.args[0]], node)
        if isinstance(func, ast.Name) and func.id in _VALUE_BUILTINS:
            # int(x) -> __kiln_builtin__(int, x): the name still resolves as the code says
            call = ast.Call(func=ast.Name(id=BUILTIN_FN, ctx=ast.Load()),
                            args=[func] + node.args, keywords=node.keywords)
            return ast.copy_location(call, node)
        if (isinstance(func, ast.Attribute) and func.attr in _LIST_WRITES
                and not any(isinstance(a, ast.Starred) for a in node.args)):
            # (list_method checks insert's index first: builtin_checks.check_list_call)
            call = ast.Call(func=ast.Name(id=LIST_METHOD_FN, ctx=ast.Load()),
                            args=[func.value, ast.Constant(func.attr)] + node.args,
                            keywords=node.keywords)
            return ast.copy_location(call, node)
        if isinstance(func, ast.Attribute) and func.attr in _CHECKED_METHODS:
            # x.pop(i) -> __kiln_call_method__(x, "pop", i): list/tuple arguments are checked
            call = ast.Call(func=ast.Name(id=CALL_METHOD_FN, ctx=ast.Load()),
                            args=[func.value, ast.Constant(func.attr)] + node.args,
                            keywords=node.keywords)
            return ast.copy_location(call, node)
        if (isinstance(func, ast.Attribute) and func.attr == "format"
                and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
            # "...".format(x): text of a graph value is known when the graph runs (lax.py)
            call = ast.Call(func=ast.Name(id=STR_FORMAT_FN, ctx=ast.Load()),
                            args=[func.value] + node.args, keywords=node.keywords)
            return ast.copy_location(call, node)
        return node

    def visit_GeneratorExp(self, node):
        """(e for x in xs) -> iter([e for x in xs]) (LAX): the items are made while compiling,
        in order, and a generator returned from the graph comes back as a tuple."""
        self.generic_visit(node)
        items = ast.copy_location(ast.ListComp(elt=node.elt, generators=node.generators), node)
        return _call(GENERATOR_FN, [items], node)

    def visit_JoinedStr(self, node):
        """f"a{x!r:>4}" -> __kiln_fstring__("a", (x, 114, ">4")): Python's text for Python
        values; for graph values, the text of their run-time values (lax.fstring)."""
        self.generic_visit(node)
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                spec = value.format_spec if value.format_spec is not None else ast.Constant("")
                parts.append(ast.Tuple(elts=[value.value, ast.Constant(value.conversion), spec],
                                       ctx=ast.Load()))
            else:
                parts.append(value)
        return _call(FSTRING_FN, parts, node)

    def visit_Compare(self, node):
        """a < b < c -> (a < b) and (b < c), so chained comparisons of tensors become graph ops."""
        self.generic_visit(node)
        if len(node.ops) == 1:
            return self._membership(node)
        operands = [node.left] + node.comparators
        parts = [
            ast.copy_location(
                ast.Compare(left=operands[i], ops=[op], comparators=[operands[i + 1]]), node
            )
            for i, op in enumerate(node.ops)
        ]
        return self.visit_BoolOp(ast.copy_location(ast.BoolOp(op=ast.And(), values=parts), node))

    def _membership(self, node):
        """a in b -> __kiln_contains__(a, b) (`not in` negated), whose answer may be a tensor."""
        op = node.ops[0]
        if not isinstance(op, (ast.In, ast.NotIn)):
            return node
        found = _call(CONTAINS_FN, [node.left, node.comparators[0]], node)
        return _call(NOT_FN, [found], node) if isinstance(op, ast.NotIn) else found

    def visit_BinOp(self, node):
        """a << b, a >> b -> checked shifts (Python numbers: integers, non-negative counts)."""
        self.generic_visit(node)
        if isinstance(node.op, (ast.LShift, ast.RShift)):
            name = LSHIFT_FN if isinstance(node.op, ast.LShift) else RSHIFT_FN
            return _call(name, [node.left, node.right], node)
        return node

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _call(NOT_FN, [node.operand], node)
        return node


def _call(name, args, like):
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=args, keywords=[])
    return ast.copy_location(call, like)


def _thunk(expr):
    return ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=expr,
    )
