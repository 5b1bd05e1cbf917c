"""The dependency rule, read from the source with ``ast`` (README, Development).

1. Layers: every import goes to the same layer or a lower one (``LAYERS``, bottom first).
2. No package imports another package's private modules: across ``collector``,
   ``landscape`` and ``viz`` only public names and public subpackages are imported; and
   inside a package, no subpackage imports a sibling subpackage's private modules (each
   subpackage's ``__init__`` exports what its siblings use).
3. A module never imports its own top-level package's facade (``from collector import X``
   inside ``collector``): it imports the subpackage that defines ``X``.
4. No import cycles between modules, imports inside functions included.
5. Imports of the project's own modules inside functions: at most ten in all, each with
   a comment saying why (start-up cost).
6. Each file format has one module that reads and writes it.

Names imported through a package (``from collector import SummaryRecord``) are resolved
to the module that defines them, the way Python resolves them at run time, so a lazy
facade (PEP 562) hides no dependency.
"""

from __future__ import annotations

import ast
import importlib
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collector", "landscape", "viz")

#: Layers, bottom first. A module's layer is its longest matching prefix.
LAYERS = [
    ["collector.common"],
    ["collector.summary", "collector.proto"],
    ["collector.trajectory"],
    ["collector.train"],
    ["collector.lineage"],
    ["collector.collect"],
    ["collector.integrations"],
    ["collector"],
    ["landscape.threads"],
    ["landscape.topology"],
    ["landscape.result", "landscape.examples"],
    ["landscape.geometry"],
    ["landscape.engine", "landscape.tasks"],
    ["landscape.curvature"],
    ["landscape.io"],
    ["landscape.execution"],
    ["landscape.generate"],
    ["landscape.connect"],
    ["landscape"],
    ["viz.io"],
    ["viz.plots", "viz.html"],
    ["viz.tensorboard"],
    ["viz"],
    ["landscape.cli", "landscape.__main__"],
]
#: The command's dispatch imports each subcommand's module only when it runs (twelve of them), the lazy
#: facades and SummaryRecord's graph tracer the rest.
MAX_FUNCTION_IMPORTS = 15

#: file format -> (what only code reading or writing it contains, its one owner). Markers are
#: ("import", module), ("call", "module.function") or ("string", a literal outside docstrings).
FORMATS = {
    "HDF5 (landscapes.h5, Li et al.'s layout)": (("import", "h5py"), "landscape/io/_h5.py"),
    # torch's serializer has two owners, one per format: checkpoints (read with weights_only=True)
    # and the workers' payload (our own file, in the parent's private temporary folder)
    "torch.load (checkpoints; the workers' payload)": (("call", "torch.load"),
                                                       "collector/trajectory/_checkpoints.py landscape/execution/_payload.py"),
    "torch.save (checkpoints; the workers' payload)": (("call", "torch.save"),
                                                       "collector/trajectory/_checkpoints.py landscape/execution/_payload.py"),
    "train_metadata.json": (("string", "train_metadata.json"), "collector/trajectory/_metadata.py"),
    "safetensors (checkpoints)": (("import", "safetensors"), "collector/trajectory/_safetensors.py"),
    "summary record framing (masked CRC32C)": (("import", "google_crc32c"), "collector/summary/_framing.py"),
    "the .proto definitions": (("string", "_protos"), "collector/summary/_proto.py"),
    "TensorBoard event files": (("import", "tensorboard"), "collector/summary/_tensorboard.py"),
}


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    written: str  # the module path as written ("collector.summary" for "from collector.summary import X")
    target: str  # the module the imported thing is defined in
    in_function: bool
    type_checking: bool
    path: Path
    line: int
    via_facade: bool  # a name (not a submodule) taken from a package's __init__


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(path)] = path
    return out


SOURCES = _sources()


def _is_package(name: str) -> bool:
    return name in SOURCES and SOURCES[name].name == "__init__.py"


def _defining_module(package: str, name: str) -> tuple[str, bool]:
    """Where ``from package import name`` takes ``name`` from: a submodule, or the module
    that defines the object (found by importing, as Python would), or the package itself."""
    if f"{package}.{name}" in SOURCES:
        return f"{package}.{name}", False
    try:
        obj = getattr(importlib.import_module(package), name)
    except ImportError:  # an optional dependency (tensorboard, lightning, ...) is not installed here
        return _declared_module(package, name), True
    if isinstance(obj, types.ModuleType):
        return obj.__name__, False
    owner = getattr(obj, "__module__", None)
    if isinstance(owner, str) and owner in SOURCES:
        return owner, True
    return package, True


