"""Text colours in static/css/portal.css meet WCAG AA: contrast of at least 4.5:1 against the
background they are drawn on (the rule's own background, else the page and card backgrounds;
the top bar's dark background for its rules)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "portal.css"
TEXT_MINIMUM = 4.5
TOPBAR = "#0f172a"
DARK_CONTEXTS = (".topbar", ".brand", ".mainnav", ".whoami", ".team-chip", ".linklike")
HEX = re.compile(r"#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b")


def _variables(css: str) -> dict[str, str]:
    root = re.search(r":root\s*\{([^}]*)\}", css)
    assert root is not None
    return dict(re.findall(r"(--[\w-]+)\s*:\s*([^;]+);", root.group(1)))


def _colour(value: str, variables: dict[str, str]) -> str | None:
    value = value.strip()
    var = re.fullmatch(r"var\((--[\w-]+)\)", value)
    if var:
        value = variables[var.group(1)].strip()
    match = HEX.fullmatch(value)
    if not match:
        return None  # inherit, currentColor, rgba(...), gradients: not a plain colour
    if len(value) == 4:
        value = "#" + "".join(c * 2 for c in value[1:])
    return value.lower()


def luminance(hex_colour: str) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_pairs() -> list[tuple[str, str, str]]:
    """(selector, text colour, background) for every rule that sets a text colour."""
    css = re.sub(r"/\*.*?\*/", "", CSS.read_text(), flags=re.S)
    variables = _variables(css)
    pages = [_colour("var(--card)", variables), _colour("var(--bg)", variables)]
    pairs = []
    for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        selector = " ".join(selector.split())
        decls = dict((k.strip(), v.strip()) for k, v in re.findall(r"(?:^|;)\s*([\w-]+)\s*:\s*([^;]+)", body))
        fg = _colour(decls.get("color", ""), variables)
        if fg is None:
            continue
        own = _colour(decls.get("background", decls.get("background-color", "")), variables)
        if own:
            backgrounds = [own]
        elif re.sub(r"^@media[^{]*?\)\s*", "", selector).startswith(DARK_CONTEXTS):
            backgrounds = [TOPBAR]
        else:
            backgrounds = [bg for bg in pages if bg]
        pairs += [(selector, fg, bg) for bg in backgrounds]
    return pairs


def test_the_formula_matches_known_ratios() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#16a34a", "#ffffff") == pytest.approx(3.30, abs=0.01)  # the old "at fair share" green


def test_the_parser_finds_the_rules_that_matter() -> None:
    selectors = {s for s, _fg, _bg in text_pairs()}
    assert {".muted", ".standing.standing-under, .standing.standing-at", ".key-deserved"} <= selectors


@pytest.mark.parametrize(("selector", "fg", "bg"), text_pairs())
def test_text_contrast_is_at_least_4_5(selector: str, fg: str, bg: str) -> None:
    ratio = contrast(fg, bg)
    assert ratio >= TEXT_MINIMUM, f"{selector}: {fg} on {bg} is {ratio:.2f}:1"
