// Command templatecheck renders Lantern's Go-template test cases with Go's own
// text/template and writes the expected outputs that the Python interpreter is
// compared against. It mirrors what Ollama's template.Execute hands a template
// (its data types, message collation, image tags and the legacy prompt/response
// path) without depending on Ollama's code.
//
// Usage: go run . CASES.json TEMPLATE_DIR > expected.json
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
)

type testCase struct {
	Name     string          `json:"name"`
	Template string          `json:"template"` // inline source, or "@file" under TEMPLATE_DIR
	Mode     string          `json:"mode"`     // "raw": data as decoded JSON; "ollama": a chat
	Data     json.RawMessage `json:"data"`
}

type result struct {
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
}

func main() {
	raw, err := os.ReadFile(os.Args[1])
	check(err)
	var cases []testCase
	check(json.Unmarshal(raw, &cases))
	results := map[string]result{}
	for _, c := range cases {
		source := c.Template
		if strings.HasPrefix(source, "@") {
			b, err := os.ReadFile(filepath.Join(os.Args[2], source[1:]))
			check(err)
			source = strings.ReplaceAll(string(b), "\r\n", "\n")
		}
		out, err := run(source, c.Mode, c.Data)
		if err != nil {
			msg := err.Error()
			results[c.Name] = result{Error: &msg}
		} else {
			results[c.Name] = result{Output: &out}
		}
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, n := range names {
		key, _ := json.Marshal(n)
		val, _ := json.Marshal(results[n])
		fmt.Fprintf(&buf, "  %s: %s", key, val)
		if i < len(names)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	os.Stdout.Write(buf.Bytes())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(source, mode string, data json.RawMessage) (out string, err error) {
	defer func() { // Ollama's legacy path can panic; record it as an error
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	var b bytes.Buffer
	switch mode {
	case "raw":
		tmpl, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(source)
		if err != nil {
			return "", err
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return "", err
		}
		err = tmpl.Execute(&b, v)
		return b.String(), err
	case "ollama":
		tmpl, err := parseTemplate(source)
		if err != nil {
			return "", err
		}
		var chat chatData
		if err := json.Unmarshal(data, &chat); err != nil {
			return "", err
		}
		err = executeChat(tmpl, &b, chat)
		return b.String(), err
	}
	return "", fmt.Errorf("unknown mode %q", mode)
}

func parseTemplate(source string) (*template.Template, error) {
	tmpl, err := template.New("").Option("missingkey=zero").Funcs(funcs).Parse(source)
	if err != nil {
		return nil, err
	}
	vars, err := identifiers(tmpl)
	if err != nil {
		return nil, err
	}
	if !contains(vars, "messages") && !contains(vars, "response") {
		tmpl.Tree.Root.Nodes = append(tmpl.Tree.Root.Nodes, responseAction())
	}
	return tmpl, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func responseAction() *parse.ActionNode {
	field := &parse.FieldNode{NodeType: parse.NodeField, Ident: []string{"Response"}}
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Args: []parse.Node{field}}
	pipe := &parse.PipeNode{NodeType: parse.NodePipe, Cmds: []*parse.CommandNode{cmd}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pipe: pipe}
}

var funcs = template.FuncMap{
	"json": func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	},
	"currentDate":   func(args ...string) string { return "2025-01-02" },
	"yesterdayDate": func(args ...string) string { return "2025-01-01" },
	"toTypeScriptType": func(v any) string {
		if p, ok := v.(toolProperty); ok {
			return p.typeScript()
		}
		return "any"
	},
}

// identifiers lists, lower-cased and sorted, the field and variable names a
// template mentions (how Ollama tells .Messages templates from legacy ones).
func identifiers(t *template.Template) ([]string, error) {
	set := map[string]bool{}
	var walk func(n parse.Node) error
	walk = func(n parse.Node) error {
		switch n := n.(type) {
		case *parse.ListNode:
			for _, c := range n.Nodes {
				if err := walk(c); err != nil {
					return err
				}
			}
		case *parse.TemplateNode:
			if n.Pipe == nil {
				return fmt.Errorf("undefined template specified")
			}
			return walk(n.Pipe)
		case *parse.ActionNode:
			return walk(n.Pipe)
		case *parse.IfNode:
			return walk(&n.BranchNode)
		case *parse.RangeNode:
			return walk(&n.BranchNode)
		case *parse.WithNode:
			return walk(&n.BranchNode)
		case *parse.BranchNode:
			if err := walk(n.Pipe); err != nil {
				return err
			}
			for _, l := range []*parse.ListNode{n.List, n.ElseList} {
				if l != nil {
					if err := walk(l); err != nil {
						return err
					}
				}
			}
		case *parse.PipeNode:
			for _, c := range n.Cmds {
				for _, a := range c.Args {
					if err := walk(a); err != nil {
						return err
					}
				}
			}
		case *parse.FieldNode:
			for _, id := range n.Ident {
				set[strings.ToLower(id)] = true
			}
		case *parse.VariableNode:
			for _, id := range n.Ident {
				set[strings.ToLower(id)] = true
			}
		}
		return nil
	}
	for _, tt := range t.Templates() {
		for _, n := range tt.Root.Nodes {
			if err := walk(n); err != nil {
				return nil, err
			}
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}
