"""``/docs``: the API's operations as one plain HTML page, rendered here from the spec.

No third-party script, stylesheet or font is loaded (a documentation UI from a
CDN would run another origin's code on this server's origin, next to a signed-in
admin's session): the page is built from ``/openapi.json`` by the server, with a
policy that allows nothing but its own inline style. Any OpenAPI viewer can
open ``/openapi.json`` itself for more.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

__all__ = ["DOCS_POLICY", "docs_page"]

DOCS_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'"
)
_METHODS = ("get", "post", "put", "patch", "delete")
_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "code{font:13px ui-monospace,monospace}h2{margin-top:2rem;font-size:1.1rem}"
    "li{margin:.25rem 0}.m{display:inline-block;width:4rem;font-weight:600}"
)


def docs_page(app: FastAPI) -> HTMLResponse:
    """The page: each tag's operations (method, path, summary), from the app's spec."""
    spec: dict[str, Any] = app.openapi()
    groups: dict[str, list[str]] = {}
    for path, operations in spec.get("paths", {}).items():
        for method in _METHODS:
            operation = operations.get(method)
            if operation is None:
                continue
            tag = (operation.get("tags") or ["other"])[0]
            summary = html.escape(str(operation.get("summary") or ""))
            groups.setdefault(str(tag), []).append(
                f'<li><span class="m">{method.upper()}</span><code>{html.escape(path)}</code> '
                f"{summary}</li>"
            )
    sections = "".join(
        f"<h2>{html.escape(tag)}</h2><ul>{''.join(items)}</ul>"
        for tag, items in sorted(groups.items())
    )
    title = html.escape(f"{spec['info']['title']} {spec['info']['version']} API")
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{title}</h1>"
        '<p>The whole specification is <a href="/openapi.json"><code>/openapi.json</code></a>'
        " (open it in any OpenAPI viewer). Every call but <code>/healthz</code>, "
        "<code>/readyz</code>, <code>/openapi.json</code> and <code>/docs</code> needs "
        "<code>Authorization: Bearer &lt;token&gt;</code>.</p>"
        f"{sections}</body></html>"
    )
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": DOCS_POLICY,
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
        },
    )
