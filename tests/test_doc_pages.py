"""The README, the pages under docs/ and the error pages, without building the site: the error pages are the
catalog's as it is now (tools/error_pages.py), every link between those pages resolves, and the README's first
screen holds the two commands and every notebook."""

import importlib.util
import re
from pathlib import Path

import mlx.core as mx
import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: A markdown link or image, its target (up to a space or the closing parenthesis).
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def error_pages():
    tool = _tool("error_pages")
    return tool, tool.pages()


def _machine_bound(name: str) -> bool:
    """backend_unavailable's call names the GPU backend this machine lacks: Metal here, CUDA on a Mac."""
    return name == "backend_unavailable.md" and mx.metal.is_available()


def test_the_committed_error_pages_are_the_catalogs(error_pages):
    tool, made = error_pages
    old = [n for n in tool.stale(tool.OUT, made) if not _machine_bound(n)]
    assert not old, f"stale error pages {old}: run python tools/error_pages.py"


def test_a_stale_or_extra_page_is_named(error_pages, tmp_path):
    tool, made = error_pages
    for name, text in made.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert tool.stale(tmp_path, made) == []
    (tmp_path / "k_shape.md").write_text(made["k_shape.md"].replace("num_kv_heads", "num_heads", 1))
    (tmp_path / "gone.md").write_text("# a code no longer in the catalog\n")
    assert tool.stale(tmp_path, made) == ["gone.md", "k_shape.md"]


def test_every_catalogued_error_has_a_page_that_the_index_links(error_pages):
    from ropepool.teaching.catalog import CATALOG, MLA_CATALOG

    _, made = error_pages
    assert set(made) == {f"{code}.md" for code in {**CATALOG, **MLA_CATALOG}} | {"index.md"}
    linked = set(LINK.findall(made["index.md"]))
    assert linked == set(made) - {"index.md"}


def test_an_error_page_shows_the_message_the_call_raises_and_what_explain_says(error_pages):
    """k_shape's page: the exact two lines the op raised for Llama-3-8B, and explain naming the classic bug."""
    from ropepool.cli.explain import explain
    from ropepool.models import preset

    _, made = error_pages
    text = made["k_shape.md"]
    raised = re.search(r"```\n(k shape must be [^\n]*got \(4, 8, 128\)\n(?:  [^\n]*\n)+)```", text).group(1)
    assert "expected (4, 32, 128) = [T, Hkv, D]" in raised
    said = explain(raised, preset("llama-3-8b"))
    assert said in text and "case      num_kv_heads (heads)" in said


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((DOCS / "errors").glob("*.md"))]


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` whose file (or folder) does not exist, and its anchors that no heading
    of the target makes (MyST's anchors: the heading in lower case, spaces as hyphens)."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not a page of the suite
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    return broken


def _anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_every_link_between_the_readme_the_docs_and_the_error_pages_resolves():
    broken = {p.relative_to(ROOT).as_posix(): b for p in _pages() if (b := broken_links(p))}
    assert not broken


def test_the_link_check_sees_a_missing_page_and_a_missing_anchor(tmp_path):
    (tmp_path / "there.md").write_text("# There\n\n## A heading\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md) [ok](there.md#a-heading) [no](gone.md) [no](there.md#nowhere) [web](https://x.y)")
    assert broken_links(page) == ["gone.md", "there.md#nowhere"]


def test_every_page_under_docs_is_reached_from_the_readme_or_the_site_index():
    linked = {
        (p.parent / t.partition("#")[0]).resolve()
        for p in (ROOT / "README.md", DOCS / "index.md")
        for t in LINK.findall(p.read_text(encoding="utf-8"))
    }
    toctree = re.findall(r"^(\w[\w/]*)$", (DOCS / "index.md").read_text(encoding="utf-8"), re.M)
    linked |= {(DOCS / f"{name}.md").resolve() for name in toctree}
    missing = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked and p.name != "index.md"]
    assert not missing


def test_the_readme_shows_the_two_commands_within_its_first_40_lines():
    first = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:40]
    assert any(line.startswith("make lab ") for line in first) and any(line.startswith("make test ") for line in first)


def test_the_readmes_map_names_every_notebook():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(\d\d\w*)`", readme))
    assert named == {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_the_site_checks_link_reader(tmp_path):
    """tools/check_site.py (`make docs-check`, in Chromium) judges a link from its URL and the built files:
    a page, a page's anchor, the site's door (a refresh to the README), and what is not the site's."""
    check = _tool("check_site")
    site = tmp_path / "site"
    (site / "docs").mkdir(parents=True)
    (site / "README.html").write_text('<h1 id="ropepool">ropepool</h1><a name="old">')
    (site / "index.html").write_text('<meta http-equiv="refresh" content="0; url=README.html">')
    page = (site / "README.html").as_uri()
    assert check.broken_link(page, site) is None
    assert check.broken_link(page + "#ropepool", site) is None and check.broken_link(page + "#old", site) is None
    assert "no #gone" in check.broken_link(page + "#gone", site)
    assert "no such page" in check.broken_link((site / "docs" / "x.html").as_uri(), site)
    assert "outside the site" in check.broken_link((tmp_path / "elsewhere.html").as_uri(), site)
    assert check.broken_link("https://example.org/page.html", site) is None  # a link out is not loaded
    assert check.refresh_target(site / "index.html") == "README.html"
    assert check.refresh_target(site / "README.html") is None
