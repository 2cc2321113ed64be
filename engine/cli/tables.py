"""Tables in the terminal, as ``ollama`` prints them (its borderless tablewriter)."""

from __future__ import annotations

from collections.abc import Sequence


def table(rows: Sequence[Sequence[str]], indent: str = "", gap: str = "    ") -> str:
    """Left-aligned columns separated by ``gap``."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(max(map(len, rows)))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append((indent + gap.join(cells)).rstrip())
    return "\n".join(lines)