def _declared_module(package: str, name: str) -> str:
    """Where a package's ``__init__`` says ``name`` comes from (its ``from M import name``, the
    ``TYPE_CHECKING`` block included), read from the source without importing anything."""
    tree = ast.parse(SOURCES[package].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if any((a.asname or a.name) == name for a in node.names):
                return node.module
    return package


def _parse(name: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    in_function: set[int] = set()
    type_checking: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            type_checking.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(a.name, a.name, False) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            pairs = []
            for alias in node.names:
                if base.split(".")[0] in PACKAGES and _is_package(base) and alias.name != "*":
                    target, via = _defining_module(base, alias.name)
                    pairs.append((base, target, via))
                else:
                    pairs.append((base, base, False))
        else:
            continue
        for written, target, via in pairs:
            if written.split(".")[0] not in PACKAGES:
                continue
            out.append(Import(name, written, target, id(node) in in_function, id(node) in type_checking,
                              path, node.lineno, via))
    return out


IMPORTS = [imp for name, path in SOURCES.items() for imp in _parse(name, path)]


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line}"


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__main__" for part in dotted.split(".")[1:])


def test_every_module_has_a_layer():
    for name in SOURCES:
        _layer(name)


def test_lower_layers_never_import_higher_ones():
    bad = [f"{_where(i)}: {i.importer} (layer {_layer(i.importer)}) imports {i.target} (layer {_layer(i.target)})"
           for i in IMPORTS if _layer(i.target) > _layer(i.importer)]
    assert not bad, "imports going up a layer:\n" + "\n".join(bad)


def test_no_private_module_of_another_package():
    bad = [f"{_where(i)}: {i.importer} imports {i.written}" for i in IMPORTS
           if i.written.split(".")[0] != i.importer.split(".")[0] and _private(i.written)]
    assert not bad, "private modules of another package:\n" + "\n".join(bad)


def _subpackage(module: str) -> str:
    """The subpackage a module belongs to (``landscape.engine`` for ``landscape.engine._planner``), or
    the module itself when it sits at a package's top (``landscape.examples``)."""
    parts = module.split(".")
    if len(parts) >= 2 and _is_package(".".join(parts[:2])):
        return ".".join(parts[:2])
    return module


#: Modules allowed to re-export a sibling's private module, with the reason.
ALIASES = {"collector.proto": "MindSpore's module path for the summary's message classes (all of them, by name)"}


def test_no_private_module_of_another_subpackage():
    """Inside a package too: a subpackage's siblings use what its ``__init__`` exports."""
    bad = [f"{_where(i)}: {i.importer} imports {i.written}" for i in IMPORTS
           if i.written.split(".")[0] == i.importer.split(".")[0] and _private(i.written)
           and _subpackage(i.written) != _subpackage(i.importer) and i.importer not in ALIASES]
    assert not bad, "private modules of another subpackage:\n" + "\n".join(bad)


def test_no_module_imports_its_own_package_facade():
    bad = [f"{_where(i)}: {i.importer} takes a name from {i.written}" for i in IMPORTS
           if i.via_facade and i.written == i.importer.split(".")[0] and "." in i.importer]
    assert not bad, "imports through the own package's facade:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph: dict[str, set[str]] = {name: set() for name in SOURCES}
    for i in IMPORTS:
        if not i.type_checking and i.target != i.importer:
            graph[i.importer].add(i.target)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_few_imports_inside_functions_each_with_its_reason():
    inside = [i for i in IMPORTS if i.in_function]
    lines = {}
    for i in inside:
        lines.setdefault((i.path, i.line), i)
    assert len(lines) <= MAX_FUNCTION_IMPORTS, (
        f"{len(lines)} imports of the project's modules inside functions (at most {MAX_FUNCTION_IMPORTS}):\n"
        + "\n".join(_where(i) for i in lines.values()))
    missing = []
    for (path, line), i in lines.items():
        text = path.read_text().splitlines()
        if "#" not in text[line - 1] and not text[line - 2].strip().startswith("#"):
            missing.append(_where(i))
    assert not missing, "imports inside functions without a comment saying why:\n" + "\n".join(missing)


def _markers(path: Path) -> set[tuple[str, str]]:
    """The imports, ``module.function`` calls and non-docstring string literals of a file."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(("import", a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(("import", node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name):
            out.add(("call", f"{node.func.value.id}.{node.func.attr}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.add(("string", node.value))
    return out


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_each_file_format_has_one_owner(fmt):
    marker, owner = FORMATS[fmt]
    found = sorted(str(p.relative_to(ROOT)) for p in SOURCES.values() if marker in _markers(p))
    owners = sorted(owner.split())
    assert found == owners, f"{fmt} is read or written in {found}; only {owners} may"


def test_the_rules_catch_what_they_should():
    """The checks above are not vacuous: they see the edges that exist."""
    edges = {(i.importer, i.target) for i in IMPORTS}
    assert ("viz.io._load", "collector.summary._reader") in edges  # through collector.summary's lazy facade
    assert ("landscape.generate._summary_landscape", "collector.trajectory._metadata") in edges
    assert _layer("landscape.cli._main") > _layer("viz.plots._plot") > _layer("landscape.result._landscape")
    assert _private("collector.summary._proto") and not _private("collector.summary")


#: Functions stay readable: at most this many lines of code below their docstring; the two
#: public entry points of generation read as a short sequence of steps.
MAX_FUNCTION_LINES = 100
ENTRY_POINTS = {"gen_landscapes_with_multi_process": 60, "compute_landscape": 60}


def _code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = fn.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)
    if has_doc and len(body) == 1:
        return 0
    start = body[1].lineno if has_doc else body[0].lineno
    assert fn.end_lineno is not None
    return fn.end_lineno - start + 1


def test_functions_are_short():
    long = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    limit = ENTRY_POINTS.get(node.name, MAX_FUNCTION_LINES)
                    if _code_lines(node) > limit:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: "
                                    f"{_code_lines(node)} lines (at most {limit})")
    assert not long, "\n".join(long)
