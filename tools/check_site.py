"""Every page of the built site (``make docs``) in Debian's Chromium at 1024x768, opened from disk.

    .venv/bin/python tools/check_site.py build/site                 # `make docs-check`
    .venv/bin/python tools/check_site.py build/site --shots DIR     # and a screenshot of a few pages into DIR

A page passes when it loads (every file it asks for is there, no script error), asks nothing of another
machine (every request that is not ``file:``, ``data:``, ``blob:`` or ``about:`` is refused and counted), is
no wider than 1024 pixels (the projector's width; a code block or table that scrolls inside itself is fine),
and every link of it into the site names a page that exists and, with ``#anchor``, an element of that page.
Prints one line per failing page and exits 1, or one line of totals and 0. Chromium is Debian's
(``/usr/bin/chromium``, through Playwright); no browser is downloaded.
"""

from __future__ import annotations

import argparse
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

from playwright.sync_api import sync_playwright

CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1024, 768
#: URL schemes that stay on this machine.
LOCAL = ("file", "data", "blob", "about")
#: Pages shot with --shots, when the site has them.
SHOTS = ("README.html", "docs/errors/k_shape.html", "notebooks/01_gqa_shapes.html", "docs/op.html")


class _Ids(HTMLParser):
    """The ids (and the names of ``<a name=...>``) of one HTML file."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" or (tag == "a" and key == "name"):
                self.ids.add(value or "")


_IDS: dict[Path, set[str]] = {}


def ids_of(path: Path) -> set[str]:
    if path not in _IDS:
        parser = _Ids()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        _IDS[path] = parser.ids
    return _IDS[path]


def broken_link(href: str, site: Path) -> str | None:
    """Why ``href`` (an absolute URL from a page) does not resolve inside ``site``; None when it does or is not
    a link into the site (another scheme, or a file outside it)."""
    url, anchor = urldefrag(href)
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    path = Path(unquote(parsed.path))
    if path.is_dir():
        path = path / "index.html"
    if site.resolve() not in path.resolve().parents:
        return f"{href}: outside the site"
    if not path.is_file():
        return f"{href}: no such page"
    if anchor and path.suffix == ".html" and unquote(anchor) not in ids_of(path):
        return f"{href}: no #{anchor} in {path.name}"
    return None


def refresh_target(path: Path) -> str | None:
    """Where a page that only leads elsewhere (``<meta http-equiv="refresh" content="0; url=...">``) leads."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = re.search(r'http-equiv="refresh" content="\d+; url=([^"]+)"', text)
    return found.group(1) if found else None


def check_page(view, path: Path, site: Path) -> list[str]:
    """The problems of one page, loaded in ``view`` (a Playwright page)."""
    target = refresh_target(path)
    if target is not None:  # the site's door: where it leads must be there
        why = broken_link((path.parent / target).resolve().as_uri(), site)
        return [why] if why else []
    problems: list[str] = []
    away: list[str] = []
    missing: list[str] = []
    errors: list[str] = []

    def route(r):
        if urlparse(r.request.url).scheme in LOCAL:
            r.continue_()
        else:
            away.append(r.request.url)
            r.abort()

    view.route("**/*", route)
    view.on("requestfailed", lambda req: missing.append(req.url) if req.url not in away else None)
    view.on("pageerror", lambda e: errors.append(str(e)))
    try:
        view.goto(path.as_uri(), wait_until="load")
    except Exception as e:  # a page that does not load is a finding, not a crash of the check
        return [f"does not load: {e}"]
    problems += [f"asks another machine for {u}" for u in away]
    problems += [f"a file it asks for is missing: {u}" for u in missing if u not in away]
    problems += [f"script error: {e}" for e in errors]
    width = view.evaluate("document.documentElement.scrollWidth")
    if width > WIDTH:
        wide = view.evaluate(
            """(w) => [...document.querySelectorAll('body *')]
                 .filter(e => e.getBoundingClientRect().right > w && getComputedStyle(e).position !== 'fixed')
                 .slice(0, 3).map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : ''))""",
            WIDTH,
        )
        problems.append(f"{width} px wide at {WIDTH}x{HEIGHT} (too wide: {', '.join(wide)})")
    hrefs = view.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    problems += [why for href in dict.fromkeys(hrefs) if (why := broken_link(href, site))]
    view.unroute("**/*")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built site (build/site)")
    parser.add_argument("--shots", type=Path, help="a folder for screenshots of a few pages")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"{args.site}: no index.html; build the site first: make docs", file=sys.stderr)
        return 2
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    pages = sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_"))
    failed = 0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for path in pages:
            view = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            problems = check_page(view, path, site)
            name = path.relative_to(site).as_posix()
            if problems:
                failed += 1
                print(f"{name}: " + "; ".join(problems))
            if args.shots and name in SHOTS:
                args.shots.mkdir(parents=True, exist_ok=True)
                view.screenshot(path=str(args.shots / name.replace("/", "_").replace(".html", ".png")))
            view.close()
        browser.close()
    if failed:
        print(f"{failed} of {len(pages)} pages fail", file=sys.stderr)
        return 1
    print(
        f"{len(pages)} pages: each loads from disk, asks nothing of another machine, fits {WIDTH}x{HEIGHT}, "
        "and every link inside the site resolves"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
