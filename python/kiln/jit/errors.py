"""Errors that point at the user's code: the file/line banner, and re-raising at a line."""


def where(source, lineno):
    return f'File "{source.filename}", line {lineno}\n    {source.line_text(lineno)}\n'


def at_line(error, source, lineno):
    """The same kind of exception, with the user's file, line and source text appended."""
    message = f"{error}\n  at {where(source, lineno).rstrip()}"
    try:
        new = type(error)(message)
    except Exception:  # noqa: BLE001 - exception types with unusual constructors
        new = RuntimeError(message)
    return new


def explain_one_branch_name(error, frame):
    """A NameError for a name a tensor-dependent if assigned in only one branch, saying so."""
    name = getattr(error, "name", None) if type(error) is NameError else None
    if name not in frame.one_branch:
        return error
    return NameError(
        f"name {name!r} is assigned in only one branch of the tensor-"
        f"dependent if at line {frame.one_branch[name]}, so it may be "
        f"undefined here; "
        f"assign it before the if or in both branches"
    )
