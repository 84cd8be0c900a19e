"""Structure figures of the ``eos_etl`` package: lines per package, the longest functions,
imports inside function bodies, and import cycles (the import graph is read by
``draw_import_graph.py``, which also draws it).

``python scripts/code_structure.py`` prints them; ``--json`` gives the same as JSON.
tests/unit/test_code_structure.py keeps the rules (no cycles, layers importing downwards only)
from slipping back.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from draw_import_graph import cycles, imports_of, read_modules  # noqa: E402 - a sibling script

#: A deferred import is on purpose when a comment on its line or the line above says why.
REASON_MARK = "#"


def functions(mods: dict[str, Path]) -> list[tuple[int, str]]:
    """(lines, "module:qualified name") of every function, longest first."""
    out = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text())

        def walk(node: ast.AST, prefix: str, name: str = name) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qual = f"{prefix}{child.name}"
                    out.append((child.end_lineno - child.lineno + 1, f"{name}:{qual}"))
                    walk(child, qual + ".", name)
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.", name)

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
        totals[("lab: " if parts[0] == "eos_etl_lab" else "") + key] += len(path.read_text().splitlines())
    return dict(sorted(totals.items()))


def modules() -> dict[str, Path]:
    """The product's and the lab's modules (not the DAG, plugin and job files that import them)."""
    return {name: path for name, path in read_modules().items() if name.split(".")[0] in ("eos_etl", "eos_etl_lab")}


def product_and_lab_lines() -> dict[str, int]:
    """Lines of the product (``eos_etl``) and of the lab beside it (``eos_etl_lab``)."""
    totals = {"product": 0, "lab": 0}
    for name, path in modules().items():
        totals["lab" if name.split(".")[0] == "eos_etl_lab" else "product"] += len(path.read_text().splitlines())
    return totals


def checked_files() -> dict[str, Path]:
    """What the rules on functions and deferred imports cover: the package, the DAG, plugin and job files."""
    return read_modules()


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports (at the top or inside functions), DAGs, plugins and jobs included."""
    everything = read_modules()
    return {name: imports_of(name, path, everything) for name, path in everything.items()}


def figures() -> dict:
    mods = modules()
    graph = import_graph()
    funcs = functions(checked_files())
    deferred = deferred_imports(checked_files())
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
