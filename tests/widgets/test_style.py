"""What every widget shares (widgets/style.py): distinct, escaped chart labels, and the static files (JavaScript,
CSS) read at import time with their palette filled in."""
import pytest

from widgets.style import KIND_COLORS, chart_labels, css_rules, static_text, tint


def test_chart_labels():
    assert chart_labels(["a", "<i>", "a"]) == ["a #0", "&lt;i&gt;", "a #2"]
    assert chart_labels(["x", "x"], ["#7", "#9"]) == ["x #7", "x #9"]
    assert chart_labels(["a", "a", "a #1"], escape=False) == ["a #0", "a #1 @1", "a #1 @2"]  # still distinct
    assert chart_labels([1, "<"], escape=False) == ["1", "<"]


def test_static_files_are_read_and_their_colours_come_from_the_palette():
    """The TokenStream's module and stylesheet live in widgets/static (package data); every var(--sdl-*) in the
    stylesheet is filled from the palette, and a name the palette lacks is an error, not a silent blank colour."""
    assert "export default { render }" in static_text("token_stream.js")
    css = static_text("token_stream.css")
    palette = {name: value for kind, color in KIND_COLORS.items()
               for name, value in ((kind, color), (f"{kind}-tint", tint(color)))}
    sheet, rules = css_rules(css, palette)
    assert "var(" not in sheet and "/*" not in sheet
    assert rules[".sdl-accepted"] == (f"background: {tint(KIND_COLORS['accepted'])}; "
                                      f"border-bottom: 2px solid {KIND_COLORS['accepted']};")
    assert sheet.splitlines()[0] == ".sdl-stream { " + rules[".sdl-stream"] + " }"
    with pytest.raises(KeyError, match="--sdl-bonus"):
        css_rules(".x { color: var(--sdl-bonus); }", {})
    with pytest.raises(FileNotFoundError):
        static_text("missing.js")
