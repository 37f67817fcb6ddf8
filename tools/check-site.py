#!/usr/bin/env python3
"""Check the documentation site in a browser: headless Chromium, driven by
Selenium (Debian: chromium, chromium-driver, python3-selenium).

The site (built by tools/site.sh) is served by a local HTTP server on
127.0.0.1 and these pages are opened: the home page, the reference index,
the articles index, every article (articles/*.html) and three reference
pages (wisp, bs_batch, plot.wisp). Each page is loaded, MathJax is waited
for, a screenshot of the top of the page is saved (and a second one at the
first displayed equation, where there is one), and the page fails on:

  image    an <img> that did not load (naturalWidth 0: a missing or
           broken file);
  http     any request of the page to the local server answered with an
           HTTP error (a missing script, style sheet, font or image file);
  remote   a resource fetched from anywhere but the local server (the site
           must work offline: no CDN, no web fonts);
  link     an href to a local page or file that does not exist, or to an
           anchor (#id) that is not in the target page (on the page itself
           the live document is asked, so ids made by scripts count; other
           pages are read from their files); links to other sites are not
           followed;
  font     a web font that failed to load (document.fonts);
  math     math that MathJax did not typeset (span.math without MathJax
           output in the page), or a MathJax error in it;
  console  a SEVERE entry in the browser's console log (a JavaScript error,
           a failed request).

Every failure is printed with its page; the exit status is 1 if there is
any. The screenshots go to --screenshots DIR (default: a new temporary
directory), which is printed.

Usage:
  tools/check-site.py SITE_DIR [--screenshots DIR]
  tools/check-site.py --self-test

--self-test builds a tiny site in a temporary directory, with a page that
passes and one page for each failure (a missing image, a broken image file,
a missing page, a missing anchor, a JavaScript error, a missing script, a
remote script, a missing font, math left untypeset), and
checks that the good page passes and each bad one fails for its reason.
"""

import argparse
import functools
import html.parser
import http.server
import os
import posixpath
import struct
import sys
import tempfile
import threading
import urllib.parse
import zlib

# Debian's python3-selenium is installed for Debian's python3; another
# python3 first on the PATH (pyenv, a virtual environment) may not see it.
try:
    import selenium  # noqa: F401
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath(
        "/usr/bin/python3"
    ):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("check-site.py: selenium is missing (Debian: apt-get install python3-selenium)")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

REFERENCE_PAGES = ["reference/wisp.html", "reference/bs_batch.html", "reference/plot.wisp.html"]
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
PAGE_TIMEOUT_S = 60

# --- Serving ------------------------------------------------------------------


