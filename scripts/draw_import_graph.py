"""Draw docs/import-graph.png: which package of include/eos_etl imports which, read from the code.

Every import of the package is read with Python's own parser (``ast``), those inside functions
included, and resolved to the module it names. The picture has one box per package (and per
top-level module), each listing its modules; an arrow A -> B means some module of A imports one of
B, and every box stands above everything it imports, so each arrow points down. A cycle between
modules, or between packages, would make that impossible: the script names every cycle and exits
1, so it doubles as the check that there is none.

Run with the project's environment (matplotlib is a pinned dependency):
    .venv/bin/python scripts/draw_import_graph.py          # writes docs/import-graph.png
    .venv/bin/python scripts/draw_import_graph.py --check  # only the cycle check
"""
from __future__ import annotations

import argparse
import ast
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include"
PACKAGE = INCLUDE / "eos_etl"
#: The product, and the lab beside it (fault injection, benchmarks), drawn together.
PACKAGES = (PACKAGE, INCLUDE / "eos_etl_lab")
#: Packages drawn one box per sub-package: the engine's wings, the lab's halves.
WINGED = ("eos_etl.engine", "eos_etl_lab")
# Outside the package, the entry points that import it, drawn as one box each.
ENTRY_FOLDERS = ("dags", "plugins", "jobs")
OUT = ROOT / "docs" / "import-graph.png"


