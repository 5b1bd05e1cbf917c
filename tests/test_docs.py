"""The documentation site (mkdocs.yml, docs/): what a reader of it relies on.

- every ```python block of docs/*.md runs, page by page, in a fresh namespace and folder
  (the README's machinery, tests/_codeblocks.py);
- the API reference documents every name of ``collector.__all__``, ``landscape.__all__`` and
  ``viz.__all__``, and of the subpackages docs/api/index.md promises (read from the built
  site's index of objects, ``objects.inv``);
- every figure the pages or the README show has a script in docs/ that writes it;
- every link of the README lands on a file, and a section of a page, that exist;
- the built site, opened from its files in headless Chromium with the network off, shows the
  home page, a user-guide page with its figure, and ``compute_landscape``'s parameters.

The site is built once per session with ``mkdocs build --strict`` (a warning fails it) into a
temporary folder, or taken from ``LANDSCAPE_DOCS_SITE`` when .ci/run has just built it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import unicodedata
import zlib
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from tests._chromium import Chromium, chromium_path
from tests._codeblocks import python_blocks, run_blocks

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FACADES = ("collector", "landscape", "viz")
#: the subpackages whose every public name the reference documents (docs/api/index.md says why these)
SUBPACKAGES = ("collector.integrations", "landscape.tasks", "landscape.examples", "landscape.threads",
               "landscape.topology", "landscape.curvature")

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
_DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.M)
_REQUIRED = os.environ.get("LANDSCAPE_TEST_CHROMIUM") == "required"
_SEARCH_SHIM = "https://unpkg.com/iframe-worker/shim"


def _slug(title: str) -> str:
    """Python-Markdown's toc slug of a heading (the anchors MkDocs and this test agree on)."""
    title = re.sub(r"`([^`]*)`", r"\1", title)
    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def _anchors(page: Path) -> set[str]:
    """The sections of a Markdown page a link can name: its headings' slugs and its ``:::`` objects."""
    text, found, fence = page.read_text(), set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6} (.*)$", line)):
            found.add(_slug(m.group(1)))
    return found | set(_DIRECTIVE.findall(text))


# ---------------------------------------------------------------------------- the examples

def _pages_with_examples() -> list[str]:
    return [p.name for p in PAGES if any(b.why is None for b in python_blocks(p))]


