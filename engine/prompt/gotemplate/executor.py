"""Executes a parse tree with Go's text/template semantics: variable scopes that end
at {{end}}, `$x =` assigning the nearest outer variable, range over slices, maps
(sorted keys) and ints, break/continue, missing map keys per the missingkey option.
"""

from __future__ import annotations

from typing import Any

from engine.errors import TemplateError
from engine.prompt.gotemplate.functions import (
    FIXED_ARITY,
    FUNCTIONS,
    MIN_ARITY,
    OLLAMA_FUNCTIONS,
    ArgCountError,
    FuncError,
)
from engine.prompt.gotemplate.lexer import go_quote, line_col
from engine.prompt.gotemplate.parser import (
    ActionNode,
    BoolNode,
    BranchNode,
    BreakNode,
    ChainNode,
    CommandNode,
    ContinueNode,
    DotNode,
    FieldNode,
    IdentifierNode,
    IfNode,
    ListNode,
    NilNode,
    Node,
    NumberNode,
    PipeNode,
    RangeNode,
    StringNode,
    TemplateNode,
    TextNode,
    Tree,
    VariableNode,
    WithNode,
)
from engine.prompt.gotemplate.values import (
    NO_VALUE,
    format_value,
    go_type_name,
    is_struct,
    sorted_items,
    struct_fields,
    truth,
)

