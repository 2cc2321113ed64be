"""How each supported byte-level BPE vocabulary splits text before merging (GGUF
``tokenizer.ggml.pre``): the split regex its merges were learned with, whether text is
NFC-normalised first, and whether whole words found in the vocabulary skip the merges.

Sources: the models' own tokenizer.json files (Qwen2: NFC, Llama 3: no normalizer and
``ignore_merges``), cross-checked with llama.cpp's llama-vocab.cpp, which uses the same
regexes (spelled without ``(?i:...)``), never normalises, and for llama-bpe also sets
``ignore_merges`` and a BOS default. HF transformers' GGUF loader skips NFC and
``ignore_merges``; we follow the models' own tokenizers. GPT-4o's regex is the
tokenizer.json one llama-vocab.cpp quotes; llama.cpp runs a rewrite of it that leaves
combining marks (category M) out of words, which the original keeps in.
"""

from dataclasses import dataclass

from engine.errors import UnsupportedModel

# Contractions are matched case-insensitively ('S, 'LL) in the Qwen2 and Llama 3 regexes.
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Llama 3 = Qwen2 but digits go in runs of up to three.
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# GPT-4o's (o200k; Phi-4-mini's GGUFs name it "gpt-4o"): case-aware words, so "HelloWorld" is
# two pieces, a contraction stays on its word, digits in runs of up to three, and a
# punctuation run takes the newlines and slashes after it.
_GPT4O = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# GPT-2's regex (the one built into tokenizers' ByteLevel pre-tokenizer): lower-case contractions.
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


@dataclass(frozen=True)
class PreTokenizer:
    name: str
    split: str  # regex, applied with "isolated" behaviour (every match is a piece)
    nfc: bool  # NFC-normalise the text first
    ignore_merges: bool  # a piece that is itself a vocabulary entry is one token
    add_bos: bool  # llama.cpp's default when tokenizer.ggml.add_bos_token is absent


PRE_TOKENIZERS = {
    p.name: p
    for p in (
        PreTokenizer("qwen2", _QWEN2, nfc=True, ignore_merges=False, add_bos=False),
        PreTokenizer("llama-bpe", _LLAMA3, nfc=False, ignore_merges=True, add_bos=True),
        PreTokenizer("gpt2", _GPT2, nfc=False, ignore_merges=False, add_bos=False),
        PreTokenizer("gpt-4o", _GPT4O, nfc=False, ignore_merges=False, add_bos=False),
        # Files written without a `pre` name. llama.cpp's own "default" splits a little
        # differently; HF's loader (the reference we test against) uses GPT-2's regex.
        PreTokenizer("default", _GPT2, nfc=False, ignore_merges=False, add_bos=False),
    )
}


def pre_tokenizer(name: str | None, source: object) -> PreTokenizer:
    """The record for a GGUF ``tokenizer.ggml.pre`` value (absent means "default")."""
    found = PRE_TOKENIZERS.get(name or "default")
    if found is None:
        raise UnsupportedModel(
            f"unsupported pre-tokenizer '{name}' for byte-level BPE in {source}; "
            f"Lantern supports: {', '.join(PRE_TOKENIZERS)}"
        )
    return found
