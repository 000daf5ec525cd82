"""The repository stands alone: its design documents are in docs/, and they stay reachable.

- No file of the repository (outside ``.git`` and ``.venv``) cites the design notes that used to
  live outside it (the "DESIGN" + "§N" references, or a path into the parent's shared folder).
- Every relative link in ``docs/**/*.md`` and ``README.md`` names an existing file and, when it has
  a ``#fragment``, a heading of that file (GitHub's anchor rule); so does every
  ``docs/<page>.md#<section>`` pointer in a comment or docstring under ``service/``, ``tests/``
  and ``bench/``.
- The import rule docs/architecture.md states holds: the math core imports nothing of the web,
  the database, the workers or the data layer (checked statically, every import statement).
"""

from __future__ import annotations

import ast
import os
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".venv"}

# Built from pieces so that this file does not match itself.
OUTSIDE_REFERENCE = re.compile(
    rb"DESIGN" + rb"\s*" + "§".encode() + rb"|\.\./" + rb"shared\b", re.IGNORECASE
)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
POINTER = re.compile(r"\bdocs/((?:reference/)?[A-Za-z0-9_-]+\.md)#([A-Za-z0-9_-]+)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def repository_files() -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(ROOT):
        if Path(folder) == ROOT:
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]  # never walked into
        for name in names:
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                files.append(path)
    return files


def outside_text(markdown: str) -> str:
    """The markdown without its fenced code blocks (links there are not links)."""
    kept, fenced = [], False
    for line in markdown.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return "\n".join(kept)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces → hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in outside_text(path.read_text(encoding="utf-8")).splitlines():
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken(source: Path, target: str) -> str | None:
    """Why the link ``target`` written in ``source`` does not resolve, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
        return None
    path_part, _, fragment = target.partition("#")
    resolved = (source.parent / path_part).resolve() if path_part else source
    if not resolved.exists():
        return f"{target}: no such file"
    if fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
        return f"{target}: no heading with anchor #{fragment} in {resolved.name}"
    return None


def test_design_documents_exist() -> None:
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {
        "README.md",
        "privacy-model.md",
        "ledger.md",
        "data-path.md",
        "architecture.md",
        "adding-an-optimizer.md",
    } <= pages
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/README.md)" in readme, "README.md does not point at docs/"


def test_no_file_refers_to_the_design_notes_outside_the_repository() -> None:
    offenders = []
    for path in repository_files():
        data = path.read_bytes()
        for match in OUTSIDE_REFERENCE.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert not offenders, (
        "these cite the design notes outside the repository; point into docs/ instead "
        "(openapi.yaml and sdk/python are regenerated from the code: make sdk): "
        + ", ".join(offenders)
    )


def test_every_relative_link_of_the_documents_resolves() -> None:
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    problems = []
    for source in sources:
        for target in LINK.findall(outside_text(source.read_text(encoding="utf-8"))):
            reason = broken(source, target)
            if reason is not None:
                problems.append(f"{source.relative_to(ROOT)}: {reason}")
    assert not problems, problems


def test_every_docs_pointer_in_the_code_resolves() -> None:
    problems = []
    pointers = 0
    for folder in ("service", "tests", "bench"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in (".py", ".md") or not path.is_file():
                continue
            for page, fragment in POINTER.findall(path.read_text(encoding="utf-8")):
                pointers += 1
                reason = broken(ROOT / "docs" / "README.md", f"{page}#{fragment}")
                if reason is not None:
                    problems.append(f"{path.relative_to(ROOT)}: docs/{reason}")
    assert pointers > 0
    assert not problems, problems


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """The helpers above would fail on a broken link, a missing anchor and an outside citation."""
    page = tmp_path / "page.md"
    page.write_text("# A title: with `code`\n\n## Failures and refunds\n\n## Twice\n## Twice\n")
    assert anchors(page) == {"a-title-with-code", "failures-and-refunds", "twice", "twice-1"}
    assert broken(page, "page.md#failures-and-refunds") is None
    assert broken(page, "#twice-1") is None
    assert broken(page, "page.md#missing") is not None
    assert broken(page, "absent.md") is not None
    assert broken(page, "https://example.org/x") is None
    fenced = "```\n[x](absent.md)\n```\n[y](page.md)"
    assert LINK.findall(outside_text(fenced)) == ["page.md"]
    assert OUTSIDE_REFERENCE.search(("see DESIGN " + "§2").encode())
    assert OUTSIDE_REFERENCE.search(("see DESIGN\n   " + "§1").encode())
    assert OUTSIDE_REFERENCE.search(("../" + "shared/DESIGN.md").encode())
    assert not OUTSIDE_REFERENCE.search(b"docs/ledger.md#the-z-convention")
    pointers = "see " + "docs/" + "reference/cli.md#the-command-line and " + "docs/" + "ledger.md#x"
    assert POINTER.findall(pointers) == [
        ("reference/cli.md", "the-command-line"),
        ("ledger.md", "x"),
    ]


#: The math core (docs/architecture.md#the-import-rule-of-the-math-core) and what it never imports.
MATH_CORE = ("service/models", "service/privacy", "service/optimizers")
MATH_CORE_FILES = ("service/ledger/filter.py", "service/ledger/accounting.py")
FORBIDDEN = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "distributed",
    "dask",
    "service.api",
    "service.db",
    "service.workers",
    "service.data",
    "service.settings",
)


CORE_MODULES = ("service.models", "service.privacy", "service.optimizers")
CORE_EXACT = ("service", "service.ledger", "service.ledger.filter", "service.ledger.accounting")


def imported_modules(source: str, package: str) -> set[str]:
    """Every module an ``import`` statement of ``source`` names, at any depth (function bodies
    too); relative imports resolved against ``package``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def violates_the_rule(module: str) -> bool:
    if any(module == f or module.startswith(f + ".") for f in FORBIDDEN):
        return True
    if module == "service" or module.startswith("service."):
        inside = module in CORE_EXACT or any(
            module == m or module.startswith(m + ".") for m in CORE_MODULES
        )
        # ``from service.ledger.filter import X`` also yields "service.ledger.filter.X"
        inside = inside or module.rsplit(".", 1)[0] in CORE_EXACT[2:]
        return not inside
    return False


