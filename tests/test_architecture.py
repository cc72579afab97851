"""The architecture's import rules, checked on the source text (ast), without Django.

The picture (README "Architecture", issue #15): every import points down a floor or stays on it,

    web        views, API, urls, admin, forms, template tags, management commands, Celery jobs,
               the AppConfig (apps.py: the app's wiring)
    services   every other module of an app (services and selectors)
    models     tasks/models.py, raters/models.py, analysis/models.py (one floor for all apps)
    science    analysis/science/** (pure Python: no Django, nothing of the apps)

and above the models floor the apps are ordered annotation_site → analysis → tasks → raters (an app
imports only apps below it). No import sits inside a function to dodge a circle, no module import
cycle exists, and the science reaches no Django module even through other modules.

Runs with ``-p no:django``. pyproject.toml's import-linter contracts (``lint-imports``) say the
parts of this that import-linter can express; this test is the full statement. Each failure lists
every offending import as ``file:line  importer -> imported``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("annotation_site", "analysis", "tasks", "raters")

# The one table: which floor a module is on, first matching rule wins. Patterns are fnmatch
# patterns on the path relative to the repository (posix); "*" crosses folders.
WEB, SERVICES, MODELS, SCIENCE = 1, 2, 3, 4
FLOOR_NAMES = {WEB: "web", SERVICES: "services", MODELS: "models", SCIENCE: "science"}
FLOOR_RULES: list[tuple[str, int]] = [
    ("analysis/science/*", SCIENCE),
    ("tasks/models.py", MODELS),
    ("tasks/constraints.py", MODELS),  # the composite foreign key the models declare
    ("raters/models.py", MODELS),
    ("analysis/models.py", MODELS),
    ("*/templatetags/*", WEB),
    ("*/management/commands/*", WEB),
    ("*/admin.py", WEB),
    ("*/jobs.py", WEB),
    # Not in the list, which would leave it on the services floor: an app's AppConfig wires
    # the app (ready() connects signals to jobs and handlers) and nothing imports it, so it stands
    # with the other entry points at the top.
    ("*/apps.py", WEB),
    ("*/*views*.py", WEB),
    ("*/*api*.py", WEB),
    ("*/*urls.py", WEB),
    ("*/*forms*.py", WEB),
    ("*", SERVICES),
]
# Above the models floor an app may import only the apps after it here.
APP_ORDER = ["annotation_site", "analysis", "tasks", "raters"]

# Imports inside a function are allowed only here: AppConfig.ready (signal wiring), migrations
# (frozen history; they reach models through apps.get_model), the standard library (it cannot
# close a circle and costs nothing), and these heavy third-party packages that a module must not
# pay for at import time (optional extras, or seconds of start-up for one rarely used function).
OPTIONAL_HEAVY = {"torch", "torchvision", "open_clip", "transformers", "matplotlib"}
# Django and what only runs under Django: the science must reach none of these.
DJANGO_WORLD = {"django", "rest_framework", "drf_spectacular", "celery", "kombu", "dj_database_url"}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a module of PACKAGES, or the top-level name of an external package
    path: str
    line: int
    in_function: str | None  # the enclosing function's qualified name, when inside one

    def __str__(self) -> str:
        where = f"  (inside {self.in_function})" if self.in_function else ""
        return f"{self.path}:{self.line}  {self.importer} -> {self.imported}{where}"


def _module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _module_files()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _internal(name: str) -> str | None:
    """The longest module of PACKAGES that ``name`` is or lies in."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


class _Collector(ast.NodeVisitor):
    def __init__(self, module: str, path: str):
        self.module, self.path = module, path
        self.stack: list[str] = []
        self.imports: list[Import] = []
        self.seen: set[tuple[str, int]] = set()

    def _scoped(self, node, name):
        self.stack.append(name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_ClassDef(self, node):
        self._scoped(node, node.name)

    def visit_FunctionDef(self, node):
        self._scoped(node, f"{node.name}()")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._scoped(node, "<lambda>()")

    def visit_If(self, node):
        # `if TYPE_CHECKING:` imports never run: they are annotations, not arrows of the graph.
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _function(self) -> str | None:
        return ".".join(self.stack) if any(s.endswith("()") for s in self.stack) else None

    def _add(self, target: str, line: int):
        internal = _internal(target)
        imported = internal if internal else target.split(".")[0]
        if imported != self.module and (imported, line) not in self.seen:
            self.seen.add((imported, line))
            self.imports.append(Import(self.module, imported, self.path, line, self._function()))

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        if node.level:  # relative: resolve against this module's package
            base = self.module.split(".")
            if not _is_package(self.module):
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in MODULES else source, node.lineno)


def _collect() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        collector = _Collector(module, path.relative_to(REPO).as_posix())
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        found.extend(collector.imports)
    return found


IMPORTS = _collect()


def floor(module: str) -> int:
    relative = MODULES[module].relative_to(REPO).as_posix()
    return next(level for pattern, level in FLOOR_RULES if fnmatch(relative, pattern))


