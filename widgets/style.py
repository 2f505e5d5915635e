"""Colours and labels shared by every widget, so a kind of token looks the same in every view.

The palette is Okabe & Ito's (2008), chosen to stay distinguishable under the common colour-vision deficiencies.
Colours pair up on purpose: a bonus token comes from the target alone, so it wears the target's colour; an
accepted token is the draft's, so it wears the draft's; a resampled token is drawn from the residual
distribution, so it wears the residual's. A token of a step that drafted nothing (the prefill's, every
autoregressive step's, prompt lookup's steps without a match) is the target's too, but no draft was accepted before
it, so it is not called a bonus: it wears the text's own ink (kind ``"target"``).

Also here: the helpers every viewer shares (slider positions, distinct chart labels) and :func:`static_text`, which
reads a widget's JavaScript or CSS from ``widgets/static/`` (shipped as package data).
"""
from __future__ import annotations

import html
import re
from collections import Counter
from importlib import resources

from lab.validation import is_integer

__all__ = [
    "ACCEPTED_COLOR", "RESAMPLED_COLOR", "BONUS_COLOR", "REJECTED_COLOR", "PROMPT_COLOR", "PLAIN_COLOR",
    "TARGET_COLOR", "DRAFT_COLOR", "RESIDUAL_COLOR", "KIND_COLORS", "KIND_LABELS", "TOKEN_KINDS",
    "GENERATED_KINDS", "MUTED_CSS", "tint", "slider_position", "chart_labels", "static_text", "css_rules",
]

ACCEPTED_COLOR = "#009E73"   # bluish green: a draft token the target accepted
RESAMPLED_COLOR = "#D55E00"  # vermillion: the target's token after a rejection, drawn from the residual
BONUS_COLOR = "#0072B2"      # blue: the extra target token after every draft was accepted
REJECTED_COLOR = "#999999"   # grey, struck through: a draft token the target did not keep
PROMPT_COLOR = "#7F7F7F"     # muted grey: the prompt
PLAIN_COLOR = "#333333"      # ink: the target's token of a step that drafted nothing (as in ordinary decoding)

TARGET_COLOR = BONUS_COLOR
DRAFT_COLOR = ACCEPTED_COLOR
RESIDUAL_COLOR = RESAMPLED_COLOR

TOKEN_KINDS = ("prompt", "accepted", "rejected", "resampled", "bonus", "target")
GENERATED_KINDS = ("accepted", "resampled", "bonus", "target")  # the kinds that end up in the output text

KIND_COLORS = {
    "prompt": PROMPT_COLOR,
    "accepted": ACCEPTED_COLOR,
    "rejected": REJECTED_COLOR,
    "resampled": RESAMPLED_COLOR,
    "bonus": BONUS_COLOR,
    "target": PLAIN_COLOR,
}

# Inline style of the small grey lines (legends, captions, stats) under and above every viewer.
MUTED_CSS = "color: #777; font-size: 12px;"

KIND_LABELS = {
    "prompt": "prompt",
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "resampled": "resampled by the target (its argmax when greedy)",
    "bonus": "bonus token",
    "target": "target's token, nothing drafted",
}


def tint(hex_color: str, alpha: float = 0.22) -> str:
    """``"#RRGGBB"`` → ``"rgba(r, g, b, alpha)"``: a translucent background that reads on light and dark themes.
    Raises ``ValueError`` for anything but ``#RRGGBB``."""
    value = hex_color.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"expected a colour like '#RRGGBB', got {hex_color!r}")
    red, green, blue = (int(value[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def slider_position(name: str, value, count: int, unit: str, detail: str = "") -> int:
    """``value`` as a slider position in ``[0, count)`` for a viewer holding ``count`` ``unit`` (e.g. "frames",
    with ``detail`` ", two per step" for the messages); negative values count from the end. Raises
    ``ValueError`` naming ``name`` and the allowed range for a non-integer (bools and floats included), a value
    out of range, or an empty viewer."""
    if not is_integer(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if count == 0:
        raise ValueError(f"{name} {value}: the viewer has no {unit} yet; pass its on_step to lab.decode.generate "
                         "(or call extend(records)) first")
    if not -count <= value < count:
        raise ValueError(f"{name} must be in [{-count}, {count - 1}] ({count} {unit}{detail}; negative counts from the "
                         f"end), got {value}")
    return value % count


def chart_labels(texts, suffixes=None, escape: bool = True) -> list:
    """``texts`` (each ``str()``-ed) as plotly category labels: equal texts get ``" " + suffixes[i]`` appended
    (default ``"#i"``, the position) so each keeps its own bar, since plotly draws equal categories in one slot;
    then ``&``, ``<`` and ``>`` are escaped, as plotly renders some HTML tags in text (it shows ``&quot;``
    literally, so quotes stay). ``escape=False`` returns the distinct labels unescaped, for HTML built later."""
    texts = [str(text) for text in texts]
    suffixes = [f"#{i}" for i in range(len(texts))] if suffixes is None else list(suffixes)
    counts = Counter(texts)
    labels = [text if counts[text] == 1 else f"{text} {suffix}" for text, suffix in zip(texts, suffixes)]
    counts = Counter(labels)
    if len(counts) < len(labels):  # a suffixed label met an existing one ("a", "a", "a #1"): add the position
        labels = [label if counts[label] == 1 else f"{label} @{i}" for i, label in enumerate(labels)]
    return [html.escape(label, quote=False) for label in labels] if escape else labels


def static_text(name: str) -> str:
    """The text of ``widgets/static/<name>`` (a widget's JavaScript module or stylesheet), read as UTF-8 through
    :mod:`importlib.resources`, so it works from a source checkout and from an installed wheel alike. Raises
    ``FileNotFoundError`` for a file that is not there (e.g. package data left out of a build)."""
    return resources.files("widgets").joinpath("static").joinpath(name).read_text(encoding="utf-8")


_VARIABLE = re.compile(r"var\(--sdl-([a-z0-9-]+)\)")
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def css_rules(css: str, variables: dict) -> tuple:
    """``(stylesheet, rules)`` of a flat stylesheet ``css`` (no @-rules or nesting) whose colours are written
    ``var(--sdl-NAME)``, with every such reference replaced by ``variables[NAME]`` (a dict name -> CSS value):
    ``rules`` maps each selector to its declarations (whitespace collapsed), for inline ``style=""`` attributes in
    static HTML, and ``stylesheet`` is those rules again, one per line, without comments.

    Raises ``KeyError`` naming a variable that ``variables`` lacks, so a stylesheet and its palette cannot drift
    apart silently."""
    def fill(match):
        name = match.group(1)
        if name not in variables:
            raise KeyError(f"the stylesheet uses var(--sdl-{name}), which the palette does not define")
        return variables[name]

    css = _VARIABLE.sub(fill, re.sub(r"/\*.*?\*/", "", css, flags=re.S))
    rules = {" ".join(selector.split()): " ".join(body.split()) for selector, body in _RULE.findall(css)}
    return "\n".join(f"{selector} {{ {body} }}" for selector, body in rules.items()), rules
