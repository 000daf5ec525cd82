"""The layer rule of docs/architecture.md, read from the imports.

Every module under ``service/`` is parsed with :mod:`ast`; each import statement (function
bodies and ``TYPE_CHECKING`` blocks included: a lazy import is still a dependency) that names a
``service`` module is an edge. Each module belongs to the layer of the longest prefix in
:data:`LAYERS`; the test fails when a module imports a module of a *higher* layer, and when the
modules' import graph has a cycle (whatever the layers).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Lowest first. A module may import modules of its own layer and of every layer below it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "=service",  # the package itself (its version); "=": this module only
            "service.settings",
            "service.ids",
            "service.safe_text",
            "service.errors",
            "service.cpu_quota",
            "service.logging_setup",
            "service.pagination",
            "service.data.limits",  # ReadLimits: a value the settings carry
        ),
    ),
    ("models", ("service.models",)),
    ("privacy", ("service.privacy",)),
    ("ledger arithmetic", ("service.ledger.accounting", "service.ledger.filter")),
    ("optimizer kits", ("service.optimizers.kits",)),
    ("optimizers", ("service.optimizers",)),
    ("db", ("service.db",)),
    ("data", ("service.data",)),
    ("schemas", ("service.schemas",)),
    ("ledger", ("service.ledger",)),
    ("domain", ("service.domain",)),
    ("workers", ("service.workers",)),
    ("api", ("service.api", "service.ui")),
    ("process", ("service.cli", "service.cli_http", "service.supervisor")),
)


def module_names(root: Path, package: str = "service") -> dict[str, Path]:
    """Dotted name → file, for every module under ``root/<package>``."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path], top: str = "service") -> set[str]:
    """The modules of package ``top`` that ``name`` imports (``from pkg import sub`` counts as
    ``pkg.sub`` when ``sub`` is a module; a name inside a module counts as that module)."""

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target == top or target.startswith(top + "."):
                module = owner(target)
                if module is not None and module != name:
                    found.add(module)
    return found


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            exact = prefix.startswith("=")
            prefix = prefix.removeprefix("=")
            inside = module == prefix or (not exact and module.startswith(prefix + "."))
            if inside and len(prefix) > best:
                best, rank = len(prefix), index
    return rank


def graph(root: Path, package: str = "service") -> dict[str, set[str]]:
    modules = module_names(root, package)
    return {name: imports_of(name, path, modules, package) for name, path in modules.items()}


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(edges.items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module):
                low, high = LAYERS[layer_of(module)][0], LAYERS[layer_of(target)][0]
                found.append(f"{module} ({low}) imports {target} ({high})")
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer() -> None:
    edges = graph(ROOT)
    assert len(edges) > 150
    assert [m for m in edges if layer_of(m) < 0] == []


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(graph(ROOT)) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(graph(ROOT)) == []


def test_no_import_cycle_in_the_client() -> None:
    """The hand-written client (sdk/python/dpfit): the model never imports the client (it is
    given a ``ModelClient``), the scikit-learn export never imports the model."""
    edges = graph(ROOT / "sdk" / "python", "dpfit")
    assert len(edges) >= 6
    assert "dpfit.client" not in edges["dpfit.model"]
    assert cycles(edges) == []


#: docs/architecture.md#sizes: a module a reader can hold, a route that only translates HTTP.
MAX_MODULE_LINES = 600
MAX_ROUTE_FUNCTION_LINES = 60


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / "service").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_route_layer_function_is_over_60_lines() -> None:
    """Every function of ``service/api/`` (nested functions counted in their parent)."""
    long = {}
    for path in sorted((ROOT / "service" / "api").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_ROUTE_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}


def test_the_check_sees_an_arrow_up_and_a_circle(tmp_path: Path) -> None:
    """The checks are not vacuous: a tree with a domain module importing the API, and two data
    modules importing each other (one lazily, inside a function), fails both."""
    files = {
        "service/__init__.py": "",
        "service/domain/__init__.py": "",
        "service/domain/orders.py": "from service.api.listing import Page\n",
        "service/api/__init__.py": "",
        "service/api/listing.py": "",
        "service/data/__init__.py": "",
        "service/data/alpha.py": "def f():\n    from service.data import beta\n",
        "service/data/beta.py": "from .alpha import f\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edges = graph(tmp_path)
    assert upward_imports(edges) == [
        "service.domain.orders (domain) imports service.api.listing (api)"
    ]
    assert cycles(edges) == [["service.data.alpha", "service.data.beta"]]
