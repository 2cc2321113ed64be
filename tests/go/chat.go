package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/template"
	"text/template/parse"
)

// chatData is one chat request as Ollama's chat handler sees it.
type chatData struct {
	Messages []message `json:"messages"`
	Tools    []tool    `json:"tools"`
	Think    *bool     `json:"think"`
	Level    string    `json:"think_level"`
}

type message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Thinking  string     `json:"thinking,omitempty"`
	Images    [][]byte   `json:"images,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	ToolName  string     `json:"tool_name,omitempty"`
	ToolID    string     `json:"tool_call_id,omitempty"`
}

func (m *message) UnmarshalJSON(b []byte) error {
	type plain message
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*m = message(p)
	m.Role = strings.ToLower(m.Role)
	return nil
}

type toolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int            `json:"index"`
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string `json:"type"`
	Items    any    `json:"items,omitempty"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Parameters  struct {
			Type       string      `json:"type"`
			Defs       any         `json:"$defs,omitempty"`
			Items      any         `json:"items,omitempty"`
			Required   []string    `json:"required,omitempty"`
			Properties *orderedMap `json:"properties"`
		} `json:"parameters"`
	} `json:"function"`
}

// ---- the types a template sees (field names, order, JSON tags and String
// methods as in Ollama's template package)

type tmplMessage struct {
	Role       string
	Content    string
	Thinking   string
	Images     []imageData
	ToolCalls  []tmplToolCall
	ToolName   string
	ToolCallID string
}

type imageData []byte

type tmplToolCall struct {
	ID       string
	Function tmplToolCallFunction
}

type tmplToolCallFunction struct {
	Index     int
	Name      string
	Arguments tmplArgs
}

type tmplArgs map[string]any

func (t tmplArgs) String() string {
	if t == nil {
		return "{}"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

type tmplTools []tmplTool

func (t tmplTools) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

type tmplTool struct {
	Type     string           `json:"type"`
	Items    any              `json:"items,omitempty"`
	Function tmplToolFunction `json:"function"`
}

func (t tmplTool) String() string {
	b, _ := json.Marshal(t)
	return string(b)
}

type tmplToolFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Parameters  tmplParameters `json:"parameters"`
}

type tmplParameters struct {
	Type       string         `json:"type"`
	Defs       any            `json:"$defs,omitempty"`
	Items      any            `json:"items,omitempty"`
	Required   []string       `json:"required,omitempty"`
	Properties tmplProperties `json:"properties"`
}

type tmplProperties map[string]toolProperty

func (t tmplProperties) String() string {
	if t == nil {
		return "{}"
	}
	b, _ := json.Marshal(t)
	return string(b)
}

type propertyType []string

func (p *propertyType) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = []string{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*p = list
	return nil
}

func (p propertyType) MarshalJSON() ([]byte, error) {
	if len(p) == 1 {
		return json.Marshal(p[0])
	}
	return json.Marshal([]string(p))
}

func (p propertyType) String() string {
	switch len(p) {
	case 0:
		return ""
	case 1:
		return p[0]
	}
	return fmt.Sprintf("%v", []string(p))
}

type toolProperty struct {
	AnyOf       []toolProperty `json:"anyOf,omitempty"`
	Type        propertyType   `json:"type,omitempty"`
	Items       any            `json:"items,omitempty"`
	Description string         `json:"description,omitempty"`
	Enum        []any          `json:"enum,omitempty"`
	Properties  *orderedMap    `json:"properties,omitempty"`
	Required    []string       `json:"required,omitempty"`
}

func (p toolProperty) typeScript() string {
	if len(p.AnyOf) > 0 {
		var parts []string
		for _, a := range p.AnyOf {
			parts = append(parts, a.typeScript())
		}
		return strings.Join(parts, " | ")
	}
	if len(p.Type) == 0 {
		return "any"
	}
	var parts []string
	for _, t := range p.Type {
		parts = append(parts, tsName(t))
	}
	return strings.Join(parts, " | ")
}

func tsName(t string) string {
	switch t {
	case "string":
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "array":
		return "any[]"
	case "object":
		return "Record<string, any>"
	case "null":
		return "null"
	}
	return "any"
}

// orderedMap keeps JSON object keys in their written order (tool properties).
type orderedMap struct {
	keys   []string
	values map[string]toolProperty
}

func (o *orderedMap) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	o.values = map[string]toolProperty{}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		var p toolProperty
		if err := dec.Decode(&p); err != nil {
			return err
		}
		o.keys = append(o.keys, key)
		o.values[key] = p
	}
	return nil
}

