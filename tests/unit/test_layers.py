"""The house rules of src/loadproof, checked on every import of every module (read with ast, nothing imported).

- Layers: each package may import only packages of a lower layer (and itself). The layers are the table
  in docs/architecture.md, "Layers", read from the page itself, so the page and the code cannot drift.
- No import cycle between modules, counting every import: at module level, inside functions and under
  `if TYPE_CHECKING:`.
- No module over 500 lines.
- An import inside a function only for an optional dependency (a package loadproof runs without, or one
  the pure side must not load), never for a loadproof module or the standard library, with its reason in a
  comment on the line or the line above.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.python_source import parse

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 500


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted (the longest existing loadproof module for a loadproof name)
    line: int
    in_function: bool
    type_only: bool


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _target_names(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = (module if is_package else module.rsplit(".", 1)[0]).split(".")
        base = ".".join(parts[: len(parts) - node.level + 1])
        target = f"{base}.{node.module}" if node.module else base
    else:
        target = node.module or ""
    # `from package import module` imports the module; `from module import name` the module itself
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _owning_module(name: str) -> str:
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def imports_of(module: str) -> Iterator[Import]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"

    def walk(node: ast.AST, in_function: bool, type_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in _target_names(module, child, is_package):
                    target = _owning_module(name) if name.startswith("loadproof") else name
                    yield Import(module, target, child.lineno, in_function, type_only)
                continue
            yield from walk(
                child,
                in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)),
                type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test)),
            )

    yield from walk(parse(path.read_text(encoding="utf-8"), str(path)), False, False)


ALL_IMPORTS = [imp for module in MODULES for imp in imports_of(module)]


def package_of(module: str) -> str:
    """`loadproof.metrics.load` -> `metrics`; top-level modules (`loadproof.errors`) are their own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "loadproof"


def documented_layers() -> dict[str, int]:
    """{package: layer} from the table in docs/architecture.md: rows `| N | pkg, pkg | what |`."""
    layers: dict[str, int] = {}
    for match in re.finditer(r"^\|\s*(\d+)\s*\|([^|]+)\|", ARCHITECTURE.read_text(encoding="utf-8"), re.MULTILINE):
        for name in match.group(2).split(","):
            layers[name.strip().strip("`").removesuffix("/").removesuffix(".py")] = int(match.group(1))
    return layers


def test_every_package_has_a_documented_layer() -> None:
    layers = documented_layers()
    packages = {package_of(m) for m in MODULES if m != "loadproof"}
    assert packages - set(layers) == set(), "packages missing from docs/architecture.md's layer table"
    assert set(layers) - packages == set(), "the layer table names packages that do not exist"


def test_imports_only_go_down_the_layers() -> None:
    layers = documented_layers()
    upward = []
    for imp in ALL_IMPORTS:
        if not imp.target.startswith("loadproof.") or imp.target == "loadproof":
            continue
        source, target = package_of(imp.module), package_of(imp.target)
        if source != target and layers.get(target, 99) >= layers.get(source, -1):
            upward.append(
                f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line} {source} (layer "
                f"{layers.get(source)}) imports {imp.target} ({target}, layer {layers.get(target)})"
            )
    assert upward == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in ALL_IMPORTS:
        if imp.target in MODULES and imp.target != imp.module:
            edges[imp.module].add(imp.target)
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_500_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in MODULES.values()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_imports_inside_functions_are_optional_dependencies_with_a_reason() -> None:
    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for imp in ALL_IMPORTS:
        if not imp.in_function:
            continue
        where = f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line}"
        top = imp.target.split(".")[0]
        if top == "loadproof" or top in stdlib:
            wrong.append(f"{where} imports {imp.target} inside a function")
            continue
        lines = MODULES[imp.module].read_text(encoding="utf-8").splitlines()
        if "#" not in lines[imp.line - 1] and not lines[imp.line - 2].strip().startswith("#"):
            wrong.append(f"{where} imports {imp.target} inside a function without a comment saying why")
    assert wrong == []


# The pure side (docs/architecture.md, "Layers"): what verifies a stranger's bundle, without a client, a
# tokenizer, pydantic or a web framework (tests/unit/verify/test_isolation.py verifies bundles with those
# unimportable). Besides the standard library it may import, at module level, only these, each for its reason;
# an optional dependency imported inside a function (pyarrow for `export`) is the rule above's.
PURE_SIDE = ("records", "units", "catalog", "routing", "rundir", "plans", "metrics", "store", "verify")
PURE_SIDE_PACKAGES = {
    "msgspec": "the run directory's types and their JSON",
    "zstandard": "a bundle stores its records compressed (requests.jsonl.zst), which verify must read",
}


def test_the_pure_side_imports_only_the_standard_library_msgspec_and_zstandard() -> None:
    stdlib = set(sys.stdlib_module_names)
    wrong = [
        f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line} imports {imp.target}"
        for imp in ALL_IMPORTS
        if package_of(imp.module) in PURE_SIDE and not imp.in_function and not imp.type_only
        if (top := imp.target.split(".")[0]) not in stdlib and top not in ("loadproof", "__future__")
        if top not in PURE_SIDE_PACKAGES
    ]
    assert wrong == []