def test_math_core_imports_nothing_of_the_service() -> None:
    """Every module of the core, statically: it imports no web, database, worker or data module,
    and of ``service`` only other modules of the core — so the rule holds for the whole import
    closure of the core."""
    files = [p for folder in MATH_CORE for p in sorted((ROOT / folder).rglob("*.py"))]
    files += [ROOT / name for name in MATH_CORE_FILES]
    violations = []
    for path in files:
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for module in imported_modules(path.read_text(encoding="utf-8"), package):
            if violates_the_rule(module):
                violations.append(f"{path.relative_to(ROOT)} imports {module}")
    assert len(files) > 20
    assert not violations, violations


def test_the_import_check_sees_what_it_must() -> None:
    source = (
        "from __future__ import annotations\n"
        "import numpy as np\n"
        "from service.privacy.gdp import gdp_mu\n"
        "from service.ledger.filter import Budget\n"
        "def later():\n"
        "    from service.db.models import Job\n"
        "    from ..ledger import admission\n"
    )
    modules = imported_modules(source, "service.optimizers")
    assert {"numpy", "service.db.models", "service.ledger.admission"} <= modules
    assert sorted(m for m in modules if violates_the_rule(m)) == [
        "service.db.models",
        "service.db.models.Job",
        "service.ledger.admission",
    ]


def test_no_optimizer_module_imports_another() -> None:
    """Optimizers share code through kits (gradient_kit, accelerated_kit, svrg_common,
    sgd_common, full_gradient, selection_kit) and reach each other through the registry, never
    by importing another optimizer's module (docs/adding-an-optimizer.md)."""
    from service.optimizers.kits.registry import optimizer_names

    folder = ROOT / "service" / "optimizers"
    names = set(optimizer_names())
    modules = {f"service.optimizers.{n}" for n in names if (folder / f"{n}.py").exists()}
    assert len(modules) >= 12, modules
    violations = []
    for module in sorted(modules):
        path = folder / f"{module.rsplit('.', 1)[1]}.py"
        for imported in imported_modules(path.read_text(encoding="utf-8"), "service.optimizers"):
            owner = next((m for m in modules if f"{imported}.".startswith(f"{m}.")), None)
            if owner is not None and owner != module:
                violations.append(f"{path.name} imports {imported}")
    assert not violations, violations
