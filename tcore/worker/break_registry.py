"""A graph break's registry entry, read from torch's own message: its GBxxxx id, type, explanation, hints and page.

Since torch 2.8 Dynamo writes each graph break as (torch._dynamo.exc.format_graph_break_message):

    Unsupported Tensor.item() call with capture_scalar_outputs=False        <- the type (gb_type)
      Explanation: Dynamo does not support tracing `Tensor.item()` ...
      Hint: Set `torch._dynamo.config.capture_scalar_outputs = True` ...
      Developer debug context: call_method TensorVariable() item () {}
     For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html

and torch/_dynamo/graph_break_registry.json maps each type to its id (GB0124). Older torch writes a reason without
these parts: then there is no entry (None), and the lab's own words stand alone.
"""
from __future__ import annotations

import re
from typing import Any

SITE = "https://meta-pytorch.github.io/compile-graph-break-site/gb/"
_LINK = re.compile(r"(https://\S*compile-graph-break-site/gb/gb(\d+)\.html)")
# lines Dynamo puts before the type: what it was doing when the break came
_CONTEXT = ("Encountered graph break when attempting", "Failed to handle graph break gracefully",
            "Graph break in user code", "Graph Break Reason:")


def page(gb_id: str) -> str:
    """The graph-break site's page for an id such as GB0124."""
    return f"{SITE}gb{gb_id.removeprefix('GB')}.html"


def parse(message: str, ids: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The registry entry in a graph-break message: {gb_id, gb_type, explanation, hints, context, link}, or None.

    ids: gb_type -> GBxxxx, for a message without the link line (torch's registry; lookup_ids() reads it).
    """
    text = message.split("User code traceback:", 1)[0]
    if "Graph Break Reason:" in text:
        text = text.split("Graph Break Reason:", 1)[1]
    lines = text.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("Explanation:")), None)
    if at is None:
        return None  # not the registry's format: a torch before it, or another kind of message
    gb_type = next((ln.strip() for ln in reversed(lines[:at]) if ln.strip() and not ln.strip().startswith(_CONTEXT)),
                   "")
    fields: dict[str, list[str]] = {"Explanation": [], "Hint": [], "Developer debug context": []}
    hints: list[str] = []
    current = None
    for ln in lines[at:]:
        stripped = ln.strip()
        key = next((k for k in fields if stripped.startswith(k + ":")), None)
        if key:
            current = key
            body = stripped[len(key) + 1:].strip()
            if key == "Hint":
                hints.append(body)
            else:
                fields[key].append(body)
        elif stripped.startswith("For more details about this graph break"):
            current = None
        elif stripped and current:  # an indented continuation of the field above
            if current == "Hint":
                hints[-1] += " " + stripped
            else:
                fields[current].append(stripped)
        elif not stripped:
            current = None
    link = _LINK.search(message)
    gb_id = f"GB{link.group(2)}" if link else (ids or {}).get(gb_type)
    return {"gb_id": gb_id, "gb_type": gb_type, "explanation": " ".join(fields["Explanation"]), "hints": hints,
            "context": " ".join(fields["Developer debug context"]),
            "link": link.group(1) if link else (page(gb_id) if gb_id else None)}


def lookup_ids() -> dict[str, str]:
    """torch's own registry, gb_type -> GBxxxx ({} where this torch has none)."""
    try:
        from torch._dynamo import exc
    except ImportError:
        return {}
    loader = getattr(exc, "_load_gb_type_to_gb_id_map", None)
    return dict(loader()) if loader else {}
