"""Tokens of Go's text/template language, with Go's trim-marker and comment rules.

Go decides where whitespace is trimmed while lexing (`{{- ` trims the text before,
` -}}` the text after, and only when the dash touches a space), so the parser
receives text that is already trimmed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.errors import TemplateError

SPACE_CHARS = " \t\r\n"
LEFT_DELIM = "{{"
RIGHT_DELIM = "}}"
LEFT_COMMENT = "/*"
RIGHT_COMMENT = "*/"


class Tok(enum.Enum):
    TEXT = "text"
    LEFT_DELIM = "{{"
    RIGHT_DELIM = "}}"
    SPACE = "space"
    ASSIGN = "="
    DECLARE = ":="
    PIPE = "|"
    LEFT_PAREN = "("
    RIGHT_PAREN = ")"
    CHAR = "char"              # any other printable ASCII (the "," of `$i, $v`)
    STRING = "string"
    RAW_STRING = "raw string"
    CHAR_CONSTANT = "char constant"
    NUMBER = "number"
    BOOL = "bool"
    NIL = "nil"
    DOT = "."
    FIELD = "field"
    VARIABLE = "variable"
    IDENTIFIER = "identifier"
    EOF = "EOF"
    # keywords
    BLOCK = "block"
    BREAK = "break"
    CONTINUE = "continue"
    DEFINE = "define"
    ELSE = "else"
    END = "end"
    IF = "if"
    RANGE = "range"
    TEMPLATE = "template"
    WITH = "with"


KEYWORDS = {
    "block": Tok.BLOCK, "break": Tok.BREAK, "continue": Tok.CONTINUE,
    "define": Tok.DEFINE, "else": Tok.ELSE, "end": Tok.END, "if": Tok.IF,
    "range": Tok.RANGE, "template": Tok.TEMPLATE, "with": Tok.WITH, "nil": Tok.NIL,
}
_ANGLED = set(KEYWORDS.values()) | {Tok.DOT}
_TERMINATORS = set(SPACE_CHARS) | set(".,|:()")


@dataclass(frozen=True)
class Token:
    kind: Tok
    value: str
    pos: int    # character offset into the source
    line: int   # 1-based line where the token starts

    def __str__(self) -> str:
        """As Go's parser quotes a token in an error message."""
        if self.kind is Tok.EOF:
            return "EOF"
        if self.kind in _ANGLED:
            return f"<{self.value}>"
        if len(self.value) > 10:
            return go_quote(self.value[:10]) + "..."
        return go_quote(self.value)