MAX_DEPTH = 100      # nested {{template}} calls (Go allows 100000; Python's stack does not)
_MISSING = object()  # "no piped value" (Go's missingVal)


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class Executor:
    def __init__(self, tree: Tree, missing_key: str, builtins_only: bool = False):
        if missing_key not in ("zero", "default", "error"):
            raise ValueError(f"missing_key must be zero, default or error, not {missing_key!r}")
        self.tree = tree
        self.missing_key = missing_key
        self.out: list[str] = []
        self.vars: list[list[Any]] = []   # [name, value] pairs, innermost last
        self.depth = 0
        self.builtins_only = builtins_only

    def error(self, node: Node, message: str) -> TemplateError:
        line, col = line_col(self.tree.source, node.pos)
        context = str(node)
        return TemplateError(f"template: {line}:{col}: executing at <{context}>: {message}")

    def run(self, data: Any) -> str:
        self.vars = [["$", data]]
        self.walk(data, self.tree.root)
        return "".join(self.out)

    # ------------------------------------------------------------ statements
    def walk(self, dot: Any, node: Node) -> None:
        if isinstance(node, TextNode):
            self.out.append(node.text)
        elif isinstance(node, ListNode):
            for child in node.nodes:
                self.walk(dot, child)
        elif isinstance(node, ActionNode):
            value = self.eval_pipeline(dot, node.pipe)
            if not node.pipe.decl:
                self.out.append(format_value(value))
        elif isinstance(node, IfNode | WithNode):
            self.walk_if_or_with(dot, node)
        elif isinstance(node, RangeNode):
            self.walk_range(dot, node)
        elif isinstance(node, TemplateNode):
            self.walk_template(dot, node)
        elif isinstance(node, BreakNode):
            raise _Break
        elif isinstance(node, ContinueNode):
            raise _Continue
        else:
            raise self.error(node, f"unknown node: {node}")

    def walk_if_or_with(self, dot: Any, node: BranchNode) -> None:
        mark = len(self.vars)
        try:
            value = self.eval_pipeline(dot, node.pipe)
            if truth(value):
                self.walk(value if isinstance(node, WithNode) else dot, node.body)
            elif node.else_body is not None:
                self.walk(dot, node.else_body)
        finally:
            del self.vars[mark:]

    def walk_range(self, dot: Any, node: RangeNode) -> None:
        outer = len(self.vars)
        try:
            value = self.eval_pipeline(dot, node.pipe)
            mark = len(self.vars)
            n_decl = len(node.pipe.decl)
            if isinstance(value, list | tuple):
                items = list(enumerate(value))
            elif isinstance(value, dict):
                items = sorted_items(value)
            elif isinstance(value, int) and not isinstance(value, bool):
                if n_decl > 1:
                    raise self.error(
                        node, f"can't use {value} to iterate over more than one variable")
                items = [(i, i) for i in range(value)]
            elif value is NO_VALUE or value is None:
                items = []
            else:
                raise self.error(node, f"range can't iterate over {format_value(value)}")
            for key, elem in items:
                if n_decl > 0:
                    self.vars[-1][1] = elem
                if n_decl > 1:
                    self.vars[-2][1] = key
                try:
                    self.walk(elem, node.body)
                except _Continue:
                    pass
                except _Break:
                    break
                finally:
                    del self.vars[mark:]
            if not items and node.else_body is not None:
                self.walk(dot, node.else_body)
        finally:
            del self.vars[outer:]

    def walk_template(self, dot: Any, node: TemplateNode) -> None:
        body = self.tree.templates.get(node.name)
        if body is None:
            raise self.error(node, f"template {go_quote(node.name)} not defined")
        if self.depth >= MAX_DEPTH:
            raise self.error(node, f"exceeded maximum template depth ({MAX_DEPTH})")
        new_dot = self.eval_pipeline(dot, node.pipe) if node.pipe is not None else NO_VALUE
        saved = self.vars
        self.vars = [["$", new_dot]]
        self.depth += 1
        try:
            self.walk(new_dot, body)
        finally:
            self.depth -= 1
            self.vars = saved

    # ------------------------------------------------------------ expressions
    def eval_pipeline(self, dot: Any, pipe: PipeNode) -> Any:
        value: Any = _MISSING
        for cmd in pipe.cmds:
            value = self.eval_command(dot, cmd, value)
            if value is None:      # a nil interface becomes "no value" (Go's "lovely!")
                value = NO_VALUE
        for name in pipe.decl:
            if pipe.is_assign:
                self.set_var(pipe, name, value)
            else:
                self.vars.append([name, value])
        return value

    def set_var(self, node: Node, name: str, value: Any) -> None:
        for entry in reversed(self.vars):
            if entry[0] == name:
                entry[1] = value
                return
        raise self.error(node, f"undefined variable: {name}")

    def var_value(self, node: Node, name: str) -> Any:
        for entry in reversed(self.vars):
            if entry[0] == name:
                return entry[1]
        raise self.error(node, f"undefined variable: {name}")

    def not_a_function(self, args: list[Node], final: Any) -> None:
        if len(args) > 1 or final is not _MISSING:
            raise self.error(args[0], f"can't give argument to non-function {args[0]}")

    def eval_command(self, dot: Any, cmd: CommandNode, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, FieldNode):
            return self.eval_field_chain(dot, dot, first, first.ident, cmd.args, final)
        if isinstance(first, ChainNode):
            if isinstance(first.node, NilNode):
                raise self.error(first, f"indirection through explicit nil in {first}")
            receiver = self.eval_arg(dot, first.node)
            return self.eval_field_chain(dot, receiver, first, first.fields, cmd.args, final)
        if isinstance(first, IdentifierNode):
            return self.eval_function(dot, first, cmd.args, final)
        if isinstance(first, VariableNode):
            value = self.var_value(first, first.ident[0])
            if len(first.ident) == 1:
                self.not_a_function(cmd.args, final)
                return value
            return self.eval_field_chain(dot, value, first, first.ident[1:], cmd.args, final)
        self.not_a_function(cmd.args, final)
        if isinstance(first, PipeNode):
            return self.eval_pipeline(dot, first)
        if isinstance(first, NilNode):
            raise self.error(first, "nil is not a command")
        return self.literal(dot, first)

    def literal(self, dot: Any, node: Node) -> Any:
        if isinstance(node, BoolNode):
            return node.value
        if isinstance(node, DotNode):
            return dot
        if isinstance(node, NumberNode):
            return node.value
        if isinstance(node, StringNode):
            return node.text
        raise self.error(node, f"can't evaluate command {go_quote(str(node))}")

    def eval_arg(self, dot: Any, node: Node) -> Any:
        """A function argument; "no value" arrives as nil, as Go's validateType makes it."""
        if isinstance(node, NilNode):
            return None
        if isinstance(node, FieldNode):
            value = self.eval_field_chain(dot, dot, node, node.ident, [node], _MISSING)
        elif isinstance(node, VariableNode):
            value = self.var_value(node, node.ident[0])
            if len(node.ident) > 1:
                value = self.eval_field_chain(dot, value, node, node.ident[1:], [node], _MISSING)
        elif isinstance(node, PipeNode):
            value = self.eval_pipeline(dot, node)
        elif isinstance(node, IdentifierNode):
            value = self.eval_function(dot, node, [node], _MISSING)
        elif isinstance(node, ChainNode):
            value = self.eval_command(dot, CommandNode(node.pos, [node]), _MISSING)
        else:
            value = self.literal(dot, node)
        return None if value is NO_VALUE else value

    def eval_field_chain(self, dot: Any, receiver: Any, node: Node, ident: tuple[str, ...],
                         args: list[Node], final: Any) -> Any:
        for name in ident[:-1]:
            receiver = self.eval_field(node, name, [node], _MISSING, receiver)
        return self.eval_field(node, ident[-1], args, final, receiver)

    def eval_field(self, node: Node, name: str, args: list[Node], final: Any, receiver: Any) -> Any:
        if receiver is NO_VALUE:
            if self.missing_key == "error":
                raise self.error(node, f"nil data; no entry for key {go_quote(name)}")
            return NO_VALUE
        if receiver is None:
            raise self.error(node, f"nil pointer evaluating interface {{}}.{name}")
        has_args = len(args) > 1 or final is not _MISSING
        if is_struct(receiver):
            if name in {f.name for f in struct_fields(receiver)}:
                if has_args:
                    raise self.error(
                        node, f"{name} has arguments but cannot be invoked as function")
                return getattr(receiver, name)
        elif isinstance(receiver, dict) and all(isinstance(k, str) for k in receiver):
            if has_args:
                raise self.error(node, f"{name} is not a method but has arguments")
            if name in receiver:
                return receiver[name]
            if self.missing_key == "error":
                raise self.error(node, f"map has no entry for key {go_quote(name)}")
            return None if self.missing_key == "zero" else NO_VALUE
        raise self.error(node, f"can't evaluate field {name} in type {go_type_name(receiver)}")

    def eval_function(self, dot: Any, node: IdentifierNode, args: list[Node], final: Any) -> Any:
        name = node.name
        if name not in FUNCTIONS or (self.builtins_only and name in OLLAMA_FUNCTIONS):
            raise self.error(node, f"{go_quote(name)} is not a defined function")
        arg_nodes = args[1:]
        count = len(arg_nodes) + (final is not _MISSING)
        if name in FIXED_ARITY and count != FIXED_ARITY[name]:
            raise self.error(node, f"wrong number of args for {name}: "
                                   f"want {FIXED_ARITY[name]} got {count}")
        if name in MIN_ARITY and count < MIN_ARITY[name]:
            raise self.error(node, f"wrong number of args for {name}: want at least "
                                   f"{MIN_ARITY[name]} got {len(arg_nodes)}")
        if name in ("and", "or"):
            return self.and_or(dot, name == "or", arg_nodes, final)
        values = [self.eval_arg(dot, a) for a in arg_nodes]
        if final is not _MISSING:
            values.append(None if final is NO_VALUE else final)
        try:
            return FUNCTIONS[name](*values)
        except ArgCountError as error:
            raise self.error(node, str(error)) from None
        except FuncError as error:
            raise self.error(node, f"error calling {name}: {error}") from None

    def and_or(self, dot: Any, is_or: bool, arg_nodes: list[Node], final: Any) -> Any:
        """Go 1.18+: stop at the first operand that decides, and return that operand."""
        value: Any = None
        for arg in arg_nodes:
            value = self.eval_arg(dot, arg)
            if truth(value) == is_or:
                return value
        if final is not _MISSING:
            value = None if final is NO_VALUE else final
        return value


def execute(tree: Tree, data: Any, missing_key: str = "zero", builtins_only: bool = False) -> str:
    """Run a parsed template; ``builtins_only`` hides Ollama's functions (as a template
    created without its FuncMap does)."""
    return Executor(tree, missing_key, builtins_only).run(data)