func (o orderedMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("{")
	for i, k := range o.keys {
		if i > 0 {
			b.WriteString(",")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.values[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(":")
		b.Write(vb)
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// ---- Ollama's chat rendering

// tagImages prefixes each message's content with one [img-N] per image
// (or fills a "[img]" the user wrote), N counting images across the chat.
func tagImages(msgs []message) {
	n := 0
	for i := range msgs {
		prefix, content := "", msgs[i].Content
		for range msgs[i].Images {
			tag := fmt.Sprintf("[img-%d]", n)
			n++
			if !strings.Contains(content, "[img]") {
				prefix += tag
			} else {
				content = strings.Replace(content, "[img]", tag, 1)
			}
		}
		msgs[i].Content = prefix + content
	}
}

// collate joins the system messages and merges consecutive same-role messages
// (not tool results) into the first one's content.
func collate(msgs []message) (string, []*message) {
	var system []string
	var out []*message
	for i := range msgs {
		if msgs[i].Role == "system" {
			system = append(system, msgs[i].Content)
		}
		if len(out) > 0 && out[len(out)-1].Role == msgs[i].Role && msgs[i].Role != "tool" {
			out[len(out)-1].Content += "\n\n" + msgs[i].Content
		} else {
			out = append(out, &msgs[i])
		}
	}
	return strings.Join(system, "\n\n"), out
}

func templateMessages(msgs []*message) []*tmplMessage {
	if msgs == nil {
		return nil
	}
	out := make([]*tmplMessage, len(msgs))
	for i, m := range msgs {
		var calls []tmplToolCall
		for _, c := range m.ToolCalls {
			calls = append(calls, tmplToolCall{ID: c.ID, Function: tmplToolCallFunction{
				Index: c.Function.Index, Name: c.Function.Name, Arguments: tmplArgs(c.Function.Arguments),
			}})
		}
		var images []imageData
		for _, img := range m.Images {
			images = append(images, imageData(img))
		}
		out[i] = &tmplMessage{Role: m.Role, Content: m.Content, Thinking: m.Thinking, Images: images,
			ToolCalls: calls, ToolName: m.ToolName, ToolCallID: m.ToolID}
	}
	return out
}

func templateTools(tools []tool) tmplTools {
	if tools == nil {
		return nil
	}
	out := make(tmplTools, len(tools))
	for i, t := range tools {
		var props tmplProperties
		if t.Function.Parameters.Properties != nil {
			props = tmplProperties(t.Function.Parameters.Properties.values)
		}
		out[i] = tmplTool{Type: t.Type, Items: t.Items, Function: tmplToolFunction{
			Name: t.Function.Name, Description: t.Function.Description,
			Parameters: tmplParameters{
				Type: t.Function.Parameters.Type, Defs: t.Function.Parameters.Defs,
				Items: t.Function.Parameters.Items, Required: t.Function.Parameters.Required,
				Properties: props,
			},
		}}
	}
	return out
}

func executeChat(t *template.Template, w io.Writer, chat chatData) error {
	tagImages(chat.Messages)
	system, msgs := collate(chat.Messages)
	vars, err := identifiers(t)
	if err != nil {
		return err
	}
	think := chat.Think != nil && *chat.Think
	if contains(vars, "messages") {
		return t.Execute(w, map[string]any{
			"System": system, "Messages": templateMessages(msgs), "Tools": templateTools(chat.Tools),
			"Response": "", "Think": think, "ThinkLevel": chat.Level, "IsThinkSet": chat.Think != nil,
		})
	}

	system = ""
	var b bytes.Buffer
	var prompt, response string
	values := func() map[string]any {
		return map[string]any{"System": system, "Prompt": prompt, "Response": response,
			"Think": think, "ThinkLevel": chat.Level, "IsThinkSet": chat.Think != nil}
	}
	flush := func() error {
		if err := t.Execute(&b, values()); err != nil {
			return err
		}
		system, prompt, response = "", "", ""
		return nil
	}
	for _, m := range msgs {
		switch m.Role {
		case "system":
			if prompt != "" || response != "" {
				if err := flush(); err != nil {
					return err
				}
			}
			system = m.Content
		case "user":
			if response != "" {
				if err := flush(); err != nil {
					return err
				}
			}
			prompt = m.Content
		case "assistant":
			response = m.Content
		}
	}

	cut := false
	root := cutAfterResponse(t.Tree.Root.Copy(), func(n parse.Node) bool {
		if f, ok := n.(*parse.FieldNode); ok && contains(f.Ident, "Response") {
			cut = true
			return false
		}
		return cut
	})
	last, err := template.New("").AddParseTree("", &parse.Tree{Root: root.(*parse.ListNode)})
	if err != nil {
		return err
	}
	if err := last.Execute(&b, values()); err != nil {
		return err
	}
	_, err = io.Copy(w, &b)
	return err
}

// cutAfterResponse removes every node after the first .Response field
// (depth first), dropping commands and actions left empty.
func cutAfterResponse(n parse.Node, drop func(parse.Node) bool) parse.Node {
	var walk func(parse.Node) parse.Node
	walk = func(n parse.Node) parse.Node {
		if drop(n) {
			return nil
		}
		switch t := n.(type) {
		case *parse.ListNode:
			var kept []parse.Node
			for _, c := range t.Nodes {
				if k := walk(c); k != nil {
					kept = append(kept, k)
				}
			}
			t.Nodes = kept
			return t
		case *parse.IfNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.WithNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.RangeNode:
			t.BranchNode = *walk(&t.BranchNode).(*parse.BranchNode)
		case *parse.BranchNode:
			t.List = walk(t.List).(*parse.ListNode)
			if t.ElseList != nil {
				t.ElseList = walk(t.ElseList).(*parse.ListNode)
			}
		case *parse.ActionNode:
			p := walk(t.Pipe)
			if p == nil {
				return nil
			}
			t.Pipe = p.(*parse.PipeNode)
		case *parse.PipeNode:
			var cmds []*parse.CommandNode
			for _, c := range t.Cmds {
				var args []parse.Node
				for _, a := range c.Args {
					if k := walk(a); k != nil {
						args = append(args, k)
					}
				}
				if len(args) == 0 {
					return nil
				}
				c.Args = args
				cmds = append(cmds, c)
			}
			if len(cmds) == 0 {
				return nil
			}
			t.Cmds = cmds
		}
		return n
	}
	return walk(n)
}
