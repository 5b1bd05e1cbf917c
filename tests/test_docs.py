"""The documentation (README.md, docs/, the site mkdocs.yml builds): what a reader relies on.

- every ```python block of every page runs alone, in a fresh namespace and folder
  (tests/_codeblocks.py), and the task file the docs print runs through ``landscape gen``;
- every code line fits the page's code width; no page but the Benchmarks page and the
  changelog holds a date, a commit hash, "session" or an issue number;
- the Benchmarks page and the README's headline table are written from the result files
  (benchmarks/make_page.py); the command's page is the command's own ``--help``;
- the glossary defines the words the guide uses; no page points outside the repository;
  the guide pages open with a call;
- the API reference documents every public name (from the built site's ``objects.inv``);
  every figure has a script in docs/ that writes it; the README's links land;
- the built site refers to no other host, reads from its files in headless Chromium with
  the network off, and its search finds ``hessian_eigs`` there.

The site is built once per test run with ``mkdocs build --strict`` (a warning fails it) into
a temporary folder shared by the xdist workers, or taken from ``LANDSCAPE_DOCS_SITE`` when
.ci/run has just built it.
"""

from __future__ import annotations

import ast
import html.parser
import importlib
import importlib.metadata
import importlib.util
import json
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
from tests._codeblocks import WIDTH, Block, python_blocks, run_block, too_wide
from tests._shared import shared_folder

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: every page of the site's source, the API reference's too
PAGES = sorted(DOCS.rglob("*.md"))
#: the pages a measurement's history may be told on
HISTORY = {DOCS / "benchmarks.md", DOCS / "changelog.md"}
GUIDE = ("collecting.md", "generating.md", "large-models.md", "curvature.md", "pictures.md", "any-model.md")
FACADES = ("collector", "landscape", "viz")
#: the subpackages whose every public name the reference documents (docs/api/index.md says why these)
SUBPACKAGES = ("collector.integrations", "landscape.tasks", "landscape.examples", "landscape.threads",
               "landscape.topology", "landscape.curvature")
#: the words the glossary defines (each a heading of docs/glossary.md)
GLOSSARY_TERMS = ("centre", "checkpoint", "direction", "naive loop", "limit", "model size", "normalization",
                  "folded", "batched way", "plan", "points per call", "fast", "lean", "task", "view",
                  "interval", "fingerprint", "heap room")

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
_DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.M)
_REQUIRED = os.environ.get("LANDSCAPE_TEST_CHROMIUM") == "required"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(title: str) -> str:
    """Python-Markdown's toc slug of a heading (the anchors MkDocs and this test agree on)."""
    title = re.sub(r"`([^`]*)`", r"\1", title)
    value = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    value = re.sub(r"[^\w\s-]", "", value).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


def _prose(page: Path) -> list[tuple[int, str]]:
    """The lines of ``page`` outside its fenced code blocks, with their numbers."""
    out, fence = [], False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence:
            out.append((number, line))
    return out


def _anchors(page: Path) -> set[str]:
    """The sections of a Markdown page a link can name: its headings' slugs and its ``:::`` objects."""
    found = {_slug(m.group(1)) for _, line in _prose(page) if (m := re.match(r"^#{1,6} (.*)$", line))}
    return found | set(_DIRECTIVE.findall(page.read_text()))


# ---------------------------------------------------------------------------- the examples

def _runnable() -> list[Block]:
    return [b for page in PAGES for b in python_blocks(page) if b.why is None]


def test_the_guide_has_python_examples_and_says_why_one_is_not_run():
    names = {b.path.name for b in _runnable()}
    for page in ("getting-started.md", *GUIDE):
        assert page in names, f"{page} has no Python example that runs"
    for page in [README, *PAGES]:
        assert all(b.why is None or b.why.strip() for b in python_blocks(page)), page


