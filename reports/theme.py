"""The one Altair theme of commscope reports, registered and enabled on import.

Why: colours, fonts and sizes are set in one place so every chart looks alike and chart
builders carry no styling. Importing :mod:`commscope.reports.charts` imports this module.
"""

from __future__ import annotations

import altair as alt

THEME_NAME = "commscope"

# Measured vs predicted, then the traffic classes, in a colour-blind-safe palette (Tableau 10).
MEASURED = "#4c78a8"
PREDICTED = "#f58518"
PALETTE = [
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#eeca3b",
    "#9d755d",
    "#bab0ac",
    "#ff9da6",
]


@alt.theme.register(THEME_NAME, enable=True)
def commscope_theme() -> alt.theme.ThemeConfig:
    """Fonts, palette and chart size shared by every report chart."""
    return alt.theme.ThemeConfig(
        config={
            "font": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
            "view": {"continuousWidth": 420, "continuousHeight": 260, "stroke": "#ddd"},
            "range": {"category": PALETTE},
            "axis": {"labelFontSize": 11, "titleFontSize": 12, "gridColor": "#eee"},
            "legend": {"labelFontSize": 11, "titleFontSize": 12, "labelLimit": 260},
            "title": {"fontSize": 14, "anchor": "start"},
            "header": {"labelFontSize": 12, "titleFontSize": 12},
        }
    )


def enable() -> None:
    """Make sure the commscope theme is the active one (another import may have switched)."""
    alt.theme.enable(THEME_NAME)
