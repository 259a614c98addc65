"""Server-rendered SVG bar charts of a plan: one pair of bars per team (today, changed).

No script: the chart is markup, readable without JavaScript and by screen readers (``role=img``
with a label, and the same numbers are in the table beside it)."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

TODAY, CHANGED = "#64748b", "#2563eb"
ROW_H, BAR_H, LABEL_W, BAR_W, PAD = 34, 12, 150, 360, 8


def paired_bars(title: str, unit: str, rows: Sequence[tuple[str, float | None, float | None]]) -> SafeString:
    """Horizontal bars, today's over the changed one's, per row label; None draws no bar ("–")."""
    top = max((v for _l, a, b in rows for v in (a, b) if v is not None), default=0.0) or 1.0
    height = PAD * 2 + ROW_H * len(rows) + 22
    width = LABEL_W + BAR_W + 90
    parts = [
        f'<svg class="plan-chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for i, (label, today, changed) in enumerate(rows):
        y = PAD + i * ROW_H
        parts.append(
            f'<text x="{LABEL_W - 6}" y="{y + BAR_H + 3}" text-anchor="end" fill="currentColor" '
            f'font-size="12">{escape(label)}</text>'
        )
        for j, (value, colour) in enumerate(((today, TODAY), (changed, CHANGED))):
            by = y + j * (BAR_H + 2)
            w = 0.0 if value is None else max(1.0, BAR_W * value / top)
            parts.append(f'<rect x="{LABEL_W}" y="{by}" width="{w:.1f}" height="{BAR_H}" fill="{colour}"/>')
            text = "–" if value is None else f"{value:g} {unit}"
            parts.append(
                f'<text x="{LABEL_W + w + 4:.1f}" y="{by + BAR_H - 2}" fill="currentColor" '
                f'font-size="11">{escape(text)}</text>'
            )
    ky = PAD + ROW_H * len(rows) + 6
    parts.append(f'<rect x="{LABEL_W}" y="{ky}" width="12" height="12" fill="{TODAY}"/>')
    parts.append(f'<text x="{LABEL_W + 16}" y="{ky + 10}" fill="currentColor" font-size="12">today</text>')
    parts.append(f'<rect x="{LABEL_W + 80}" y="{ky}" width="12" height="12" fill="{CHANGED}"/>')
    parts.append(f'<text x="{LABEL_W + 96}" y="{ky + 10}" fill="currentColor" font-size="12">changed</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text above is escaped