class Server:
    """A local HTTP server over a directory that records every request with
    its status, so that a page's failed requests can be listed."""

    def __init__(self, root):
        self.root = root
        self.requests = []
        self.lock = threading.Lock()
        log = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_request(self, code="-", size="-"):
                try:
                    status = int(code)
                except (TypeError, ValueError):
                    status = getattr(code, "value", 0)
                with log.lock:
                    log.requests.append((self.path, status))

            def log_message(self, *args):
                pass

        handler = functools.partial(Handler, directory=root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.origin = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def take_requests(self):
        with self.lock:
            out, self.requests = self.requests, []
        return out

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# --- Anchors of a page's file ---------------------------------------------------


class IdCollector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is not None and (name == "id" or (name == "name" and tag == "a")):
                self.ids.add(value)


@functools.lru_cache(maxsize=None)
def file_ids(path):
    parser = IdCollector()
    with open(path, encoding="utf-8", errors="replace") as f:
        parser.feed(f.read())
    return frozenset(parser.ids)


# --- The browser ------------------------------------------------------------------


def start_browser():
    options = webdriver.ChromeOptions()
    if os.path.exists(CHROMIUM):
        options.binary_location = CHROMIUM
    for arg in [
        "--headless=new",
        "--no-sandbox",  # as root, and in containers without user namespaces
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--user-data-dir=" + tempfile.mkdtemp(prefix="check-site-chromium-"),
    ]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(CHROMEDRIVER) if os.path.exists(CHROMEDRIVER) else Service()
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    driver.set_script_timeout(PAGE_TIMEOUT_S)
    return driver


# Waits for MathJax 2 to finish typesetting (where the page loads it).
WAIT_MATHJAX = """
var done = arguments[arguments.length - 1];
if (window.MathJax && MathJax.Hub && MathJax.Hub.Queue) {
  MathJax.Hub.Queue(function () { done(true); });
} else {
  done(false);
}
"""

# What the checks need from the live page.
PAGE_FACTS = """
var imgs = Array.prototype.map.call(document.images, function (img) {
  return {src: img.currentSrc || img.src, raw: img.getAttribute("src"),
          complete: img.complete, width: img.naturalWidth};
});
var links = Array.prototype.map.call(document.querySelectorAll("a[href], area[href]"),
  function (a) { return {raw: a.getAttribute("href"), url: a.href}; });
var resources = performance.getEntriesByType("resource").map(function (r) { return r.name; });
var ids = Array.prototype.map.call(document.querySelectorAll("[id]"), function (e) { return e.id; });
var names = Array.prototype.map.call(document.querySelectorAll("a[name]"),
  function (e) { return e.getAttribute("name"); });
var display = document.querySelector(".MJXc-display, .MathJax_Display, .math.display");
var fonts = [];
if (document.fonts) {
  document.fonts.forEach(function (f) { if (f.status === "error") fonts.push(f.family); });
}
return {imgs: imgs, links: links, resources: resources, ids: ids.concat(names),
        hasMath: !!display, fonts: fonts,
        math: document.querySelectorAll("span.math").length,
        typeset: document.querySelectorAll(".mjx-chtml, .MathJax, .MathJax_CHTML").length,
        mathErrors: document.querySelectorAll(".MathJax_Error, .mjx-merror, merror").length};
"""


def local_path(root, origin, url):
    """The file a same-origin URL names (index.html for a directory), or
    None for another origin."""
    parts = urllib.parse.urlsplit(url)
    if "%s://%s" % (parts.scheme, parts.netloc) != origin:
        return None
    path = posixpath.normpath(urllib.parse.unquote(parts.path))
    full = os.path.join(root, path.lstrip("/"))
    if parts.path.endswith("/") or os.path.isdir(full):
        full = os.path.join(full, "index.html")
    return full


def check_page(driver, server, root, page, shots):
    """Loads one page and returns its failures as (kind, detail) pairs."""
    problems = []
    server.take_requests()
    driver.get_log("browser")  # drop what earlier pages left
    url = server.origin + "/" + page
    driver.get(url)
    try:
        driver.execute_async_script(WAIT_MATHJAX)
    except Exception as e:  # a page whose scripts never settle
        problems.append(("console", "MathJax did not finish: %s" % e))
    facts = driver.execute_script(PAGE_FACTS)

    name = page.replace("/", "_").replace(".html", "")
    os.makedirs(shots, exist_ok=True)
    # Bootstrap scrolls smoothly; the screenshots need the scroll done.
    driver.execute_script("window.scrollTo({top: 0, behavior: 'instant'});")
    driver.save_screenshot(os.path.join(shots, name + ".png"))
    if facts["hasMath"]:
        driver.execute_script(
            "document.querySelector('.MJXc-display, .MathJax_Display, .math.display')"
            ".scrollIntoView({block: 'center', behavior: 'instant'});"
        )
        driver.save_screenshot(os.path.join(shots, name + "-math.png"))
        driver.execute_script("window.scrollTo({top: 0, behavior: 'instant'});")
    if facts["math"] and not facts["typeset"]:
        problems.append(("math", "%d math elements, none typeset by MathJax" % facts["math"]))
    if facts["mathErrors"]:
        problems.append(("math", "%d MathJax error(s) in the page's math" % facts["mathErrors"]))
    for family in facts["fonts"]:
        problems.append(("font", "web font failed to load: %s" % family))

    for img in facts["imgs"]:
        if not img["complete"] or img["width"] == 0:
            problems.append(("image", "image not shown (naturalWidth 0): %s" % (img["raw"] or img["src"])[:120]))
    for path, status in server.take_requests():
        if status >= 400 and path != "/favicon.ico":  # the browser asks for it unasked
            problems.append(("http", "HTTP %d for %s" % (status, path)))
    for resource in facts["resources"]:
        scheme = urllib.parse.urlsplit(resource).scheme
        if scheme in ("http", "https") and not resource.startswith(server.origin + "/"):
            problems.append(("remote", "fetched from outside the site: %s" % resource))

    here_ids = set(facts["ids"])
    seen = set()
    for link in facts["links"]:
        raw, target = link["raw"], link["url"]
        if raw is None or raw.strip() == "" or target in seen:
            continue
        seen.add(target)
        parts = urllib.parse.urlsplit(target)
        if parts.scheme in ("mailto", "javascript", "tel", "data"):
            continue
        if parts.scheme in ("http", "https") and not target.startswith(server.origin + "/"):
            continue  # another site: not followed (the check runs offline)
        if parts.scheme not in ("http", "https"):
            problems.append(("link", "link to %s (not a page of the site)" % raw))
            continue
        path = local_path(root, server.origin, target)
        if path is None or not os.path.isfile(path):
            problems.append(("link", "link to a missing page or file: %s" % raw))
            continue
        fragment = urllib.parse.unquote(parts.fragment)
        if not fragment:
            continue
        same_page = urllib.parse.urlsplit(url)._replace(fragment="").geturl() == parts._replace(
            fragment="", query=""
        ).geturl()
        if same_page:
            ok = fragment in here_ids
        elif path.endswith(".html"):
            ok = fragment in file_ids(path)
        else:
            ok = True
        if not ok:
            problems.append(("link", "link to a missing anchor: %s" % raw))

    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            message = entry.get("message", "")
            if "favicon.ico" in message:
                continue
            problems.append(("console", message[:300]))
    return problems


def check_site(root, pages, shots):
    """Checks the pages (paths relative to root); returns {page: failures}."""
    root = os.path.abspath(root)
    server = Server(root)
    driver = start_browser()
    results = {}
    try:
        for page in pages:
            results[page] = check_page(driver, server, root, page, shots)
    finally:
        driver.quit()
        server.close()
    return results


def site_pages(root):
    missing = [p for p in ["index.html", "reference/index.html", "articles/index.html"] + REFERENCE_PAGES
               if not os.path.isfile(os.path.join(root, p))]
    if missing:
        sys.exit("check-site.py: %s has no %s: is it a site built by tools/site.sh?" % (root, ", ".join(missing)))
    articles = sorted(
        "articles/" + f
        for f in os.listdir(os.path.join(root, "articles"))
        if f.endswith(".html") and f != "index.html"
    )
    return ["index.html", "reference/index.html", "articles/index.html"] + articles + REFERENCE_PAGES


# --- Self-test --------------------------------------------------------------------


def png(width, height):
    """A valid PNG of one colour."""

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x33\x66\x99" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def page(body, head=""):
    return "<!DOCTYPE html><html><head><meta charset='utf-8'><title>t</title>%s</head><body>%s</body></html>" % (
        head,
        body,
    )


def self_test():
    root = tempfile.mkdtemp(prefix="check-site-selftest-")
    files = {
        "ok.png": png(8, 8),
        "broken.png": b"this is not a PNG",
        "site.js": b"document.getElementById('made').id = 'made-by-script';",
        "good.html": page(
            "<h1 id='top'>Good</h1><img src='ok.png'><a href='#top'>top</a>"
            "<a href='other.html#there'>other</a><a href='sub/'>sub</a>"
            "<a href='#made-by-script'>made</a><span id='made'></span>"
            "<a href='https://example.org/'>elsewhere</a><a href='mailto:a@example.org'>mail</a>",
            "<script src='site.js' defer></script>",
        ),
        "other.html": page("<p id='there'>there</p>"),
        "sub/index.html": page("<p>sub</p>"),
        "missing-image.html": page("<img src='nothing-here.png'>"),
        "broken-image.html": page("<img src='broken.png'>"),
        "missing-page.html": page("<a href='nowhere.html'>nowhere</a>"),
        "missing-anchor.html": page("<a href='other.html#not-there'>anchor</a><a href='#nor-here'>here</a>"),
        "file-link.html": page("<a href='file:line'>file:line</a>"),
        "js-error.html": page("<script>undefinedFunction();</script>"),
        "missing-script.html": page("<p>x</p>", "<script src='vendor/none.js'></script>"),
        "remote.html": page("<p>x</p>", "<script src='https://cdn.example.invalid/lib.js'></script>"),
        "missing-font.html": page(
            "<p style='font-family: Gone'>x</p>",
            "<style>@font-face {font-family: Gone; src: url('fonts/gone.woff2') format('woff2');}</style>",
        ),
        "untypeset-math.html": page("<p><span class='math inline'>\\(x^2\\)</span></p>"),
    }
    for name, content in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    expected = {
        "good.html": set(),
        "missing-image.html": {"image", "http"},
        "broken-image.html": {"image"},
        "missing-page.html": {"link"},
        "missing-anchor.html": {"link"},
        "file-link.html": {"link"},
        "js-error.html": {"console"},
        "missing-script.html": {"http"},
        "remote.html": {"remote"},
        "missing-font.html": {"font", "http"},
        "untypeset-math.html": {"math"},
    }
    shots = tempfile.mkdtemp(prefix="check-site-selftest-shots-")
    results = check_site(root, list(expected), shots)
    failed = 0
    for name, kinds in expected.items():
        found = {kind for kind, _ in results[name]}
        # A page must fail for its reason; only the good page must pass.
        ok = (not found) if not kinds else kinds <= found
        if name == "missing-anchor.html":
            ok = ok and len(results[name]) == 2
        failed += not ok
        details = "; ".join("%s: %s" % p for p in results[name]) or "no failures"
        print("self-test %s: %s (expected %s; got %s)" % (
            "ok" if ok else "FAILED", name, ", ".join(sorted(kinds)) or "a pass", details))
    print("site check self-test: %d of %d passed" % (len(expected) - failed, len(expected)))
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", help="the site's directory (from tools/site.sh)")
    parser.add_argument("--screenshots", help="where to save the screenshots (default: a new temporary directory)")
    parser.add_argument("--self-test", action="store_true", help="check the checker itself")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.site:
        parser.error("give the site's directory")
    root = os.path.abspath(args.site)
    shots = os.path.abspath(args.screenshots) if args.screenshots else tempfile.mkdtemp(prefix="wispack-site-shots-")
    pages = site_pages(root)
    results = check_site(root, pages, shots)
    failures = 0
    for p in pages:
        problems = results[p]
        failures += len(problems)
        print("%s %s" % ("ok    " if not problems else "FAILED", p))
        for kind, detail in problems:
            print("         %s: %s" % (kind, detail))
    print("Screenshots: %s" % shots)
    print("site check: %d pages, %d failures" % (len(pages), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
