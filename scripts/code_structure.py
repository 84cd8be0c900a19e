"""Structure figures of the ``eos_etl`` package: lines per package, the longest functions,
imports inside function bodies, and import cycles between modules.

``python scripts/code_structure.py`` prints them; ``--json`` gives the same as JSON.
tests/test_code_structure.py keeps the rules (no cycles, no back-arrow from ``kafka/``
to ``stack/``, every deferred import says why) from slipping back.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "include" / "eos_etl"
#: A deferred import is on purpose when a comment on its line or the line above says why.
REASON_MARK = "#"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports at load time (module level, not in functions)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        for node in tree.body:
            stmts = [node]
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # typing-only imports do not run
            if isinstance(node, (ast.If, ast.Try)):
                stmts = list(ast.walk(node))
            for stmt in stmts:
                targets: list[str] = []
                if isinstance(stmt, ast.Import):
                    targets = [alias.name for alias in stmt.names]
                elif isinstance(stmt, ast.ImportFrom):
                    targets = _resolve(name, is_package, stmt)
                for target in targets:
                    if target in mods and target != name:
                        graph[name].add(target)
        graph.setdefault(name, set())
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), i.e. import cycles.

    A package's ``__init__`` importing its own sub-modules is not counted: that is how a
    package exposes its API, and Python loads it without a cycle problem."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def edges(node: str) -> set[str]:
        return {t for t in graph[node] if not t.startswith(node + ".")}

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges(node):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def functions(mods: dict[str, Path]) -> list[tuple[int, str]]:
    """(lines, "module:qualified name") of every function, longest first."""
    out = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())

        def walk(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qual = f"{prefix}{child.name}"
                    out.append((child.end_lineno - child.lineno + 1, f"{name}:{qual}"))
                    walk(child, qual + ".")
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.")

        walk(tree, "")
    return sorted(out, reverse=True)


def _says_why(lines: list[str], lineno: int) -> bool:
    """Whether a comment on the import's line, or just above its block of imports, gives a reason."""
    if REASON_MARK in lines[lineno - 1]:
        return True
    row = lineno - 2
    while row >= 0 and lines[row].strip().startswith(("import ", "from ")):
        row -= 1  # the comment may head a block of deferred imports
    return row >= 0 and lines[row].strip().startswith(REASON_MARK)


def deferred_imports(mods: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(module, line, says why) of every import inside a function body."""
    out = []
    for name, path in mods.items():
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out.append((name, node.lineno, _says_why(lines, node.lineno)))
    return sorted(set(out))


def package_lines(mods: dict[str, Path]) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for name, path in mods.items():
        parts = name.split(".")
        key = parts[1] if len(parts) > 2 or (len(parts) == 2 and path.name == "__init__.py") else "(top)"
        totals[key] += len(path.read_text().splitlines())
    return dict(sorted(totals.items()))


def figures(package: Path = PACKAGE) -> dict:
    mods = modules(package)
    graph = imports(mods)
    funcs = functions(mods)
    deferred = deferred_imports(mods)
    return {
        "modules": len(mods),
        "lines": sum(len(p.read_text().splitlines()) for p in mods.values()),
        "lines_per_package": package_lines(mods),
        "cycles": cycles(graph),
        "longest_functions": [{"lines": n, "function": f} for n, f in funcs[:15]],
        "functions_over_80_lines": sum(1 for n, _ in funcs if n > 80),
        "deferred_imports": len(deferred),
        "deferred_imports_without_reason": [f"{m}:{line}" for m, line, why in deferred if not why],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = figures()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{data['modules']} modules, {data['lines']} lines")
    for pkg, n in data["lines_per_package"].items():
        print(f"  {pkg:16} {n:6}")
    print(f"import cycles: {len(data['cycles'])}")
    for cycle in data["cycles"]:
        print("  " + " <-> ".join(cycle))
    print(f"functions over 80 lines: {data['functions_over_80_lines']}")
    for row in data["longest_functions"][:10]:
        print(f"  {row['lines']:4}  {row['function']}")
    print(f"imports inside functions: {data['deferred_imports']}, "
          f"without a comment saying why: {len(data['deferred_imports_without_reason'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
