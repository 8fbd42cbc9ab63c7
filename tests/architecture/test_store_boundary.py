"""SQL stays in the store: outside ``genenv_engine/storage/store/``, no module of the engine or the console runs a
statement itself, reaches a store's connection or imports sqlite-utils (``sqlite3`` may still be imported for its
exception types).

Read from the source (the syntax tree of every module). The rules, each checked on a snippet that breaks it:
- no call of an attribute named ``execute``, ``executemany`` or ``executescript`` (a connection's or a cursor's);
- no attribute ``db`` of a store: of a name or attribute whose name holds ``store`` (``store.db``,
  ``self.ui_store.db``), of a name the module binds to a `Store` (``s = Store(...)``, ``with Store(...) as s``,
  ``s: Store``) or of a ``Store(...)`` call itself;
- no ``import sqlite_utils`` / ``from sqlite_utils import ...``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import genenv_console
import genenv_engine

ENGINE = Path(genenv_engine.__file__).parent
CONSOLE = Path(genenv_console.__file__).parent
STORE = ENGINE / "storage" / "store"
STATEMENT_CALLS = {"execute", "executemany", "executescript"}


def _is_store_type(annotation: ast.expr | None) -> bool:
    """Whether an annotation names `Store` (``Store``, ``Store | None``, ``"Store"``, ``Optional[Store]``)."""
    if annotation is None:
        return False
    text = (
        annotation.value
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)
        else ast.unparse(annotation)
    )
    return any(part.strip() == "Store" for part in text.replace("[", "|").replace("]", "|").split("|"))


def _is_store_call(node: ast.expr | None) -> bool:
    """Whether ``node`` is a call of ``Store`` (or ``something.Store``)."""
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "Store")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "Store")
    )


def store_names(tree: ast.AST) -> set[str]:
    """The names a module binds to a `Store`: assigned a ``Store(...)`` call, bound by ``with Store(...) as name``,
    or annotated as a Store (a parameter or an annotated assignment)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_store_call(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and (_is_store_type(node.annotation) or _is_store_call(node.value))
        ):
            names.add(node.target.id)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            names |= {
                item.optional_vars.id
                for item in node.items
                if _is_store_call(item.context_expr) and isinstance(item.optional_vars, ast.Name)
            }
        elif isinstance(node, ast.arg) and _is_store_type(node.annotation):
            names.add(node.arg)
    return names


def _holds_store(node: ast.expr, bound: set[str]) -> bool:
    """Whether ``node`` is, by its name or its binding, a `Store`."""
    if isinstance(node, ast.Name):
        return "store" in node.id.lower() or node.id in bound
    if isinstance(node, ast.Attribute):
        return "store" in node.attr.lower()
    return _is_store_call(node)


def violations(source: str) -> list[str]:
    """Each breach of the rules in a module's source, as ``line: what``."""
    tree = ast.parse(source)
    bound = store_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STATEMENT_CALLS:
            found.append(f"{node.lineno}: runs SQL ({ast.unparse(node.func)})")
        elif isinstance(node, ast.Attribute) and node.attr == "db" and _holds_store(node.value, bound):
            found.append(f"{node.lineno}: reaches a store's connection ({ast.unparse(node)})")
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlite_utils" for a in node.names):
            found.append(f"{node.lineno}: imports sqlite_utils")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite_utils":
            found.append(f"{node.lineno}: imports sqlite_utils")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def outside_the_store() -> list[Path]:
    """Every module of the engine and the console outside ``genenv_engine/storage/store/``."""
    files = [p for root in (ENGINE, CONSOLE) for p in sorted(root.rglob("*.py"))]
    return [p for p in files if STORE not in p.parents]


def test_no_module_outside_the_store_runs_sql_or_reaches_its_connection():
    files = outside_the_store()
    assert len(files) > 50 and ENGINE / "interfaces" / "loggers.py" in files and STORE / "core.py" not in files
    found = {str(p.relative_to(ENGINE.parent)): v for p in files if (v := violations(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_store_itself_breaks_the_rules_so_the_check_sees_them():
    assert any("runs SQL" in v for v in violations((STORE / "core.py").read_text(encoding="utf-8")))
    assert any("imports sqlite_utils" in v for v in violations((STORE / "core.py").read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        (
            "store.db.execute('SELECT 1')",
            ["1: runs SQL (store.db.execute)", "1: reaches a store's connection (store.db)"],
        ),
        ("conn.executemany('INSERT', rows)", ["1: runs SQL (conn.executemany)"]),
        ("cursor.executescript(script)", ["1: runs SQL (cursor.executescript)"]),
        ("rows = self.ui_store.db.query('x')", ["1: reaches a store's connection (self.ui_store.db)"]),
        ("with Store(p) as s:\n    s.db", ["2: reaches a store's connection (s.db)"]),
        ("s = Store(p)\nt = s.db", ["2: reaches a store's connection (s.db)"]),
        ("def f(s: Store | None):\n    return s.db", ["2: reaches a store's connection (s.db)"]),
        ("x: Store = make()\nx.db", ["2: reaches a store's connection (x.db)"]),
        ("Store(p).db", ["1: reaches a store's connection (Store(p).db)"]),
        ("import sqlite_utils", ["1: imports sqlite_utils"]),
        ("from sqlite_utils.db import Database", ["1: imports sqlite_utils"]),
    ],
)
def test_a_snippet_that_breaks_a_rule_is_caught(snippet, expected):
    assert violations(snippet) == expected


@pytest.mark.parametrize(
    "snippet",
    [
        "self.db = db\nself.db.stays.values()",  # a benchmark's own sandbox named db
        "import sqlite3\ntry:\n    pass\nexcept sqlite3.DatabaseError:\n    pass",
        "screen.query(Select)",
        "store.query_tasks(text='add')",
        "execute(state, call)",  # a plain function named execute
        "s = Sandbox()\ns.db",
    ],
)
def test_a_snippet_within_the_rules_passes(snippet):
    assert violations(snippet) == []
