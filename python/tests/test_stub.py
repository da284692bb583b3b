"""The package's types stay true. python/shardify/_core.pyi names exactly what the built
extension has (its classes with their methods and properties, its functions and constants),
with the parameters and defaults of the binding; the build puts it, and the py.typed marker,
next to the extension; and every function and method of the public API (the names of
shardify.__all__ and shardify.transforms.__all__) annotates its parameters and its result.
The Python files and the stub are read with ast: nothing here imports torch."""

import ast
import re
from pathlib import Path

from shardify import _core

PACKAGE = Path(__file__).resolve().parents[1] / "shardify"
STUB = PACKAGE / "_core.pyi"
# Defined only in a build with the converter (ITK), where _core.HAVE_CONVERT is True.
CONVERTER_ONLY = {"convert", "convert_flags", "convert_help", "merge"}
# The facades whose __all__ is the public API, and the module of the package each is.
FACADES = {"__init__.py": "shardify", "transforms.py": "shardify.transforms"}


class _Absent:
    """A parameter's default where it has none."""

    def __repr__(self):
        return "no default"


ABSENT = _Absent()


def stub_items():
    """{name: (kind, node)} of the stub: classes, functions and constants by name, members
    of a class as "Class.member" (kind "method" or "property")."""
    items = {}
    for node in ast.parse(STUB.read_text(), str(STUB)).body:
        if isinstance(node, ast.ClassDef):
            items[node.name] = ("class", node)
            for member in node.body:
                if isinstance(member, ast.FunctionDef):
                    properties = any(isinstance(d, ast.Name) and d.id == "property" for d in member.decorator_list)
                    items[f"{node.name}.{member.name}"] = ("property" if properties else "method", member)
        elif isinstance(node, ast.FunctionDef):
            items[node.name] = ("function", node)
        elif isinstance(node, ast.AnnAssign):
            items[node.target.id] = ("constant", node)
    return items


def live_items():
    """{name: (kind, object)} of the built module, named and kinded as stub_items() does:
    what is public (no leading underscore), __version__, and each class's own __init__."""
    items = {}
    for name in dir(_core):
        if name.startswith("_") and name != "__version__":
            continue
        value = getattr(_core, name)
        if isinstance(value, type):
            items[name] = ("class", value)
            for member, attr in vars(value).items():
                if not member.startswith("_") or member == "__init__":
                    items[f"{name}.{member}"] = ("property" if isinstance(attr, property) else "method", attr)
        else:
            items[name] = ("function" if callable(value) else "constant", value)
    return items


