"""Split a (possibly still growing) markdown reply into prose and fenced code blocks, so
code can be shown monospaced with its own copy button while prose uses Qt's markdown.

An unterminated fence (the model is still writing the block) counts as code to the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class Block:
    kind: str          # "prose" or "code"
    text: str
    language: str = ""


def split_blocks(markdown: str) -> list[Block]:
    blocks: list[Block] = []
    prose: list[str] = []
    code: list[str] | None = None
    fence, language = "", ""
    for line in markdown.split("\n"):
        if code is None:
            match = _FENCE.match(line)
            if match:
                if prose:
                    blocks.append(Block("prose", "\n".join(prose)))
                    prose = []
                code, fence, language = [], match["fence"], match["info"].strip()
            else:
                prose.append(line)
        else:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                blocks.append(Block("code", "\n".join(code), language))
                code = None
            else:
                code.append(line)
    if code is not None:
        blocks.append(Block("code", "\n".join(code), language))
    elif prose and any(p.strip() for p in prose):
        blocks.append(Block("prose", "\n".join(prose)))
    return [b for b in blocks if b.kind == "code" or b.text.strip()]
