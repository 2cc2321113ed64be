"""Go text/template parse trees: the node types and a parser with Go's grammar and
errors (undefined variables and functions are parse errors, as in Go).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from engine.errors import TemplateError
from engine.prompt.gotemplate.lexer import Tok, Token, go_quote, parse_error, tokenize

# ---------------------------------------------------------------- nodes


@dataclass
class Node:
    pos: int


@dataclass
class ListNode(Node):
    nodes: list[Node] = field(default_factory=list)


@dataclass
class TextNode(Node):
    text: str


@dataclass
class CommandNode(Node):
    args: list[Node] = field(default_factory=list)

    def __str__(self) -> str:
        return " ".join(f"({a})" if isinstance(a, PipeNode) else str(a) for a in self.args)


@dataclass
class PipeNode(Node):
    is_assign: bool = False
    decl: list[str] = field(default_factory=list)
    cmds: list[CommandNode] = field(default_factory=list)

    def __str__(self) -> str:
        text = " | ".join(str(c) for c in self.cmds)
        if self.decl:
            text = f"{', '.join(self.decl)} {'=' if self.is_assign else ':='} {text}"
        return text


@dataclass
class ActionNode(Node):
    pipe: PipeNode

    def __str__(self) -> str:
        return "{{" + str(self.pipe) + "}}"


@dataclass
class FieldNode(Node):
    ident: tuple[str, ...]

    def __str__(self) -> str:
        return "".join("." + i for i in self.ident)


@dataclass
class VariableNode(Node):
    ident: tuple[str, ...]     # ("$x", "Field", ...)

    def __str__(self) -> str:
        return ".".join(self.ident)


@dataclass
class ChainNode(Node):
    node: Node
    fields: tuple[str, ...]

    def __str__(self) -> str:
        base = f"({self.node})" if isinstance(self.node, PipeNode) else str(self.node)
        return base + "".join("." + f for f in self.fields)


@dataclass
class IdentifierNode(Node):
    name: str

    def __str__(self) -> str:
        return self.name


class FixedNode(Node):
    """A node that always prints the same text."""

    text: ClassVar[str]

    def __str__(self) -> str:
        return self.text


class DotNode(FixedNode):
    text = "."


class NilNode(FixedNode):
    text = "nil"


@dataclass
class BoolNode(Node):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


@dataclass
class NumberNode(Node):
    text: str
    value: int | float

    def __str__(self) -> str:
        return self.text


@dataclass
class StringNode(Node):
    quoted: str
    text: str

    def __str__(self) -> str:
        return self.quoted


@dataclass
class BranchNode(Node):
    pipe: PipeNode
    body: ListNode
    else_body: ListNode | None


class IfNode(BranchNode):
    keyword = "if"


class RangeNode(BranchNode):
    keyword = "range"


class WithNode(BranchNode):
    keyword = "with"


@dataclass
class TemplateNode(Node):
    name: str
    pipe: PipeNode | None

    def __str__(self) -> str:
        return "{{template " + go_quote(self.name) + (f" {self.pipe}" if self.pipe else "") + "}}"


class BreakNode(FixedNode):
    text = "{{break}}"


class ContinueNode(FixedNode):
    text = "{{continue}}"


class _End(FixedNode):
    text = "{{end}}"


class _Else(FixedNode):
    text = "{{else}}"


@dataclass(frozen=True)
class Tree:
    """A parsed source: the main list plus every {{define}}/{{block}} by name."""

    source: str
    root: ListNode
    templates: dict[str, ListNode]


# ---------------------------------------------------------------- literals

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            "\\": "\\", "'": "'", '"': '"'}
_OCTAL_INT = re.compile(r"[+-]?0[0-7_]+")


def unquote(token: str) -> str:
    """Go's strconv.Unquote for "..." and `...` literals."""
    if token.startswith("`"):
        return token[1:-1].replace("\r", "")
    body, out, i = token[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = body[i + 1]
        if kind in _ESCAPES:
            out.append(_ESCAPES[kind])
            i += 2
        elif kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError("invalid syntax")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        elif kind in "01234567":
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            raise ValueError("invalid syntax")
    return "".join(out)


def number_value(text: str, kind: Tok) -> int | float:
    """The constant's value as Go's idealConstant types it (int, or float64 when written
    with a point or exponent)."""
    if kind is Tok.CHAR_CONSTANT:
        return ord(unquote('"' + text[1:-1] + '"'))
    clean = text.replace("_", "")
    is_hex = clean.lstrip("+-")[:2].lower() == "0x"
    if (is_hex and "p" in clean.lower()) or (not is_hex and any(c in clean for c in ".eE")):
        return float.fromhex(clean) if is_hex else float(clean)
    if _OCTAL_INT.fullmatch(clean):
        return int(clean, 8)
    return int(clean, 0)


# ---------------------------------------------------------------- parser


class Parser:
    def __init__(self, source: str):
        self.src = source
        self.tokens = tokenize(source)
        self.i = 0
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.templates: dict[str, ListNode] = {}

    # token stream
    def next(self) -> Token:
        token = self.tokens[self.i]
        if token.kind is not Tok.EOF:
            self.i += 1
        return token

    def backup(self, n: int = 1) -> None:
        self.i -= n

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next_non_space(self) -> Token:
        token = self.next()
        while token.kind is Tok.SPACE:
            token = self.next()
        return token

    def peek_non_space(self) -> Token:
        while self.tokens[self.i].kind is Tok.SPACE:
            self.i += 1
        return self.tokens[self.i]

    def error(self, pos: int, message: str) -> TemplateError:
        return parse_error(self.src, pos, message)

    def unexpected(self, token: Token, context: str) -> TemplateError:
        return self.error(token.pos, f"unexpected {token} in {context}")

    def expect(self, kind: Tok, context: str) -> Token:
        token = self.next_non_space()
        if token.kind is not kind:
            raise self.unexpected(token, context)
        return token

    # grammar
    def parse(self) -> Tree:
        root = ListNode(0)
        while self.peek().kind is not Tok.EOF:
            if self.peek().kind is Tok.LEFT_DELIM:
                start = self.i
                self.next()
                if self.next_non_space().kind is Tok.DEFINE:
                    self.parse_definition()
                    continue
                self.i = start
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                raise self.error(node.pos, f"unexpected {node}")
            root.nodes.append(node)
        self.add_template("", root)
        return Tree(self.src, root, self.templates)

    def add_template(self, name: str, body: ListNode) -> None:
        old = self.templates.get(name)
        if old is None or _is_empty(old):
            self.templates[name] = body
        elif not _is_empty(body):
            raise self.error(
                body.pos, f"template: multiple definition of template {go_quote(name)}")

    def parse_definition(self) -> None:
        context = "define clause"
        token = self.next_non_space()
        if token.kind not in (Tok.STRING, Tok.RAW_STRING):
            raise self.unexpected(token, context)
        name = self.unquote(token)
        self.expect(Tok.RIGHT_DELIM, context)
        saved, self.vars = self.vars, ["$"]
        body, end = self.item_list()
        self.vars = saved
        if not isinstance(end, _End):
            raise self.error(end.pos, f"unexpected {end} in {context}")
        self.add_template(name, body)

    def unquote(self, token: Token) -> str:
        try:
            return unquote(token.value)
        except (ValueError, IndexError) as error:
            raise self.error(token.pos, str(error)) from None

    def item_list(self) -> tuple[ListNode, Node]:
        body = ListNode(self.peek_non_space().pos)
        while self.peek_non_space().kind is not Tok.EOF:
            node = self.text_or_action()
            if isinstance(node, _End | _Else):
                return body, node
            body.nodes.append(node)
        raise self.error(len(self.src), "unexpected EOF")

    def text_or_action(self) -> Node:
        token = self.next_non_space()
        if token.kind is Tok.TEXT:
            return TextNode(token.pos, token.value)
        if token.kind is Tok.LEFT_DELIM:
            return self.action()
        raise self.unexpected(token, "input")

    def action(self) -> Node:
        token = self.next_non_space()
        kind = token.kind
        if kind is Tok.BLOCK:
            return self.block_control()
        if kind in (Tok.BREAK, Tok.CONTINUE):
            word = token.value
            closing = self.next_non_space()
            if closing.kind is not Tok.RIGHT_DELIM:
                raise self.unexpected(closing, "{{" + word + "}}")
            if self.range_depth == 0:
                raise self.error(token.pos, "{{" + word + "}} outside {{range}}")
            return BreakNode(token.pos) if kind is Tok.BREAK else ContinueNode(token.pos)
        if kind is Tok.ELSE:
            peek = self.peek_non_space()
            if peek.kind in (Tok.IF, Tok.WITH):
                return _Else(peek.pos)
            self.expect(Tok.RIGHT_DELIM, "else")
            return _Else(token.pos)
        if kind is Tok.END:
            self.expect(Tok.RIGHT_DELIM, "end")
            return _End(token.pos)
        if kind is Tok.IF:
            return self.control(IfNode, token)
        if kind is Tok.RANGE:
            return self.control(RangeNode, token)
        if kind is Tok.WITH:
            return self.control(WithNode, token)
        if kind is Tok.TEMPLATE:
            return self.template_control()
        self.backup()
        start = self.peek()
        return ActionNode(start.pos, self.pipeline("command", Tok.RIGHT_DELIM))

    def control(self, cls: type[BranchNode], token: Token) -> BranchNode:
        """if / range / with: Go pops the pipeline's variables at {{end}}."""
        saved_vars = len(self.vars)
        context = cls.keyword
        pipe = self.pipeline(context, Tok.RIGHT_DELIM)
        if cls is RangeNode:
            self.range_depth += 1
        body, end = self.item_list()
        if cls is RangeNode:
            self.range_depth -= 1
        else_body = None
        if isinstance(end, _Else):
            chained = self.peek()
            # {{else if}} (and Go 1.23's {{else with}}) nest a new branch in the else list
            if cls is not RangeNode and chained.kind is (Tok.IF if cls is IfNode else Tok.WITH):
                self.next()
                else_body = ListNode(end.pos, [self.control(cls, chained)])
            else:
                else_body, end = self.item_list()
                if not isinstance(end, _End):
                    raise self.error(end.pos, f"expected end; found {end}")
        del self.vars[saved_vars:]
        return cls(pipe.pos, pipe, body, else_body)

    def block_control(self) -> TemplateNode:
        context = "block clause"
        token = self.next_non_space()
        if token.kind not in (Tok.STRING, Tok.RAW_STRING):
            raise self.unexpected(token, context)
        name = self.unquote(token)
        pipe = self.pipeline(context, Tok.RIGHT_DELIM)
        saved, self.vars = self.vars, ["$"]
        body, end = self.item_list()
        self.vars = saved
        if not isinstance(end, _End):
            raise self.error(end.pos, f"unexpected {end} in {context}")
        self.add_template(name, body)
        return TemplateNode(token.pos, name, pipe)

    def template_control(self) -> TemplateNode:
        context = "template clause"
        token = self.next_non_space()
        if token.kind not in (Tok.STRING, Tok.RAW_STRING):
            raise self.unexpected(token, context)
        name = self.unquote(token)
        pipe = None
        if self.next_non_space().kind is not Tok.RIGHT_DELIM:
            self.backup()
            pipe = self.pipeline(context, Tok.RIGHT_DELIM)
        return TemplateNode(token.pos, name, pipe)

    def pipeline(self, context: str, end: Tok) -> PipeNode:
        pipe = PipeNode(self.peek_non_space().pos)
        while self.peek_non_space().kind is Tok.VARIABLE:
            mark = self.i
            variable = self.next()
            after = self.peek_non_space()
            if after.kind in (Tok.ASSIGN, Tok.DECLARE):
                self.next()
                pipe.is_assign = after.kind is Tok.ASSIGN
                pipe.decl.append(variable.value)
                self.vars.append(variable.value)
                break
            if after.kind is Tok.CHAR and after.value == ",":
                self.next()
                pipe.decl.append(variable.value)
                self.vars.append(variable.value)
                if context == "range" and len(pipe.decl) < 2:
                    ahead = self.peek_non_space().kind
                    if ahead in (Tok.VARIABLE, Tok.RIGHT_DELIM, Tok.RIGHT_PAREN):
                        continue
                    raise self.error(after.pos, "range can only initialize variables")
                raise self.error(after.pos, f"too many declarations in {context}")
            self.i = mark
            break
        while True:
            token = self.next_non_space()
            if token.kind is end:
                self.check_pipeline(pipe, context, token)
                return pipe
            if token.kind in _OPERAND_STARTS:
                self.backup()
                pipe.cmds.append(self.command())
            else:
                raise self.unexpected(token, context)

    def check_pipeline(self, pipe: PipeNode, context: str, token: Token) -> None:
        if not pipe.cmds:
            raise self.error(token.pos, f"missing value for {context}")
        for stage, cmd in enumerate(pipe.cmds[1:], start=2):
            if isinstance(cmd.args[0], BoolNode | DotNode | NilNode | NumberNode | StringNode):
                raise self.error(cmd.pos, f"non executable command in pipeline stage {stage}")

    def command(self) -> CommandNode:
        cmd = CommandNode(self.peek_non_space().pos)
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                cmd.args.append(operand)
            token = self.next()
            if token.kind is Tok.SPACE:
                continue
            if token.kind in (Tok.RIGHT_DELIM, Tok.RIGHT_PAREN):
                self.backup()
            elif token.kind is not Tok.PIPE:
                raise self.unexpected(token, "operand")
            break
        if not cmd.args:
            raise self.error(cmd.pos, "empty command")
        return cmd

    def operand(self) -> Node | None:
        node = self.term()
        if node is None or self.peek().kind is not Tok.FIELD:
            return node
        chain_pos = self.peek().pos    # Go positions a chained node at its first ".Field"
        fields = []
        while self.peek().kind is Tok.FIELD:
            fields.append(self.next().value[1:])
        if isinstance(node, FieldNode):
            return FieldNode(chain_pos, node.ident + tuple(fields))
        if isinstance(node, VariableNode):
            return VariableNode(chain_pos, node.ident + tuple(fields))
        if isinstance(node, BoolNode | StringNode | NumberNode | NilNode | DotNode):
            raise self.error(node.pos, f"unexpected . after term {go_quote(str(node))}")
        return ChainNode(chain_pos, node, tuple(fields))

    def term(self) -> Node | None:
        from engine.prompt.gotemplate.functions import FUNCTIONS

        token = self.next_non_space()
        kind = token.kind
        if kind is Tok.IDENTIFIER:
            if token.value not in FUNCTIONS:
                raise self.error(token.pos, f"function {go_quote(token.value)} not defined")
            return IdentifierNode(token.pos, token.value)
        if kind is Tok.DOT:
            return DotNode(token.pos)
        if kind is Tok.NIL:
            return NilNode(token.pos)
        if kind is Tok.VARIABLE:
            return self.use_var(token)
        if kind is Tok.FIELD:
            return FieldNode(token.pos, (token.value[1:],))
        if kind is Tok.BOOL:
            return BoolNode(token.pos, token.value == "true")
        if kind in (Tok.NUMBER, Tok.CHAR_CONSTANT):
            try:
                return NumberNode(token.pos, token.value, number_value(token.value, kind))
            except ValueError:
                message = f"illegal number syntax: {go_quote(token.value)}"
                raise self.error(token.pos, message) from None
        if kind is Tok.LEFT_PAREN:
            return self.pipeline("parenthesized pipeline", Tok.RIGHT_PAREN)
        if kind in (Tok.STRING, Tok.RAW_STRING):
            return StringNode(token.pos, token.value, self.unquote(token))
        self.backup()
        return None

    def use_var(self, token: Token) -> VariableNode:
        parts = token.value.split(".")
        if parts[0] not in self.vars:
            raise self.error(token.pos, f"undefined variable {go_quote(parts[0])}")
        return VariableNode(token.pos, tuple(parts))


_OPERAND_STARTS = {Tok.BOOL, Tok.CHAR_CONSTANT, Tok.DOT, Tok.FIELD, Tok.IDENTIFIER, Tok.NUMBER,
                   Tok.NIL, Tok.RAW_STRING, Tok.STRING, Tok.VARIABLE, Tok.LEFT_PAREN}


def _is_empty(node: Node) -> bool:
    """Go's IsEmptyTree: only whitespace text and comments."""
    if isinstance(node, ListNode):
        return all(_is_empty(n) for n in node.nodes)
    if isinstance(node, TextNode):
        return not node.text.strip(" \t\r\n\v\f")
    return False


def parse(source: str) -> Tree:
    """Parse a template; raises TemplateError naming line and column."""
    return Parser(source).parse()
