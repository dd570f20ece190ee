package chat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// maxModelAnswer caps a model's whole answer, and one line of a streamed one.
const maxModelAnswer = 8 << 20

// ModelError is a model server that failed or could not be reached, or an
// agent run out of time. Message is what the client is told: what failed,
// without the server's address or credentials; Detail (logged, never
// sent) says the rest.
type ModelError struct{ Message, Detail string }

func (e *ModelError) Error() string { return e.Message }

// maxModelMessage caps the model server's own words passed on to a client.
const maxModelMessage = 300

// reply is one answer of the model: its message (text, tool calls), why it
// stopped, and what it cost.
type reply struct {
	Message      Message
	FinishReason string
	Usage        *Usage
}

// model talks to an OpenAI-compatible chat-completions server.
type model struct {
	url    string // .../chat/completions
	name   string
	apiKey string
	client *http.Client
}

// complete asks the model for its next message. With onText it streams
// the answer and calls onText with each piece of text as it comes.
func (m *model) complete(ctx context.Context, req modelRequest, onText func(string)) (reply, error) {
	req.Model = m.name
	req.Stream = onText != nil
	if req.Stream {
		req.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return reply{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	if m.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	resp, err := m.client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return reply{}, ctx.Err()
		}
		return reply{}, &ModelError{Message: "cannot reach the model server (GANTRY_LLM_URL)", Detail: redact(err.Error(), m.apiKey)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return reply{}, &ModelError{Message: fmt.Sprintf("the model server answered %d: %s", resp.StatusCode, clip(redact(errorText(b), m.apiKey)))}
	}
	ctype := resp.Header.Get("Content-Type")
	if req.Stream && strings.HasPrefix(ctype, "text/event-stream") {
		return readStream(resp.Body, onText)
	}
	// A server that ignores stream: true answers whole; so do the others.
	var c Completion
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxModelAnswer))
	if err := dec.Decode(&c); err != nil {
		return reply{}, &ModelError{Message: "the model server's answer is not a chat completion: " + err.Error()}
	}
	if len(c.Choices) == 0 {
		return reply{}, &ModelError{Message: "the model server's answer has no choices"}
	}
	ch := c.Choices[0]
	if onText != nil && ch.Message.Content != "" {
		onText(string(ch.Message.Content))
	}
	ch.Message.Role = "assistant"
	return reply{Message: ch.Message, FinishReason: ch.FinishReason, Usage: c.Usage}, nil
}

// readStream reads a streamed answer (server-sent events of
// chat.completion.chunk objects, ending with [DONE]) into one reply,
// assembling tool calls from their pieces by index.
func readStream(r io.Reader, onText func(string)) (reply, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxModelAnswer)
	var (
		text  strings.Builder
		calls []ToolCall
		args  []*strings.Builder // calls' arguments as they come
		size  int                // of the text and every call's pieces
		out   reply
		done  bool
	)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // comments, event names, blank separators
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			done = true
			break
		}
		var c struct {
			Chunk
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return reply{}, &ModelError{Message: "the model server sent a chunk that is not JSON: " + err.Error()}
		}
		if c.Error != nil {
			return reply{}, &ModelError{Message: "the model server failed: " + clip(c.Error.Message)}
		}
		if c.Usage != nil {
			out.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Index != 0 {
				continue
			}
			if size += len(ch.Delta.Content); size > maxModelAnswer {
				return reply{}, &ModelError{Message: "the model's answer is too long"}
			}
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				onText(ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				i := len(calls) - 1
				if tc.Index != nil {
					i = *tc.Index
				} else if tc.ID != "" || i < 0 {
					i = len(calls)
				}
				if i < 0 || i > len(calls) || i >= maxToolCallsPerStep {
					return reply{}, &ModelError{Message: fmt.Sprintf("the model server sent tool call index %d out of order", i)}
				}
				if size += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments); size > maxModelAnswer {
					return reply{}, &ModelError{Message: "the model's answer is too long"}
				}
				if i == len(calls) {
					calls = append(calls, ToolCall{Type: "function"})
					args = append(args, &strings.Builder{})
				}
				call := &calls[i]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Function.Name += tc.Function.Name
				args[i].WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				out.FinishReason = *ch.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		return reply{}, &ModelError{Message: "reading the model's streamed answer: " + err.Error()}
	}
	if !done && out.FinishReason == "" {
		return reply{}, &ModelError{Message: "the model's streamed answer ended early"}
	}
	for i := range calls {
		calls[i].Function.Arguments = args[i].String()
	}
	out.Message = Message{Role: "assistant", Content: Content(text.String()), ToolCalls: calls}
	return out, nil
}

// maxToolCallsPerStep caps the tool calls of one model answer.
const maxToolCallsPerStep = 16

// errorText is the message of an OpenAI-style error body, else the body.
func errorText(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(no message)"
	}
	return s
}

// clip cuts a message of the model server's to maxModelMessage bytes.
func clip(s string) string {
	if len(s) <= maxModelMessage {
		return s
	}
	return strings.ToValidUTF8(s[:maxModelMessage], "") + "…"
}

// redact removes the model server's key from a message.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// isModelError reports whether err is the model's failure.
func isModelError(err error) bool {
	var me *ModelError
	return errors.As(err, &me)
}