def test_the_docs_have_python_examples_and_say_why_one_is_not_run():
    names = _pages_with_examples()
    for page in ("getting-started.md", "collecting.md", "generating.md", "curvature.md", "pictures.md",
                 "any-model.md"):
        assert page in names, f"{page} has no Python example that runs"
    for page in PAGES:
        assert all(b.why is None or b.why.strip() for b in python_blocks(page)), page


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with_examples())
def test_docs_python_examples_run(page, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs"}
    assert run_blocks(python_blocks(DOCS / page), namespace) >= 1
    if page == "getting-started.md":  # what the first example promises
        assert (tmp_path / "landscape.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert namespace["ls"].z.shape == (21, 21)
    if page == "generating.md":  # the plane recomputed from the directions a landscapes.h5 kept
        assert np.array_equal(namespace["again"].z, namespace["stored"]["landscape_[10]"].z)
    if page == "collecting.md":
        assert (tmp_path / "runs" / "mlp" / "landscapes.h5").is_file()
        assert (tmp_path / "runs" / "plain" / "ckpt_dir" / "train_metadata.json").is_file()
        assert len(namespace["landscapes"]) == 3


# ---------------------------------------------------------------------------- the figures

def _strings(script: Path) -> set[str]:
    """The string literals of a script's code (its docstrings left out): the files it names when writing."""
    tree = ast.parse(script.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_every_figure_of_the_docs_is_made_by_a_script_in_docs():
    shown = {Path(target).name for page in [*PAGES, *DOCS.glob("*/*.md"), ROOT / "README.md"]
             for target in _IMAGE.findall(page.read_text()) if "://" not in target}
    assert len(shown) >= 10
    makers = {script.name: _strings(script) for script in DOCS.glob("make_*.py")}
    for name in sorted(shown | {p.name for p in DOCS.glob("*.png")}):
        assert (DOCS / name).is_file(), f"the docs show {name}, which is not in docs/"
        writers = [s for s, strings in makers.items() if any(x == name or x.endswith("/" + name) for x in strings)]
        assert writers, f"no docs/make_*.py names {name} in its code: which script draws it?"
    # and no picture lies in docs/ that no page shows
    assert {p.name for p in DOCS.glob("*.png")} <= shown


# ---------------------------------------------------------------------------- the README's links

def test_every_link_of_the_readme_lands_on_a_file_and_section_that_exist():
    readme = ROOT / "README.md"
    links = _LINK.findall(readme.read_text()) + _IMAGE.findall(readme.read_text())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if re.match(r"^[a-z]+://", link):
            continue
        target, _, anchor = link.partition("#")
        path = readme if not target else ROOT / target
        assert path.exists(), f"README links to {link}: no file {target}"
        if anchor:
            assert path.suffix == ".md", f"README links to a section of {target}, not a page"
            assert anchor in _anchors(path), f"README links to {link}: {target} has no section #{anchor}"


# ---------------------------------------------------------------------------- the version

def test_landscape_version_prints_the_installed_distributions_version():
    done = subprocess.run([sys.executable, "-m", "landscape", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    installed = importlib.metadata.version("torch-landscape")
    with open(ROOT / "pyproject.toml", "rb") as f:  # the one place the version is written
        assert installed == tomllib.load(f)["project"]["version"]
    assert done.stdout == f"landscape (torch-landscape) {installed}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{installed}]" in changelog


# ---------------------------------------------------------------------------- the built site

@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site, built with ``mkdocs build --strict`` (or .ci/run's fresh build)."""
    given = os.environ.get("LANDSCAPE_DOCS_SITE")
    if given:
        return Path(given)
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def _inventory(site: Path) -> set[str]:
    """The objects the reference documents under their own name (objects.inv's priority-1 entries)."""
    data = (site / "objects.inv").read_bytes()
    body = zlib.decompress(data.split(b"\n", 4)[4]).decode()
    return {line.split(" ", 1)[0] for line in body.splitlines() if line.split(" ")[2:3] == ["1"]}


def test_the_api_pages_name_every_public_name_of_the_three_packages():
    directives = {name for page in (DOCS / "api").glob("*.md") for name in _DIRECTIVE.findall(page.read_text())}
    for package in FACADES:
        missing = [n for n in importlib.import_module(package).__all__ if f"{package}.{n}" not in directives]
        assert not missing, f"docs/api/{package}.md has no '::: {package}.NAME' for {missing}"


@pytest.mark.slow
def test_the_built_reference_documents_every_public_name(site):
    documented = _inventory(site)
    for package in FACADES:
        missing = [n for n in importlib.import_module(package).__all__ if f"{package}.{n}" not in documented]
        assert not missing, f"the built reference lacks {package}.{missing}"
    # a subpackage's name is documented under it, or under a top-level package exporting the same object
    exported = {}
    for package in FACADES:
        module = importlib.import_module(package)
        for name in module.__all__:
            if f"{package}.{name}" in documented:
                exported[id(getattr(module, name))] = f"{package}.{name}"
    for package in SUBPACKAGES:
        module = importlib.import_module(package)
        missing = [n for n in module.__all__
                   if f"{package}.{n}" not in documented and id(getattr(module, n)) not in exported]
        assert not missing, f"the built reference lacks {package}.{missing}"


@pytest.mark.slow
@pytest.mark.skipif(chromium_path() is None and not _REQUIRED,
                    reason="needs chromium (apt-get install -y chromium; .ci/run installs it)")
def test_the_built_site_reads_in_a_browser_from_its_files(site):
    with Chromium(1280, 900) as browser:
        browser.offline()

        def visit(page: str) -> None:
            browser.events.clear()  # a fresh load event for each page
            browser.open((site / page).resolve().as_uri())

        visit("index.html")
        assert "torch-landscape" in browser.evaluate("document.title")
        assert "Three packages in one distribution" in browser.evaluate("document.body.innerText")
        # the theme's stylesheet applied: the header is coloured, not an unstyled list
        assert browser.evaluate("getComputedStyle(document.querySelector('.md-header')).backgroundColor") \
            not in ("", "rgba(0, 0, 0, 0)")
        visit("curvature.html")
        images = browser.evaluate("[...document.querySelectorAll('article img')].map(i => [i.getAttribute('src'), "
                                  "i.complete && i.naturalWidth])")
        assert "view_hessian.png" in [src for src, _ in images], images
        assert all(width > 100 for _, width in images), f"a figure did not load: {images}"
        visit("api/landscape.html")
        entry = browser.evaluate("(() => { const h = document.getElementById('landscape.compute_landscape'); "
                                 "return h && h.closest('.doc-object').innerText; })()")
        assert entry, "api/landscape.html has no landscape.compute_landscape"
        assert "Parameters" in entry
        for parameter in ("network", "loss_fn", "data", "directions", "size", "num_samples", "memory"):
            assert re.search(rf"\b{parameter}\b", entry), parameter
        # nothing from the network but the search box's worker shim (mkdocs.yml: Material's offline plugin)
        remote = [u for u in browser.requests() if not u.startswith(("file:", "data:", "blob:"))]
        assert set(remote) <= {_SEARCH_SHIM}, remote
        assert not [e for e in browser.errors() if _SEARCH_SHIM not in e], browser.errors()