def module_name(path: Path) -> str:
    parts = path.relative_to(INCLUDE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_modules() -> dict[str, Path]:
    modules = {module_name(p): p for package in PACKAGES for p in sorted(package.rglob("*.py"))}
    for folder in ENTRY_FOLDERS:
        for p in sorted((ROOT / folder).glob("*.py")):
            modules[f"{folder}/{p.stem}"] = p
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package ``name`` imports (a name imported from a package that is a module
    of it counts as that module)."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` names the module; `from pkg import name` the package itself.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def group_of(module: str) -> str:
    """The box a module is drawn in: its package under eos_etl (a wing of the engine, a half of the lab),
    or itself at the top level."""
    if "/" in module:
        return module.split("/")[0] + "/"
    for winged in WINGED:
        if module == winged or module.startswith(winged + "."):
            parts = module.split(".")
            depth = winged.count(".") + 1
            folder = INCLUDE.joinpath(*parts[: depth + 1])
            shown = winged.removeprefix("eos_etl.").replace(".", "/")
            return f"{shown}/{parts[depth]}/" if len(parts) > depth and folder.is_dir() else f"{shown}/"
    parts = module.split(".")
    if len(parts) == 1:
        return "eos_etl/__init__"
    if (PACKAGE / parts[1]).is_dir():
        return parts[1] + "/"
    return parts[1] + ".py"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Floor 0 imports nothing of the package; every node stands one above the highest it imports."""
    memo: dict[str, int] = {}

    def floor(v: str) -> int:
        if v not in memo:
            memo[v] = 1 + max((floor(w) for w in graph[v]), default=-1)
        return memo[v]

    return {v: floor(v) for v in graph}


def implied_edges(edges: dict[tuple[str, str], int]) -> set[tuple[str, str]]:
    """The arrows A -> B for which A also reaches B through another box."""
    succ: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)

    def reaches(start: str, goal: str, skip: tuple[str, str]) -> bool:
        seen, todo = set(), [w for w in succ[start] if (start, w) != skip]
        while todo:
            v = todo.pop()
            if v == goal:
                return True
            if v not in seen:
                seen.add(v)
                todo.extend(succ[v])
        return False

    return {(a, b) for a, b in edges if reaches(a, b, (a, b))}


def draw(groups: dict[str, list[str]], edges: dict[tuple[str, str], int], level: dict[str, int],
         lines: dict[str, int], out: Path) -> None:
    import matplotlib  # deferred: only drawing needs it, not --check

    matplotlib.use("Agg")  # no display: the picture only goes to a file
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    rows: dict[int, list[str]] = defaultdict(list)
    for g in sorted(groups, key=lambda g: (-lines[g], g)):
        rows[level[g]].append(g)
    top = max(rows)
    width, row_h = 100.0, 11.0
    fig, ax = plt.subplots(figsize=(17, 1.9 * (top + 1) + 1.2))
    ax.set_xlim(0, width)
    ax.set_ylim(-1, row_h * (top + 1) + 4)
    ax.axis("off")
    ax.text(0.5, row_h * (top + 1) + 3.2,
            "eos_etl and its lab: who imports whom (an arrow A -> B: a module of A imports one of B; "
            "every box stands above what it imports)", fontsize=12, fontweight="bold", va="top")
    centre: dict[str, tuple[float, float, float]] = {}
    for floor_no, names in rows.items():
        weights = [max(18.0, lines[g] ** 0.5) for g in names]
        gap = 1.2
        scale = (width - gap * (len(names) + 1)) / sum(weights)
        x = gap
        y = row_h * floor_no + 0.6
        for g, w in zip(names, weights, strict=True):
            box_w = w * scale
            ax.add_patch(FancyBboxPatch((x, y), box_w, row_h - 4.2, boxstyle="round,pad=0.2,rounding_size=0.8",
                                        facecolor="#e3edf7" if g.endswith("/") else "#f1f1f1",
                                        edgecolor="#4a5a6a", linewidth=1.0))
            title = g if g != "eos_etl/__init__" else "eos_etl/__init__.py"
            ax.text(x + 0.5, y + row_h - 4.6, title, fontsize=9, fontweight="bold", va="top")
            ax.text(x + box_w - 0.5, y + row_h - 4.6, f"{lines[g]:,}", fontsize=7, va="top", ha="right",
                    color="#555555")
            if g.endswith("/"):
                members = ", ".join(m.rsplit(".", 1)[-1].rsplit("/", 1)[-1] for m in groups[g])
                chars = max(12, int(box_w * 1.45))
                ax.text(x + 0.5, y + row_h - 6.3, textwrap.fill(members, chars, max_lines=5, placeholder=" ...",
                                                                  break_long_words=False),
                        fontsize=6.3, va="top", color="#333333", linespacing=1.25)
            centre[g] = (x + box_w / 2, y, y + row_h - 4.2)
            x += box_w + gap
    implied = implied_edges(edges)
    for (a, b), n in sorted(edges.items(), key=lambda e: e[0] not in implied):
        (xa, ya_low, _), (xb, _, yb_high) = centre[a], centre[b]
        faint = (a, b) in implied
        ax.annotate("", xy=(xb, yb_high + 0.15), xytext=(xa, ya_low - 0.15),
                    arrowprops={"arrowstyle": "-|>", "color": "#b8c2cc" if faint else "#34495e",
                                "lw": 0.6 if faint else 0.8 + min(n, 40) / 25, "alpha": 0.6 if faint else 0.9,
                                "shrinkA": 0, "shrinkB": 0, "connectionstyle": "arc3,rad=0.05"})
    ax.text(0.5, -0.6, "dark: a direct import; light: an import that a path through other boxes also makes. "
            "Grey boxes are single modules; the number is lines of code. Drawn by scripts/draw_import_graph.py.",
            fontsize=8, color="#555555")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight", facecolor="white")
    plt.close(fig)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report cycles only, draw nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    modules = read_modules()
    graph = {m: imports_of(m, p, modules) for m, p in modules.items()}
    groups: dict[str, list[str]] = defaultdict(list)
    lines: dict[str, int] = defaultdict(int)
    for m, p in modules.items():
        groups[group_of(m)].append(m)
        lines[group_of(m)] += len(p.read_text().splitlines())
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for m, targets in graph.items():
        for t in targets:
            a, b = group_of(m), group_of(t)
            # A package's __init__ handing names on is no arrow between packages.
            if a != b and not t.endswith(".__init__"):
                edges[(a, b)] += 1
    group_graph = {g: {b for (a, b) in edges if a == g} for g in groups}

    module_cycles, package_cycles = cycles(graph), cycles(group_graph)
    print(f"{len(modules)} modules in {len(groups)} boxes, {sum(len(t) for t in graph.values())} imports "
          f"between modules, {len(edges)} arrows between boxes")
    print(f"cycles between modules: {len(module_cycles)}; between packages: {len(package_cycles)}")
    for c in module_cycles + package_cycles:
        print("  cycle:", " <-> ".join(c))
    if module_cycles or package_cycles:
        return 1
    if not args.check:
        draw(groups, edges, floors(group_graph), lines, args.out)
        print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