def _promise_getting_started(namespace: dict, folder: Path) -> None:
    assert (folder / "landscape.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert namespace["ls"].z.shape == (21, 21)


def _promise_directions(namespace: dict, folder: Path) -> None:
    # the plane recomputed from the directions a landscapes.h5 kept is the stored one, bit for bit
    assert np.array_equal(namespace["again"].z, namespace["stored"]["landscape_[5]"].z)


def _promise_collecting(namespace: dict, folder: Path) -> None:
    assert (folder / "runs" / "mlp" / "landscapes.h5").is_file()
    assert len(namespace["landscapes"]) == 3


#: (page, a line of the block) -> what running that block must also leave behind
PROMISES = {
    ("getting-started.md", 'viz.plot(ls, kind="filled").figure.savefig("landscape.png")'): _promise_getting_started,
    ("generating.md", "again = compute_landscape("): _promise_directions,
    ("collecting.md", "landscapes = run.gen_landscapes_with_multi_process(callback_fn)\nprint"): _promise_collecting,
}


def _promise(block: Block):
    return next((check for (page, line), check in PROMISES.items()
                 if block.path.name == page and line in block.code), None)


def test_every_promise_names_a_block_that_exists():
    blocks = _runnable()
    for page, line in PROMISES:
        assert any(b.path.name == page and line in b.code for b in blocks), (page, line)


@pytest.mark.slow
@pytest.mark.parametrize("block", _runnable(), ids=lambda b: b.name)
def test_every_python_example_runs_alone(block, tmp_path):
    matplotlib.use("Agg")
    namespace = run_block(block, tmp_path)
    check = _promise(block)
    if check is not None:
        check(namespace, tmp_path)


def _task_file() -> Block:
    (block,) = [b for b in python_blocks(DOCS / "generating.md") if b.file == "mytask.py"]
    return block


@pytest.mark.slow
def test_the_task_file_the_docs_print_runs_through_landscape_gen(tmp_path):
    """The first command-line run: the task file as printed, a collected run, ``landscape gen``."""
    import torch

    from collector import Model, SummaryCollector
    from landscape.examples import MLP, digits_loader

    (tmp_path / "mytask.py").write_text(_task_file().code)
    torch.manual_seed(0)
    network = MLP()  # the architecture the task file's network has, so that the checkpoints load into it
    model = Model(network, torch.nn.CrossEntropyLoss(), torch.optim.SGD(network.parameters(), lr=0.05))
    collect = {"collect_landscape": {"landscape_size": 3, "unit": "epoch", "num_samples": 64,
                                     "intervals": [[1, 2, 3]]}}
    model.train(3, digits_loader(256), callbacks=[SummaryCollector(str(tmp_path / "runs" / "mlp"),
                                                                   collect_specified_data=collect)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "landscape", "gen", "runs/mlp", "--task", "mytask:callback_fn",
                           "--size", "3", "--num-samples", "64"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    from landscape import read_h5

    got = read_h5(tmp_path / "runs" / "mlp" / "landscapes.h5")
    assert sorted(got) == ["landscape_[1, 3]", "landscape_[3]"]
    assert all(ls.z.shape == (3, 3) and np.isfinite(ls.z).all() for ls in got.values())


# ---------------------------------------------------------------------------- how the pages read

def test_every_code_line_fits_the_pages_code_width():
    wide = [line for page in [README, *PAGES] for line in too_wide(page)]
    assert not wide, f"code lines wider than {WIDTH} columns: {wide}"


def test_the_width_check_sees_a_wide_line(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text " * 40 + "\n\n```bash\n" + "x" * (WIDTH + 1) + "\n```\n\n```python\nok = 1\n```\n")
    assert too_wide(page) == [f"p.md:4 ({WIDTH + 1} columns)"]


_HISTORY_WORDS = {
    "a date": re.compile(r"\b20\d\d-\d\d(-\d\d)?\b"),
    # an example digest is written shortened, "81f36003…": not a commit
    "a commit hash": re.compile(r"(?<![\w./-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w…-])"),
    "'session'": re.compile(r"\bsessions?\b", re.I),
    "an issue number": re.compile(r"\bissues? #?\d+|(?<![\w&/])#\d+\b", re.I),
}


def _history(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for what, pattern in _HISTORY_WORDS.items() for m in pattern.finditer(text)]


def test_no_page_but_the_benchmarks_and_the_changelog_tells_history():
    found = []
    for page in [README, *PAGES]:
        if page in HISTORY:
            continue
        for number, line in enumerate(page.read_text().splitlines(), 1):
            found += [f"{page.relative_to(ROOT)}:{number}: {hit}" for hit in _history(line)]
    assert not found, "\n".join(found)


def test_the_history_check_sees_each_kind():
    text = "on 2026-11-29 after 9baf0b1 (second session, issue 35, see #12)"
    assert [hit.split(":")[0] for hit in _history(text)] == \
        ["a date", "a commit hash", "'session'", "an issue number", "an issue number"]
    assert not _history("SHA-256 81f36003…23ad7, 64-128-128-10, 1e-3, 0x1f, Adam, the seed 2026, [1, 5]")


def test_no_page_points_outside_the_repository():
    for page in [README, *PAGES]:
        text = page.read_text()
        assert "../shared" not in text and "shared/spec" not in text, page
        assert not re.search(r"\bon this (?:2-core |shared )?machine\b", text), page
        for link in _LINK.findall(text) + _IMAGE.findall(text):
            if re.match(r"^[a-z]+:", link) or link.startswith("#"):
                continue
            target = (page.parent / link.partition("#")[0]).resolve()
            assert ROOT in target.parents, f"{page.name} links outside the repository: {link}"


def test_the_guide_pages_open_with_a_complete_call():
    """A guide page: one paragraph on what it is, then the call; no table or figure before it."""
    for name in GUIDE:
        lines = (DOCS / name).read_text().splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith("```python"))
        assert first < 20, f"{name}: the first call is on line {first + 1}"
        before = lines[:first]
        assert not any(line.startswith(("|", "![")) for line in before), f"{name}: a table or figure before the call"
        runs = [b for b in python_blocks(DOCS / name) if b.line == first + 1]
        assert runs and runs[0].why is None, f"{name}: the first block is not run by the tests"


def test_the_glossary_defines_every_term():
    headings = {_slug(m.group(1)) for _, line in _prose(DOCS / "glossary.md")
                if (m := re.match(r"^## (.*)$", line))}
    missing = [term for term in GLOSSARY_TERMS if _slug(term) not in headings]
    assert not missing, f"docs/glossary.md defines no {missing}"


def test_the_command_page_is_the_commands_own_help():
    maker = _load(DOCS / "make_command_page.py", "make_command_page")
    assert (DOCS / "command.md").read_text() == maker.page(), "run python docs/make_command_page.py"


# ---------------------------------------------------------------------------- one source for the numbers

def test_the_benchmarks_page_and_the_readme_table_come_from_the_result_files():
    maker = _load(ROOT / "benchmarks" / "make_page.py", "make_page")
    results = maker.load()
    assert (DOCS / "benchmarks.md").read_text() == maker.page(results), "run python benchmarks/make_page.py"
    table = maker.headline(results)
    assert 3 <= table.count("\n") - 2 <= 4, "the README's headline table has three or four rows"
    readme = README.read_text()
    assert readme == maker.readme_with(readme, table), "run python benchmarks/make_page.py"
    assert table in (DOCS / "benchmarks.md").read_text()


def test_every_result_file_says_where_and_when_it_was_measured():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.json")):
        data = json.loads(path.read_text())
        env = data["environment"]
        assert {"cpu", "cores", "torch", "date"} <= set(env), path.name
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", env["date"]), path.name
        assert data["command"].startswith(("python benchmarks/", "LANDSCAPE_")), path.name
        for row in data["rows"]:
            assert ("ratio" in row and row["low"] <= row["ratio"] <= row["high"]) or {"value", "unit"} <= set(row)


# ---------------------------------------------------------------------------- the figures and links

def _strings(script: Path) -> set[str]:
    """The string literals of a script's code (its docstrings left out): the files it names when writing."""
    tree = ast.parse(script.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_every_figure_of_the_docs_is_made_by_a_script_in_docs():
    shown = {Path(target).name for page in [*PAGES, README]
             for target in _IMAGE.findall(page.read_text()) if "://" not in target}
    assert len(shown) >= 10
    makers = {script.name: _strings(script) for script in DOCS.glob("make_*.py")}
    for name in sorted(shown | {p.name for p in DOCS.glob("*.png")}):
        assert (DOCS / name).is_file(), f"the docs show {name}, which is not in docs/"
        writers = [s for s, strings in makers.items() if any(x == name or x.endswith("/" + name) for x in strings)]
        assert writers, f"no docs/make_*.py names {name} in its code: which script draws it?"
    # and no picture lies in docs/ that no page shows
    assert {p.name for p in DOCS.glob("*.png")} <= shown


def test_every_link_of_the_readme_lands_on_a_file_and_section_that_exist():
    links = _LINK.findall(README.read_text()) + _IMAGE.findall(README.read_text())
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        if re.match(r"^[a-z]+://", link):
            continue
        target, _, anchor = link.partition("#")
        path = README if not target else ROOT / target
        assert path.exists(), f"README links to {link}: no file {target}"
        if anchor:
            assert path.suffix == ".md", f"README links to a section of {target}, not a page"
            assert anchor in _anchors(path), f"README links to {link}: {target} has no section #{anchor}"


def test_the_guide_and_the_reference_link_both_ways():
    for name in GUIDE:
        assert re.search(r"\]\(api/\w+\.md", (DOCS / name).read_text()), f"{name} links to no API page"
    for package in FACADES:
        module = importlib.import_module(package)
        entries = [n for n in module.__all__ if "user guide" in (getattr(module, n).__doc__ or "").lower()]
        assert entries, f"no entry of {package} links back to the user guide"


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

def _build(folder: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The site, built once per test run with ``mkdocs build --strict`` (or .ci/run's fresh build)."""
    given = os.environ.get("LANDSCAPE_DOCS_SITE")
    if given:
        return Path(given)
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    return shared_folder(tmp_path_factory, "site", _build)


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


class _References(html.parser.HTMLParser):
    """Every URL an HTML page refers to: attributes that load or link, and ``url(...)`` in styles."""

    ATTRIBUTES = ("src", "href", "srcset", "action", "data", "poster", "content", "formaction", "style")

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and name in self.ATTRIBUTES:
                self.urls += [u.strip().split(" ")[0] for u in value.split(",")] if name == "srcset" else [value]
                self.urls += re.findall(r"url\(['\"]?([^'\")]+)", value)

    def handle_data(self, data: str) -> None:
        self.urls += re.findall(r"url\(['\"]?([^'\")]+)", data) + re.findall(r"@import ['\"]([^'\"]+)", data)


def _outside(url: str) -> bool:
    """Whether ``url`` names another host (``https://...``, ``//host/...``), not a file of the site."""
    return bool(re.match(r"^(?:[a-z][a-z0-9+.-]*:)?//", url.strip(), re.I))


def test_the_outside_check_sees_other_hosts():
    page = _References()
    page.feed('<script src="https://unpkg.com/x"></script><a href="//cdn.example/y">y</a><img src="a.png">'
              '<div style="background: url(http://e.org/b.png)"></div><a href="#top">top</a>')
    assert [u for u in page.urls if _outside(u)] == ["https://unpkg.com/x", "//cdn.example/y", "http://e.org/b.png"]


@pytest.mark.slow
def test_the_built_site_refers_to_no_other_host(site):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 15
    found = []
    for page in pages:
        refs = _References()
        refs.feed(page.read_text(errors="replace"))
        found += [f"{page.relative_to(site)}: {u}" for u in refs.urls if _outside(u)]
    for sheet in site.rglob("*.css"):
        found += [f"{sheet.relative_to(site)}: {u}" for u in re.findall(r"url\(['\"]?([^'\")]+)", sheet.read_text())
                  if _outside(u)]
    assert not found, "\n".join(found[:40])


_BROWSER = pytest.mark.skipif(chromium_path() is None and not _REQUIRED,
                              reason="needs chromium (apt-get install -y chromium; .ci/run installs it)")


@pytest.mark.slow
@_BROWSER
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
        assert "Parameters" in entry and "Examples" in entry
        for parameter in ("network", "loss_fn", "data", "directions", "size", "num_samples", "memory"):
            assert re.search(rf"\b{parameter}\b", entry), parameter
        # nothing from the network at all, and no error
        remote = [u for u in browser.requests() if not u.startswith(("file:", "data:", "blob:", "about:"))]
        assert not remote, remote
        assert not browser.errors(), browser.errors()


@pytest.mark.slow
@_BROWSER
def test_the_search_finds_hessian_eigs_from_the_files_with_the_network_off(site):
    with Chromium(1280, 900) as browser:
        browser.offline()
        browser.open((site / "index.html").resolve().as_uri())
        # the search as a reader uses it: the header's search button (on file:// the index loads
        # then), then the words typed into the box; the worker (through the vendored shim) answers
        browser.evaluate("document.querySelector('label.md-header__button[for=__search]').click(), true")
        browser.wait_until("!document.querySelector('.md-search-result__meta').innerText"
                           ".includes('Initializing')", timeout=60)
        browser.evaluate("document.querySelector('.md-search__input').focus(), true")
        browser.send("Input.insertText", {"text": "hessian_eigs"})
        hits = browser.wait_until("(() => { const a = [...document.querySelectorAll('.md-search-result__link')]; "
                                  "return a.length && a.map(e => e.getAttribute('href')); })()", timeout=60)
        assert any(href.endswith("api/landscape.html?h=hessian_eigs#landscape.hessian_eigs") for href in hits), hits
        remote = [u for u in browser.requests() if not u.startswith(("file:", "data:", "blob:", "about:"))]
        assert not remote, remote
        assert not browser.errors(), browser.errors()
