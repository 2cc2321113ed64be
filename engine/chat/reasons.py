"""The sampler's reasons for one token, as a TokenEvent carries them (the local sampler
fills them in, engine.runtime.reasons.explain; a server sends none). Under a schema
(structured output) also how many tokens it removed and whether the model's own top-1 was
one of them: then the token was forced by the schema, not chosen by the model."""

from __future__ import annotations

from dataclasses import dataclass

from engine.chat.options import Options

FILTERS = ("top_k", "typical_p", "top_p", "min_p")


@dataclass(frozen=True)
class Candidate:
    id: int
    piece: str
    raw_logit: float
    penalized_logit: float
    scaled_logit: float | None       # after temperature; None when a filter dropped it
    kept: tuple[bool, ...]           # survived each of FILTERS (empty when greedy: none ran)
    probability: float               # final: what the draw used (greedy: 1 or 0)
    chosen: bool


@dataclass(frozen=True)
class SamplerReasons:
    greedy: bool                     # temperature 0: argmax of the penalised logits
    chosen: int
    survivors: tuple[int, ...]       # candidates left after each of FILTERS (greedy: none)
    candidates: tuple[Candidate, ...]  # the chosen token first, then by raw logit
    options: Options
    schema_removed: int | None = None  # tokens the schema disallowed (None: no schema)
    schema_forced: bool = False      # the raw top-1 was one of them

    @property
    def raw_top(self) -> Candidate:
        return max(self.candidates, key=lambda c: (c.raw_logit, -c.id))

    @property
    def summary(self) -> str:
        """One sentence: how the pick was made, and why the raw favourite lost if it did."""
        chosen = self.candidates[0]
        o = self.options
        if self.greedy:
            text = f"greedy (temperature 0): {chosen.piece!r} had the highest logit after penalties"
            if self.schema_removed is not None:
                text += " of the tokens the schema allows"
        else:
            text = (f"drawn at temperature {o.temperature:g} from {self.survivors[-1]} "
                    f"candidate(s), p = {chosen.probability:.3f}")
        if self.schema_removed is not None:
            text += f"; the schema removed {self.schema_removed} candidate(s)"
        best = self.raw_top
        if best.id != chosen.id:
            why = []
            if self.schema_forced:
                why.append("forced by the schema, which does not allow it")
            else:
                if best.penalized_logit != best.raw_logit:
                    why.append(f"penalties (repeat {o.repeat_penalty:g}, presence "
                               f"{o.presence_penalty:g}, frequency {o.frequency_penalty:g}) took "
                               f"it from {best.raw_logit:.3f} to {best.penalized_logit:.3f}")
                if not self.greedy:
                    why.append("the draw picked another candidate" if all(best.kept) else
                               "dropped by " + ", ".join(
                                   f for f, k in zip(FILTERS, best.kept, strict=True) if not k))
            text += f"; the raw top-1 {best.piece!r} was not chosen: " + "; ".join(why)
        return text

    def to_json(self) -> dict:
        return {
            "greedy": self.greedy, "chosen": self.chosen, "summary": self.summary,
            "survivors": dict(zip(FILTERS, self.survivors, strict=False)),
            **({"schema": {"removed": self.schema_removed, "forced": self.schema_forced}}
               if self.schema_removed is not None else {}),
            "candidates": [
                {"id": c.id, "token": c.piece, "raw_logit": c.raw_logit,
                 "penalized_logit": c.penalized_logit, "scaled_logit": c.scaled_logit,
                 "kept": dict(zip(FILTERS, c.kept, strict=False)),
                 "probability": c.probability, "chosen": c.chosen}
                for c in self.candidates
            ],
        }
