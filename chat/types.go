package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// The OpenAI chat-completions wire format, as far as gantry speaks it: to
// the model (requests with tools, answers whole or as chunks) and to its
// own clients (POST /v1/agent/chat/completions).

// Message is one message of a conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Content is a message's text. On the wire it is a string, null, or (from
// clients) an array of parts, of which the text parts are kept.
type Content string

// MarshalJSON writes the text as a string.
func (c Content) MarshalJSON() ([]byte, error) { return json.Marshal(string(c)) }

// UnmarshalJSON reads a string, null, or an array of {"type": "text",
// "text": "..."} parts (joined); other part types are refused.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content(s)
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			if p.Type != "text" {
				return errors.New("only text content parts are supported, not " + strings.TrimSpace(p.Type))
			}
			sb.WriteString(p.Text)
		}
		*c = Content(sb.String())
		return nil
	}
	return errors.New("content must be a string or an array of text parts")
}

// ToolCall is a function call the model asks for. In streamed chunks the
// fields come in pieces keyed by Index.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Tool is a function offered to the model.
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec describes a function: its name, what it does, and the JSON
// Schema of its arguments.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *Usage) add(o *Usage) {
	if o == nil {
		return
	}
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens += o.TotalTokens
}

// modelRequest is what gantry sends the model.
type modelRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	MaxTokens     *int           `json:"max_tokens,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Completion is a whole answer (object "chat.completion").
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
	// Gantry is gantry's own account of the loop (absent from the model's
	// answers); OpenAI clients ignore it.
	Gantry *Trace `json:"gantry,omitempty"`
}

// Choice is one answer of a completion.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// Chunk is a piece of a streamed answer (object "chat.completion.chunk").
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	// Gantry carries the loop's progress (a tool call starting or done);
	// the choice's delta is then empty.
	Gantry *Event `json:"gantry,omitempty"`
}

// ChunkChoice is one answer's piece.
type ChunkChoice struct {
	Index        int     `json:"index"`
	Delta        Delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// Delta is what a chunk adds to the answer.
type Delta struct {
	Role      string     `json:"role,omitempty"`
	Content   string     `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}
