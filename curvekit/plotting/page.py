"""HTML pages that draw Vega-Lite specs: escaping for each context, and a strict CSP.

Names in a store come from users' logs (workloads, metrics, metaparameters), so every string
that reaches a page is escaped for where it lands:

* HTML text and double-quoted attributes: :func:`escape`;
* a path in an ``href``: :func:`href` (percent-encoded, so ``javascript:`` stays a file name);
* JSON in a ``<script type="application/json">`` island: :func:`json_script` (``<``, ``>``,
  ``&`` and every non-ASCII character, U+2028/U+2029 included, become ``\\uXXXX``);
* Vega-Lite titles, labels, drop-down options and tooltips: drawn by Vega through the DOM
  (SVG ``textContent``, ``<option>`` text) and never parsed as markup; tooltips, which Vega's
  tooltip handler writes as HTML, go through :data:`EMBED_JS`'s own sanitizer that escapes
  ``& < > " '``.

Every page carries a Content-Security-Policy (:func:`csp`): ``default-src 'none'``, scripts
only from the bundled files or by the sha256 hash of an inline script, no inline event
handlers, no ``eval``. Vega normally compiles its expressions with ``Function``; vega-embed's
``ast: true`` option makes it use the bundled expression interpreter instead, so the policy
needs no ``'unsafe-eval'``.

>>> escape("x'><img src=x onerror=alert(1)>")
'x&#x27;&gt;&lt;img src=x onerror=alert(1)&gt;'
>>> json_script("c", {"title": "</script>"})
'<script type="application/json" data-chart="c">{"title":"\\\\u003c/script\\\\u003e"}</script>'
>>> page_name("a--b/m/sgd"), page_name("a/b--m/sgd")
('a--b~m~sgd', 'a~b--m~sgd')
>>> href(page_name("javascript:alert(1)/m/sgd") + ".html")
'javascript%253Aalert%25281%2529~m~sgd.html'
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import urllib.parse
from typing import Any

from curvekit import structured

__all__ = ["EMBED_CSS", "EMBED_JS", "csp", "csp_meta", "escape", "href", "json_script",
           "page_name", "sha256_source", "standalone_page", "workload_of_page"]

EMBED_JS = """
(function () {
  // Vega's tooltip handler writes HTML; its default sanitizer leaves quotes alone.
  function clean(value) {
    return String(value).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  }
  var options = {actions: false, renderer: 'svg', ast: true, defaultStyle: false,
                 tooltip: {sanitize: clean, disableDefaultStyle: true}};
  var specs = document.querySelectorAll('script[type="application/json"][data-chart]');
  specs.forEach(function (node) {
    var target = document.getElementById(node.getAttribute('data-chart'));
    vegaEmbed(target, JSON.parse(node.textContent), options)
      .then(function () { target.setAttribute('data-rendered', 'true'); })
      .catch(function (error) {
        console.error(error);
        target.textContent = 'This chart could not be drawn: ' + error;
      });
  });
})();
"""
"""Draws every chart island of a page; ``ast: true`` keeps Vega away from ``eval``."""

EMBED_CSS = """
.vega-bindings{font-size:13px;margin-top:4px}
.vega-bind-name{margin-right:4px}
#vg-tooltip-element{visibility:hidden;position:fixed;z-index:1000;padding:6px 8px;
  background:rgba(255,255,255,.95);border:1px solid #d9d9d9;border-radius:3px;
  box-shadow:2px 2px 4px rgba(0,0,0,.1);font:12px system-ui,sans-serif;pointer-events:none;
  max-width:300px}
#vg-tooltip-element.visible{visibility:visible}
#vg-tooltip-element h2{margin:0 0 4px;font-size:13px}
#vg-tooltip-element td.key{color:#808080;max-width:150px;text-align:right;padding-right:4px}
#vg-tooltip-element td.value{text-align:left}
"""
"""The styles vega-embed and its tooltip would inject inline (a policy forbids that)."""

_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+-")
_MAX_NAME = 160  # bytes of a page name: well under the 255 most file systems allow
_HASHED = "!"  # never written by the plain encoding, so hashed names meet no plain one


def escape(text: object) -> str:
    """``text`` as HTML text or a double-quoted attribute value: ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def href(path: str) -> str:
    """A relative URL path for ``path``: every character but ``A-Z a-z 0-9 _ . - ~ /`` is
    percent-encoded, so a ``:`` never turns a file name into a scheme."""
    return urllib.parse.quote(path, safe="/")


