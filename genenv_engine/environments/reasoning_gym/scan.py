"""What a reasoning-gym scorer may do with the reply: a scan of its code for calls that run text as Python.

Provides `scan_scorer` (the findings of a dataset class's ``score_answer`` and of every function it reaches),
`scan_function` (the same from any function) and the names it looks for: `RUNS_TEXT` (builtins and functions that
evaluate a string: ``eval``, ``exec``, ``compile``, ``__import__``, sympy's ``parse_expr`` and ``sympify``, ...) and
`RUNS_TEXT_MODULES` (modules any of whose functions may evaluate a string or act on the machine: ``sympy``, whose
functions sympify their string arguments, ``subprocess``, ``pickle``, ...). The scan reads source with `ast` and
follows each call it can resolve (a module-level function, a class's ``__init__``, a method of the dataset class
or of a class named in the calling module) into modules outside the standard library, to a bounded depth; a call it
cannot resolve is flagged when its name alone is one of `RUNS_TEXT`. A finding is ``<what>@<module>:<line>``. It
runs in the eligibility check, so a new reasoning-gym release whose scorer starts to evaluate the reply is caught
without anyone reading it. Nothing here imports reasoning-gym.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import textwrap
from collections.abc import Callable
from types import ModuleType
from typing import Any

RUNS_TEXT = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "__import__",
        "parse_expr",
        "sympify",
        "parse_latex",
        "parse_mathematica",
        "literal_eval_unsafe",
        "execfile",
        "run_path",
        "run_module",
        "import_module",
        "system",
        "popen",
        "Popen",
        "loads",
        "load_module",
        "exec_module",
    }
)
"""Call names that run or load text as code (a bare builtin, or the attribute of an object the scan cannot
resolve; ``compile`` only as the builtin, so ``re.compile`` is not one)."""
ATTRIBUTE_EXEMPT = frozenset({"compile"})
"""Names in `RUNS_TEXT` that are flagged only as bare builtins, never as an unresolved attribute."""
RUNS_TEXT_MODULES = (
    "sympy",
    "subprocess",
    "pickle",
    "marshal",
    "shelve",
    "dill",
    "cloudpickle",
    "importlib",
    "runpy",
    "code",
    "codeop",
    "ctypes",
    "multiprocessing",
    "os",
    "shutil",
    "socket",
)
"""Modules whose functions, when a scorer calls them, count as a finding."""
MAX_DEPTH = 6
"""How many calls deep the scan follows a scorer's helpers."""


def _module_of(obj: Any) -> str:
    return str(getattr(obj, "__module__", None) or getattr(obj, "__name__", "") or "")


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    """``module`` is one of ``prefixes`` or inside one.

    >>> _in("sympy.parsing.sympy_parser", ("sympy",)), _in("sympyx", ("sympy",)), _in("os", ("os",))
    (True, False, True)
    """
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def _follows(obj: Any) -> bool:
    """A function whose source the scan reads: pure Python, outside the standard library and the flagged modules."""
    module = _module_of(obj)
    return (
        inspect.isfunction(obj) and not _stdlib(module) and not _in(module, RUNS_TEXT_MODULES) and module != "builtins"
    )


def _callee(node: ast.expr, scope: dict[str, Any], owner: type | None) -> tuple[Any, str]:
    """What a call's function resolves to (None when unknown) and the name it is called by."""
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id], node.id
        return getattr(builtins, node.id, None), node.id
    if isinstance(node, ast.Attribute):
        base: Any = None
        if isinstance(node.value, ast.Name):
            if node.value.id in ("self", "cls") and owner is not None:
                base = owner
            else:
                base = scope.get(node.value.id)
        elif isinstance(node.value, ast.Attribute):
            base, _ = _callee(node.value, scope, owner)
        if base is not None and (isinstance(base, (ModuleType, type))):
            return inspect.getattr_static(base, node.attr, None), node.attr
        return None, node.attr
    return None, ""


def _targets(obj: Any) -> list[Any]:
    """The functions a resolved callee runs: a function itself, a class's ``__init__`` and ``__call__``, a static
    or class method's function."""
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if inspect.isclass(obj):
        return [
            f
            for f in (vars(c).get(n) for c in obj.__mro__ for n in ("__init__", "__call__"))
            if f is not None and inspect.isfunction(f)
        ]
    return [obj] if inspect.isfunction(obj) else []


def scan_function(function: Callable[..., Any], owner: type | None = None, depth: int = MAX_DEPTH) -> list[str]:
    """The findings (``<what>@<module>:<line>``) of ``function`` and of the functions it calls that the scan can
    resolve, ``depth`` calls deep; ``owner`` is the class ``self`` stands for.

    >>> def parse(text): return sympify(text)  # a name the scan cannot resolve, flagged by itself
    >>> def score(answer): return 1.0 if parse(answer.strip()) == 3 else 0.0
    >>> [f.split("@")[0] for f in scan_function(score)]
    ['sympify']
    >>> import re
    >>> def plain(answer): return float(re.compile(r"\\d+").fullmatch(answer) is not None)
    >>> scan_function(plain)
    []
    """
    findings: list[str] = []
    seen: set[Any] = set()
    todo: list[tuple[Any, int]] = [(function, 0)]
    while todo:
        fn, level = todo.pop()
        if fn in seen:
            continue
        seen.add(fn)
        try:
            source = textwrap.dedent(inspect.getsource(fn))
            tree = ast.parse(source)
            first = inspect.getsourcelines(fn)[1]
        except (OSError, TypeError, SyntaxError):
            findings.append(f"unreadable {getattr(fn, '__qualname__', fn)}@{_module_of(fn)}")
            continue
        scope = {**vars(builtins), **getattr(fn, "__globals__", {})}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            target, name = _callee(node.func, scope, owner)
            where = f"@{_module_of(fn)}:{first + node.lineno - 1}"
            module = _module_of(target) if target is not None else ""
            if target is not None and _in(module, RUNS_TEXT_MODULES):
                findings.append(f"{module.split('.')[0]}.{name}{where}")
            elif target is not None and module == "builtins" and name in RUNS_TEXT:
                findings.append(f"{name}{where}")
            elif (
                target is None
                and name in RUNS_TEXT
                and (isinstance(node.func, ast.Name) or name not in ATTRIBUTE_EXEMPT)
            ):
                findings.append(f"{name}{where}")
            elif target is not None and level < depth:
                todo.extend((t, level + 1) for t in _targets(target) if _follows(t))
    return sorted(set(findings))


def scan_scorer(dataset_class: type) -> list[str]:
    """The findings of ``dataset_class.score_answer`` and the helpers it reaches (`scan_function`, ``self`` being
    the dataset class); empty when nothing it runs evaluates text."""
    return scan_function(dataset_class.score_answer, owner=dataset_class)
