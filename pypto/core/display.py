"""Rich display for notebooks: every public object gives a MIME bundle with text/plain.

>>> b = mimebundle("x = 1", pre("x = 1"))
>>> sorted(b)
['text/html', 'text/plain']
"""

from __future__ import annotations

import html
from collections.abc import Sequence

__all__ = ["bar", "mimebundle", "pre", "section", "table"]

STYLE = (
    "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; "
    "line-height: 1.35; white-space: pre; overflow-x: auto; max-height: 480px"
)


def mimebundle(text: str, html_body: str) -> dict[str, str]:
    """The bundle IPython shows: HTML in notebooks, the text everywhere else."""
    return {"text/plain": text, "text/html": html_body}


def pre(text: str, cls: str = "pypto-ir") -> str:
    """Program text as a scrolling monospace block."""
    return f"<pre class='{cls}' style='{STYLE}'>{html.escape(text)}</pre>"


def section(title: str, body: str, open_: bool = False) -> str:
    """A collapsible section (``<details>``)."""
    o = " open" if open_ else ""
    return f"<details{o}><summary><b>{html.escape(title)}</b></summary>{body}</details>"


def table(rows: Sequence[tuple[str, str]], caption: str = "") -> str:
    """A two-column table of already-escaped HTML cells."""
    cap = f"<caption style='text-align:left'><b>{html.escape(caption)}</b></caption>"
    body = "".join(
        f"<tr><td style='text-align:left'>{k}</td><td style='text-align:right'>{v}</td></tr>"
        for k, v in rows
    )
    return f"<table>{cap if caption else ''}{body}</table>"


def bar(fraction: float, width: int = 120) -> str:
    """A horizontal bar for a fraction in [0, 1] (utilization, efficiency)."""
    f = min(max(fraction, 0.0), 1.0)
    return (
        f"<div style='display:inline-block;width:{width}px;height:9px;background:#eee'>"
        f"<div style='width:{f * 100:.1f}%;height:9px;background:#4a7fc1'></div></div>"
        f" {f:.0%}"
    )
