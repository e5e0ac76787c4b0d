"""Module and function sizes of the package: what ARCHITECTURE.md's limits (700 lines a module,
100 lines a function) are checked against (tests/test_sizes.py), printed for a reader.

Usage: python tools/sizes.py [--over]   (``--over``: only what is over a limit)
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfwb"
MODULE_LINES = 700
FUNCTION_LINES = 100


def modules() -> List[Tuple[str, int]]:
    """``(path relative to the root, lines)`` for every module of the package."""
    return [(str(p.relative_to(ROOT)), len(p.read_text(encoding="utf-8").splitlines()))
            for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts]


def functions() -> Iterator[Tuple[str, str, int]]:
    """``(path, qualified name, lines)`` for every function and method of the package."""
    for path, _ in modules():
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))

        def walk(node: ast.AST, prefix: str) -> Iterator[Tuple[str, str, int]]:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield path, prefix + child.name, child.end_lineno - child.lineno + 1
                    yield from walk(child, prefix + child.name + ".")
                elif isinstance(child, ast.ClassDef):
                    yield from walk(child, prefix + child.name + ".")
        yield from walk(tree, "")


def main(argv: List[str]) -> int:
    over = "--over" in argv
    for path, n in modules():
        if not over or n > MODULE_LINES:
            print(f"{n:6d}  {path}")
    for path, name, n in functions():
        if n > FUNCTION_LINES:
            print(f"{n:6d}  {path}:{name}  (function over {FUNCTION_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