def go_quote(s: str) -> str:
    """Go's %q for a string (strconv.Quote): printable runes kept, the rest escaped."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def line_col(source: str, pos: int) -> tuple[int, int]:
    """Line (1-based) and column (0-based offset in the line, as Go's ErrorContext)."""
    line = source.count("\n", 0, pos) + 1
    start = source.rfind("\n", 0, pos) + 1
    return line, pos - start


def parse_error(source: str, pos: int, message: str) -> TemplateError:
    line, col = line_col(source, pos)
    return TemplateError(f"template: {line}:{col}: {message}")


def _is_space(ch: str) -> bool:
    return ch != "" and ch in SPACE_CHARS


def _is_alnum(ch: str) -> bool:
    return ch != "" and (ch == "_" or ch.isalpha() or ch.isdigit())


def _has_left_trim(s: str, i: int) -> bool:
    return s[i:i + 1] == "-" and _is_space(s[i + 1:i + 2])


def _has_right_trim(s: str, i: int) -> bool:
    return _is_space(s[i:i + 1]) and s[i + 1:i + 2] == "-"


class Lexer:
    """Turns template source into a list of tokens (Go's lexer state machine, unrolled)."""

    def __init__(self, source: str):
        self.src = source
        self.pos = 0
        self.tokens: list[Token] = []
        self.paren_depth = 0

    def error(self, pos: int, message: str) -> TemplateError:
        return parse_error(self.src, pos, message)

    def emit(self, kind: Tok, start: int, end: int) -> None:
        line = self.src.count("\n", 0, start) + 1
        self.tokens.append(Token(kind, self.src[start:end], start, line))

    def run(self) -> list[Token]:
        src = self.src
        while True:
            at = src.find(LEFT_DELIM, self.pos)
            if at < 0:
                if self.pos < len(src):
                    self.emit(Tok.TEXT, self.pos, len(src))
                self.tokens.append(Token(Tok.EOF, "", len(src), src.count("\n") + 1))
                return self.tokens
            text_end = at
            if _has_left_trim(src, at + len(LEFT_DELIM)):
                text_end = len(src[self.pos:at].rstrip(SPACE_CHARS)) + self.pos
            if text_end > self.pos:
                self.emit(Tok.TEXT, self.pos, text_end)
            self.pos = at
            self.lex_action()

    def at_right_delim(self, i: int) -> tuple[bool, bool]:
        """(at a right delimiter, with a trim marker) at offset i."""
        if _has_right_trim(self.src, i) and self.src.startswith(RIGHT_DELIM, i + 2):
            return True, True
        return self.src.startswith(RIGHT_DELIM, i), False

    def after_right_delim(self, i: int, trim: bool) -> int:
        """Offset after the right delimiter at i (i at the trim marker when trim)."""
        i += (2 if trim else 0) + len(RIGHT_DELIM)
        if trim:
            while _is_space(self.src[i:i + 1]):
                i += 1
        return i

    def lex_action(self) -> None:
        src = self.src
        start = self.pos
        i = start + len(LEFT_DELIM)
        after_marker = 2 if _has_left_trim(src, i) else 0
        if src.startswith(LEFT_COMMENT, i + after_marker):
            j = src.find(RIGHT_COMMENT, i + after_marker + len(LEFT_COMMENT))
            if j < 0:
                raise self.error(start, "unclosed comment")
            j += len(RIGHT_COMMENT)
            delim, trim = self.at_right_delim(j)
            if not delim:
                raise self.error(start, "comment ends before closing delimiter")
            self.pos = self.after_right_delim(j, trim)
            return
        self.emit(Tok.LEFT_DELIM, start, i)
        self.pos = i + after_marker
        self.paren_depth = 0
        while True:
            if self.inside_action_step():
                return

    def inside_action_step(self) -> bool:
        """Lex one item inside an action; True once the right delimiter is consumed."""
        src = self.src
        i = self.pos
        delim, trim = self.at_right_delim(i)
        if delim:
            if self.paren_depth:
                raise self.error(i, "unclosed left paren")
            end = i + (2 if trim else 0)
            self.emit(Tok.RIGHT_DELIM, end, end + len(RIGHT_DELIM))
            self.pos = self.after_right_delim(i, trim)
            return True
        if i >= len(src):
            raise self.error(i, "unclosed action")
        ch = src[i]
        if _is_space(ch):
            j = i
            while _is_space(src[j:j + 1]):
                j += 1
            # " -}}" : the last space belongs to the trim marker
            if src[j:j + 1] == "-" and src.startswith(RIGHT_DELIM, j + 1):
                j -= 1
                if j == i:
                    self.pos = i
                    return False
            self.emit(Tok.SPACE, i, j)
            self.pos = j
            return False
        simple = {"=": Tok.ASSIGN, "|": Tok.PIPE}
        if ch in simple:
            self.emit(simple[ch], i, i + 1)
            self.pos = i + 1
        elif ch == ":":
            if src[i + 1:i + 2] != "=":
                raise self.error(i, "expected :=")
            self.emit(Tok.DECLARE, i, i + 2)
            self.pos = i + 2
        elif ch == '"':
            self.lex_quote(i, '"', Tok.STRING, "unterminated quoted string")
        elif ch == "`":
            j = src.find("`", i + 1)
            if j < 0:
                raise self.error(i, "unterminated raw quoted string")
            self.emit(Tok.RAW_STRING, i, j + 1)
            self.pos = j + 1
        elif ch == "'":
            self.lex_quote(i, "'", Tok.CHAR_CONSTANT, "unterminated character constant")
        elif ch == "$":
            self.lex_field_or_variable(i, Tok.VARIABLE)
        elif ch == "." and not ("0" <= src[i + 1:i + 2] <= "9" and src[i + 1:i + 2] != ""):
            self.lex_field_or_variable(i, Tok.FIELD)
        elif ch in "+-." or "0" <= ch <= "9":
            self.lex_number(i)
        elif _is_alnum(ch):
            self.lex_identifier(i)
        elif ch == "(":
            self.emit(Tok.LEFT_PAREN, i, i + 1)
            self.paren_depth += 1
            self.pos = i + 1
        elif ch == ")":
            self.emit(Tok.RIGHT_PAREN, i, i + 1)
            self.paren_depth -= 1
            if self.paren_depth < 0:
                raise self.error(i, "unexpected right paren U+0029 ')'")
            self.pos = i + 1
        elif ord(ch) < 128 and ch.isprintable():
            self.emit(Tok.CHAR, i, i + 1)
            self.pos = i + 1
        else:
            raise self.error(i, f"unrecognized character in action: {_rune_name(ch)}")
        return False

    def at_terminator(self, i: int) -> bool:
        ch = self.src[i:i + 1]
        return ch == "" or ch in _TERMINATORS or self.src.startswith(RIGHT_DELIM, i)

    def lex_quote(self, i: int, quote: str, kind: Tok, message: str) -> None:
        src = self.src
        j = i + 1
        while True:
            ch = src[j:j + 1]
            if ch == "\\":
                nxt = src[j + 1:j + 2]
                if nxt not in ("", "\n"):
                    j += 2
                    continue
                raise self.error(i, message)
            if ch in ("", "\n"):
                raise self.error(i, message)
            if ch == quote:
                break
            j += 1
        self.emit(kind, i, j + 1)
        self.pos = j + 1

    def lex_field_or_variable(self, i: int, kind: Tok) -> None:
        j = i + 1
        if self.at_terminator(j):
            self.emit(Tok.VARIABLE if kind is Tok.VARIABLE else Tok.DOT, i, j)
            self.pos = j
            return
        while _is_alnum(self.src[j:j + 1]):
            j += 1
        if not self.at_terminator(j):
            raise self.error(j, f"bad character {_rune_name(self.src[j])}")
        self.emit(kind, i, j)
        self.pos = j

    def lex_identifier(self, i: int) -> None:
        j = i
        while _is_alnum(self.src[j:j + 1]):
            j += 1
        if not self.at_terminator(j):
            raise self.error(j, f"bad character {_rune_name(self.src[j])}")
        word = self.src[i:j]
        if word in KEYWORDS:
            kind = KEYWORDS[word]
        elif word in ("true", "false"):
            kind = Tok.BOOL
        else:
            kind = Tok.IDENTIFIER
        self.emit(kind, i, j)
        self.pos = j

    def lex_number(self, i: int) -> None:
        src = self.src
        j = i
        if src[j:j + 1] in ("+", "-"):
            j += 1
        digits = "0123456789_"
        if src[j:j + 1] == "0" and src[j + 1:j + 2] in ("x", "X", "o", "O", "b", "B"):
            bases = {"x": "0123456789abcdefABCDEF_", "o": "01234567_", "b": "01_"}
            digits = bases[src[j + 1].lower()]
            j += 2
        while src[j:j + 1] and src[j] in digits:
            j += 1
        if src[j:j + 1] == ".":
            j += 1
            while src[j:j + 1] and src[j] in digits:
                j += 1
        exponent = "eE" if len(digits) == 11 else "pP" if len(digits) == 23 else ""
        if exponent and src[j:j + 1] and src[j] in exponent:
            j += 1
            if src[j:j + 1] in ("+", "-"):
                j += 1
            while src[j:j + 1] and src[j] in "0123456789_":
                j += 1
        if src[j:j + 1] == "i" or _is_alnum(src[j:j + 1]) or src[j:j + 1] in ("+", "-"):
            raise self.error(i, f"bad number syntax: {go_quote(src[i:j + 1])}")
        self.emit(Tok.NUMBER, i, j)
        self.pos = j


def _rune_name(ch: str) -> str:
    return f"U+{ord(ch):04X} '{ch}'"


def tokenize(source: str) -> list[Token]:
    return Lexer(source).run()