def split_top_level(text):
    """`text` cut at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def live_parameters(function):
    """[(name, default)] from the signature pybind11 writes as the docstring's first line,
    `name(a: T, b: T = default, **kwargs) -> R`: `self` left out, `*args` and `**kwargs`
    with their stars, a default as its value (ABSENT: there is none; ... where the text is
    no literal). None when the docstring holds no such line."""
    line = (function.__doc__ or "").partition("\n")[0]
    match = re.fullmatch(r"\w+\((.*)\) -> .*", line)
    if match is None:
        return None
    out = []
    for part in split_top_level(match.group(1)):
        name = re.match(r"\*{0,2}\w+", part).group(0)
        if name == "self":
            continue
        default = ABSENT
        if " = " in part:
            text = part.split(" = ", 1)[1]
            try:
                default = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                default = ...
        out.append((name, default))
    return out


def stub_parameters(node):
    """[(name, default)] of a stub's def, as live_parameters() gives them (an Ellipsis
    default stands for any)."""
    args = node.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, defaults))
    if args.vararg is not None:
        pairs.append((ast.arg(arg="*" + args.vararg.arg), None))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults))
    if args.kwarg is not None:
        pairs.append((ast.arg(arg="**" + args.kwarg.arg), None))
    return [(a.arg, ABSENT if d is None else ast.literal_eval(d)) for a, d in pairs if a.arg != "self"]


def signature_differences(name, function, node):
    """How the stub's parameters of `name` differ from the binding's (empty: they agree)."""
    live = live_parameters(function)
    if live is None:
        return [f"{name}: the binding's docstring gives no signature to compare with: {function.__doc__!r:.80}"]
    stub = stub_parameters(node)
    if [n for n, _ in live] != [n for n, _ in stub]:
        return [f"{name}: parameters {[n for n, _ in stub]} in the stub, {[n for n, _ in live]} in the module"]
    out = []
    for (parameter, have), (_, want) in zip(stub, live):
        if (have is ABSENT) != (want is ABSENT):
            out.append(f"{name}: parameter {parameter}: {have!r} in the stub, {want!r} in the module")
        elif have is not ... and want is not ... and (have != want or type(have) is not type(want)):
            out.append(f"{name}: parameter {parameter} defaults to {have!r} in the stub, {want!r} in the module")
    return out


def test_the_stub_names_what_the_module_has_and_nothing_else():
    stub, live = stub_items(), live_items()
    absent_here = CONVERTER_ONLY if not _core.HAVE_CONVERT else set()
    not_in_stub = sorted(f"{name} ({kind})" for name, (kind, _) in live.items() if name not in stub)
    not_in_module = sorted(f"{name} ({kind})" for name, (kind, _) in stub.items()
                           if name not in live and name not in absent_here)
    assert not not_in_stub, f"the module has, and {STUB} lacks: {not_in_stub}"
    assert not not_in_module, f"{STUB} names, and the module lacks: {not_in_module}"
    other_kind = sorted(f"{name}: a {stub[name][0]} in the stub, a {kind} in the module"
                        for name, (kind, _) in live.items() if stub[name][0] != kind)
    assert not other_kind, other_kind


def test_the_stub_has_the_parameters_defaults_and_constant_types_of_the_module():
    stub = stub_items()
    differences = []
    for name, (kind, value) in sorted(live_items().items()):
        if name not in stub or stub[name][0] != kind:
            continue  # the test above names it
        node = stub[name][1]
        if kind in ("function", "method"):
            differences += signature_differences(name, value, node)
        elif kind == "constant" and ast.unparse(node.annotation) != type(value).__name__:
            differences.append(f"{name}: {ast.unparse(node.annotation)} in the stub, a {type(value).__name__} in "
                               "the module")
    assert not differences, "\n".join(differences)


def test_the_build_puts_the_stub_and_the_marker_next_to_the_extension():
    built = Path(_core.__file__).resolve().parent
    assert (built / "py.typed").is_file(), f"{built} has no py.typed (python/CMakeLists.txt copies it)"
    assert (built / "_core.pyi").is_file(), f"{built} has no _core.pyi (python/CMakeLists.txt copies it)"
    assert (built / "_core.pyi").read_bytes() == STUB.read_bytes(), f"{built / '_core.pyi'} is not {STUB}: rebuild"


def public_definitions():
    """{qualified name: (file, node)} of each class and function a facade's __all__ exports
    from a Python file of the package, found through the facade's `from .module import`
    lines; names taken from _core (typed by the stub) are left out. Every exported name
    must be found."""
    found, unresolved = {}, []
    for facade, module in FACADES.items():
        tree = ast.parse((PACKAGE / facade).read_text())
        exported = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
        sources = {a.asname or a.name: n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1
                   and n.module for a in n.names}
        for name in exported:
            if sources.get(name) == "_core":
                continue
            path = PACKAGE / f"{sources.get(name)}.py"
            body = ast.parse(path.read_text()).body if name in sources and path.is_file() else []
            nodes = [n for n in body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name]
            assigned = any(isinstance(n, (ast.Assign, ast.AnnAssign)) and name in
                           [t.id for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                            if isinstance(t, ast.Name)] for n in body)
            if nodes:
                found[f"{module}.{name}"] = (path, nodes[0])
            elif not assigned:
                unresolved.append(f"{module}.{name}")
    assert not unresolved, f"exported, but not defined by the `from .module import` lines of the facades: {unresolved}"
    return found


def missing_annotations(qualified, node, method):
    """What `node` (a def) leaves unannotated: parameters by name, and its result."""
    args = node.args
    positional = args.posonlyargs + args.args
    if method and not any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list):
        positional = positional[1:]  # self, or cls
    parameters = positional + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]
    out = [f"{qualified}: parameter {a.arg}" for a in parameters if a.annotation is None]
    if node.returns is None:
        out.append(f"{qualified}: the result")
    return out


def test_every_function_and_method_of_the_public_api_is_annotated():
    definitions = public_definitions()
    assert "shardify.Loader" in definitions and "shardify.transforms.Compose" in definitions, sorted(definitions)
    missing = []
    for qualified, (path, node) in sorted(definitions.items()):
        where = f"{path.name}:{node.lineno} "
        if isinstance(node, ast.FunctionDef):
            missing += [where + m for m in missing_annotations(qualified, node, method=False)]
            continue
        for member in node.body:  # public methods and properties, and every dunder method
            if isinstance(member, ast.FunctionDef) and (not member.name.startswith("_")
                                                        or member.name.startswith("__")):
                missing += [f"{path.name}:{member.lineno} " + m
                            for m in missing_annotations(f"{qualified}.{member.name}", member, method=True)]
    assert not missing, "not annotated:\n" + "\n".join(missing)