def app(module: str) -> str:
    return module.split(".")[0]


def _is_migration(imp: Import) -> bool:
    return "/migrations/" in imp.path


def _report(title: str, offenders: list, advice: str) -> str:
    lines = "\n".join(f"  {o}" for o in offenders)
    return f"{len(offenders)} {title}:\n{lines}\n{advice}"


# ---------------------------------------------------------------- the checks (each lists offenders)

def floor_violations() -> list[str]:
    out = []
    for imp in IMPORTS:
        if imp.imported not in MODULES or _is_migration(imp):
            continue
        low, high = floor(imp.importer), floor(imp.imported)
        if high < low:
            out.append(f"{imp}   [{FLOOR_NAMES[low]} imports {FLOOR_NAMES[high]}]")
    return out


def app_order_violations() -> list[str]:
    out = []
    for imp in IMPORTS:
        if imp.imported not in MODULES or _is_migration(imp) or app(imp.importer) == app(imp.imported):
            continue
        if floor(imp.imported) >= MODELS:
            continue  # the models floor and the science are shared by all apps
        if APP_ORDER.index(app(imp.imported)) <= APP_ORDER.index(app(imp.importer)):
            out.append(f"{imp}   [{app(imp.importer)} imports {app(imp.imported)}'s "
                       f"{FLOOR_NAMES[floor(imp.imported)]}]")
    return out


def function_import_violations() -> list[str]:
    out = []
    for imp in IMPORTS:
        if not imp.in_function or _is_migration(imp):
            continue
        if imp.path.endswith("/apps.py") and imp.in_function.endswith(".ready()"):
            continue
        if imp.imported not in MODULES and (imp.imported in OPTIONAL_HEAVY or imp.imported in sys.stdlib_module_names):
            continue
        out.append(str(imp))
    return out


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), every import counted."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.imported in MODULES and not _is_migration(imp):
            graph[imp.importer].add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def strongconnect(start: str) -> None:  # iterative, so a deep graph cannot hit the recursion limit
        nonlocal counter
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
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
                        components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            strongconnect(module)
    return sorted(components)


def science_django_chains() -> list[str]:
    """Every science module that reaches a Django-world package, with the chain that does."""
    direct: dict[str, list[Import]] = {}
    for imp in IMPORTS:
        direct.setdefault(imp.importer, []).append(imp)
    out = []
    for start in sorted(m for m in MODULES if floor(m) == SCIENCE):
        seen, queue, parent = {start}, [start], {}
        while queue:
            current = queue.pop(0)
            for imp in direct.get(current, []):
                if imp.imported in DJANGO_WORLD or imp.imported.startswith("django"):
                    chain, step = [str(imp)], current
                    while step != start:
                        chain.append(str(parent[step]))
                        step = parent[step].importer
                    out.append(f"{start} reaches {imp.imported}: " + "  <-  ".join(chain))
                    queue = []
                    break
                if imp.imported in MODULES and imp.imported not in seen:
                    seen.add(imp.imported)
                    parent[imp.imported] = imp
                    queue.append(imp.imported)
    return out


# ---------------------------------------------------------------- the tests

def test_the_table_classifies_the_known_modules():
    # A guard on the table itself, so a typo in a pattern cannot silently move a whole floor.
    assert floor("analysis.science") == SCIENCE
    assert floor("tasks.models") == MODELS
    assert floor("tasks.views") == WEB and floor("annotation_site.urls") == WEB
    assert floor("raters.models") == MODELS and floor("analysis.models") == MODELS
    assert floor("tasks.assignment") == SERVICES and floor("tasks.apps") == WEB
    assert len(IMPORTS) > 200, "the collector found too few imports: is the repository layout the expected one?"


def test_every_import_points_down_a_floor_or_stays():
    offenders = floor_violations()
    assert not offenders, _report(
        "imports point up a floor (web -> services -> models -> science)", offenders,
        "Move the code down, or the caller up; the floor of each module is FLOOR_RULES in this file.")


def test_apps_import_only_apps_below_them_above_the_models_floor():
    offenders = app_order_violations()
    assert not offenders, _report(
        f"imports go against the app order {' -> '.join(APP_ORDER)} above the models floor", offenders,
        "An app may use another app's services or views only when that app is below it in APP_ORDER.")


def test_no_import_inside_a_function():
    offenders = function_import_violations()
    assert not offenders, _report(
        "imports inside functions", offenders,
        "Import at the top of the module. Allowed only in AppConfig.ready, migrations, for the standard "
        f"library and for the heavy packages {sorted(OPTIONAL_HEAVY)}.")


def test_no_module_import_cycle():
    cycles = import_cycles()
    assert not cycles, f"{len(cycles)} import cycles (strongly connected modules):\n" + "\n".join(
        f"  {' <-> '.join(c)}" for c in cycles)


def test_the_science_reaches_no_django():
    offenders = science_django_chains()
    assert not offenders, _report("science modules reach Django", offenders,
                                  "analysis.science must run without Django (its tests run with -p no:django).")