def json_script(chart_id: str, spec: Any) -> str:
    """``spec`` as a JSON island that no string inside it can close or turn into markup."""
    text = (structured.dumps(spec, separators=(",", ":"), ensure_ascii=True)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    return (f'<script type="application/json" data-chart="{escape(chart_id)}">'
            f"{text}</script>")


def page_name(workload: str) -> str:
    """A file name (without ``.html``) for ``workload``; different workloads never share one.

    Letters, digits and ``_ . + -`` stay (a leading ``.`` does not, so no page is hidden),
    ``/`` becomes ``~`` and anything else ``%XX`` per UTF-8 byte: the encoding is undone by
    :func:`workload_of_page`. A name longer than 160 bytes keeps its first 120 and ends in
    ``!`` and 32 hex digits of its SHA-256.

    >>> page_name("cifar_10/resnet_8/nesterov_momentum")
    'cifar_10~resnet_8~nesterov_momentum'
    >>> workload_of_page(page_name("a~b/c d/é"))
    'a~b/c d/é'
    """
    parts = []
    for i, char in enumerate(workload):
        if char in _KEEP and not (i == 0 and char == "."):
            parts.append(char)
        elif char == "/":
            parts.append("~")
        else:
            parts.append("".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass")))
    name = "".join(parts)
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(workload.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        name = name[:120] + _HASHED + digest
    return name


def workload_of_page(name: str) -> str:
    """The workload whose :func:`page_name` is ``name`` (not for hashed long names)."""
    if _HASHED in name:
        raise ValueError(f"{name!r} is a shortened page name; it has no inverse")
    return urllib.parse.unquote(name.replace("~", "/"), errors="surrogatepass")


def sha256_source(text: str) -> str:
    """The CSP source that allows the inline script or style ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def csp(*, scripts: tuple[str, ...] = ("'self'",), styles: tuple[str, ...] = ("'self'",)
        ) -> str:
    """The Content-Security-Policy of a page whose scripts and styles are ``scripts`` and
    ``styles`` (CSP sources: ``'self'`` for the bundled files, hashes for inline ones).

    >>> for directive in csp().split("; "):
    ...     print(directive)
    default-src 'none'
    script-src 'self'
    style-src 'self'
    img-src data:
    base-uri 'none'
    form-action 'none'
    """
    return (f"default-src 'none'; script-src {' '.join(scripts)}; "
            f"style-src {' '.join(styles)}; img-src data:; base-uri 'none'; "
            "form-action 'none'")


def csp_meta(policy: str) -> str:
    """The ``<meta>`` element that puts ``policy`` in force for the rest of the page."""
    return f'<meta http-equiv="Content-Security-Policy" content="{escape(policy)}">'


_SCRIPT_END = re.compile(r"</script|<!--", re.IGNORECASE)


def standalone_page(spec: dict[str, Any], title: str, bundle: str) -> str:
    """One HTML file that draws ``spec`` offline: ``bundle`` (Vega, Vega-Lite, vega-embed)
    and the embedding script inline, both allowed by hash, and nothing else runs.

    >>> page = standalone_page({"mark": "point"}, "<b>t</b>", "window.vegaEmbed = 1;")
    >>> "<title>&lt;b&gt;t&lt;/b&gt;</title>" in page and "'unsafe-inline'" not in page
    True
    """
    if _SCRIPT_END.search(bundle):
        # Cannot happen with vl-convert's bundle today; a future one must not end the tag.
        raise ValueError("the JavaScript bundle contains '</script' or '<!--'")
    policy = csp(scripts=(sha256_source(bundle), sha256_source(EMBED_JS)),
                 styles=(sha256_source(_PAGE_CSS),))
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"{csp_meta(policy)}<title>{escape(title)}</title><link rel='icon' href='data:,'>"
        f"<style>{_PAGE_CSS}</style><script>{bundle}</script></head><body>"
        "<div class='chart' id='chart'></div>\n"
        f"{json_script('chart', spec)}\n<script>{EMBED_JS}</script></body></html>\n")


_PAGE_CSS = "body{font-family:system-ui,sans-serif;margin:1em}" + EMBED_CSS
