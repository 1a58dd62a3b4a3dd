"""The package's import graph: no cycles, and a function imports only the libraries that are
measured to be slow to import (each such import says what it saves)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "nsysreport"
# Third-party (and two stdlib) modules a function may import on first use: their start-up
# cost is measured in a comment where they are imported.
LAZY = {
    "adbc_driver_manager",
    "adbc_driver_sqlite",
    "concurrent",
    "distributed",
    "duckdb",
    "duckdb_extension_sqlite_scanner",
    "jinja2",
    "matplotlib",
    "multiprocessing",
    "numpy",
    "polars",
    "pyarrow",
    "rich",
    "weasyprint",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
# The synthetic trace writers (nsysreport.synth) are no part of the runtime (STYLE.md): the
# rule for functions is not theirs to follow here.
GENERATORS = {name for name in MODULES if name.split(".")[:2] == ["nsysreport", "synth"]}


def is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import that runs (not under `if TYPE_CHECKING:`), and whether it is inside a
    function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if is_type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append((child, in_function))
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            walk(child, inner)

    walk(tree, False)
    return found


def targets(node: ast.Import | ast.ImportFrom, importer: str) -> list[str]:
    """The modules `node` imports: a name imported from a package is its submodule when it
    is one, else the package itself."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = importer.split(".")[: -node.level]
        base = ".".join([*package, *([base] if base else [])])
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = {
            target
            for node, _ in runtime_imports(tree)
            for target in targets(node, name)
            if target in MODULES and target != name
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph[node]):
            if cycle := visit(nxt):
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        if cycle := visit(start):
            return cycle
    return None


def test_the_module_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert graph["nsysreport.load"] and graph["nsysreport.cli"]  # the graph sees imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_a_function_imports_only_libraries_measured_to_be_slow() -> None:
    hidden = []
    for name, path in MODULES.items():
        if name in GENERATORS:
            continue
        source = path.read_text(encoding="utf-8")
        for node, in_function in runtime_imports(ast.parse(source)):
            if not in_function:
                continue
            for target in targets(node, name):
                if target.split(".")[0] not in LAZY:
                    hidden.append(f"{path.relative_to(REPO)}:{node.lineno} imports {target}")
    assert hidden == [], "move these imports to the module top:\n" + "\n".join(hidden)


def test_every_module_imports_in_a_fresh_interpreter_in_sorted_order() -> None:
    # The order a cycle would break in: a module first imported while its importer is half done.
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)"
    runtime = sorted(set(MODULES) - GENERATORS - {"nsysreport.__main__"})
    run = subprocess.run(
        [sys.executable, "-c", code, *runtime], capture_output=True, text=True, cwd=REPO
    )
    assert run.returncode == 0, run.stderr
