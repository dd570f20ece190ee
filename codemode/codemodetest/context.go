package codemodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ShopCode is the program an agent writes for the Shop task through gantry:
// it calls the upstream tools in the sandbox and prints one line per
// customer.
const ShopCode = `from servers.shop import find_customer, list_orders
for email in ["ada@example.com", "grace@example.com", "alan@example.com"]:
    c = find_customer(email=email)
    late = [o for o in list_orders(customer_id=c["id"])["orders"] if o["status"] == "late"]
    print(f"{c['name']} <{email}>: {len(late)} late orders, {sum(o['total'] for o in late):.2f} EUR")
`

// Exchange is what one way of doing the Shop task costs. ModelBytes counts
// what an MCP client puts into the model's context: each listed tool's
// name, description and input schema (what model APIs take as a tool
// definition), each call's name and arguments, and the text content of
// each result (the spec has structured results repeated as text, and
// clients give the model the text). WireBytes counts the JSON of the
// tools/list result and of each call's parameters and result, as sent.
type Exchange struct {
	ModelBytes int
	WireBytes  int
	// Steps is the model bytes of each step, in order: "tools/list (60
	// tools)", "find_customer", ...
	Steps []Step
	// Answer is what the agent learnt: the program's output, or (direct)
	// the answer computed from the results the model was shown.
	Answer string
}

// Step is one step of an Exchange.
type Step struct {
	Name       string
	ModelBytes int
	WireBytes  int
}

func (e *Exchange) add(name string, model, wire int) {
	e.Steps = append(e.Steps, Step{name, model, wire})
	e.ModelBytes += model
	e.WireBytes += wire
}

// ContextCost compares the Shop task done with direct tool calls against
// gantry's code mode with toolsets=code.
type ContextCost struct {
	Direct, Gantry Exchange
	// AllTools is the model bytes of gantry's tools/list without a toolset
	// selection (every tool), for comparison.
	AllTools int
}

// Saved is the share of the direct exchange's model bytes that gantry
// saves (0.99 is 99%).
func (c ContextCost) Saved() float64 {
	return 1 - float64(c.Gantry.ModelBytes)/float64(c.Direct.ModelBytes)
}

// SavedWire is Saved for wire bytes.
func (c ContextCost) SavedWire() float64 {
	return 1 - float64(c.Gantry.WireBytes)/float64(c.Direct.WireBytes)
}

// MeasureContext does the Shop task both ways: as an agent connected
// straight to the Shop server at shopURL (list its tools; find each of the
// three customers; list each one's orders), and as an agent connected to
// the gantry at gantryURL with toolsets=code (list gantry's tools; search
// for the two tools it needs with their schemas; run ShopCode). It
// registers the Shop with gantry as "shop" for the tenant of apiKey and
// removes it after. Both answers are checked against ShopAnswer.
func MeasureContext(ctx context.Context, gantryURL, apiKey, shopURL string) (ContextCost, error) {
	var cost ContextCost
	var err error
	if cost.Direct, err = measureDirect(ctx, shopURL); err != nil {
		return cost, fmt.Errorf("direct: %w", err)
	}
	if cost.Gantry, err = measureGantry(ctx, gantryURL, apiKey, shopURL); err != nil {
		return cost, fmt.Errorf("gantry: %w", err)
	}
	var all Exchange
	c, _, err := connectAndList(ctx, gantryURL+"/mcp", apiKey, &all)
	if err != nil {
		return cost, fmt.Errorf("gantry: %w", err)
	}
	c.Close()
	cost.AllTools = all.ModelBytes
	for name, ex := range map[string]Exchange{"direct": cost.Direct, "gantry": cost.Gantry} {
		if ex.Answer != ShopAnswer() {
			return cost, fmt.Errorf("%s: the answer is %q, want %q", name, ex.Answer, ShopAnswer())
		}
	}
	return cost, nil
}

// connectAndList connects an MCP client with the bearer token, lists the
// tools (adding their cost to ex) and returns their names, sorted.
func connectAndList(ctx context.Context, url, token string, ex *Exchange) (*client.Client, []string, error) {
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		return nil, nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "context-measure", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		c.Close()
		return nil, nil, err
	}
	names, err := listTools(ctx, c, ex)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, names, nil
}

// listTools lists the tools and adds their cost.
func listTools(ctx context.Context, c *client.Client, ex *Exchange) ([]string, error) {
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	wire := marshal(res)
	model := 0
	var names []string
	for _, t := range res.Tools {
		raw, _ := json.Marshal(t)
		var def struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		_ = json.Unmarshal(raw, &def)
		model += len(marshal(map[string]any{"name": t.Name, "description": t.Description, "input_schema": def.InputSchema}))
		names = append(names, t.Name)
	}
	sort.Strings(names)
	ex.add(fmt.Sprintf("tools/list (%d tools)", len(res.Tools)), model, len(wire))
	return names, nil
}

// callTool calls a tool, adds its cost and returns its text.
func callTool(ctx context.Context, c *client.Client, ex *Exchange, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var text strings.Builder
	for _, content := range res.Content {
		if tc, ok := content.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: %s", name, text.String())
	}
	call := marshal(map[string]any{"name": name, "arguments": args})
	wire := marshal(res)
	ex.add(name, len(call)+text.Len(), len(call)+len(wire))
	return text.String(), nil
}

func measureDirect(ctx context.Context, shopURL string) (Exchange, error) {
	var ex Exchange
	c, names, err := connectAndList(ctx, shopURL, Token, &ex)
	if err != nil {
		return ex, err
	}
	defer c.Close()
	if len(names) != ShopTools {
		return ex, fmt.Errorf("the shop lists %d tools, want %d", len(names), ShopTools)
	}
	// The model reads each result and works the answer out itself; here
	// the same answer is computed from exactly the text it was shown.
	var answer strings.Builder
	for _, email := range ShopEmails {
		text, err := callTool(ctx, c, &ex, "find_customer", map[string]any{"email": email})
		if err != nil {
			return ex, err
		}
		var cust struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(text), &cust); err != nil {
			return ex, fmt.Errorf("find_customer answered %.100q: %w", text, err)
		}
		text, err = callTool(ctx, c, &ex, "list_orders", map[string]any{"customer_id": cust.ID})
		if err != nil {
			return ex, err
		}
		var orders struct {
			Orders []struct {
				Status string  `json:"status"`
				Total  float64 `json:"total"`
			} `json:"orders"`
		}
		if err := json.Unmarshal([]byte(text), &orders); err != nil {
			return ex, fmt.Errorf("list_orders answered %.100q: %w", text, err)
		}
		n, sum := 0, 0.0
		for _, o := range orders.Orders {
			if o.Status == "late" {
				n++
				sum += o.Total
			}
		}
		fmt.Fprintf(&answer, "%s <%s>: %d late orders, %.2f EUR\n", cust.Name, email, n, sum)
	}
	ex.Answer = answer.String()
	return ex, nil
}

func measureGantry(ctx context.Context, gantryURL, apiKey, shopURL string) (Exchange, error) {
	var ex Exchange
	if err := gantryAPI(ctx, gantryURL, apiKey, "DELETE", "/v1/mcp-servers/shop", nil, http.StatusNoContent, http.StatusNotFound); err != nil {
		return ex, err
	}
	reg := map[string]any{"name": "shop", "description": "Online shop: customers, orders, products, invoices", "url": shopURL,
		"headers": map[string]string{"Authorization": "Bearer " + Token}}
	if err := gantryAPI(ctx, gantryURL, apiKey, "POST", "/v1/mcp-servers", reg, http.StatusCreated); err != nil {
		return ex, err
	}
	defer gantryAPI(context.WithoutCancel(ctx), gantryURL, apiKey, "DELETE", "/v1/mcp-servers/shop", nil, http.StatusNoContent) //nolint:errcheck

	c, names, err := connectAndList(ctx, gantryURL+"/mcp?toolsets=code", apiKey, &ex)
	if err != nil {
		return ex, err
	}
	defer c.Close()
	if got := strings.Join(names, " "); got != "execute_code get_artifact_url search_tools" {
		return ex, fmt.Errorf("toolsets=code lists %s", got)
	}
	found, err := callTool(ctx, c, &ex, "search_tools", map[string]any{"query": "customer orders", "detail": "full", "limit": 2})
	if err != nil {
		return ex, err
	}
	if !strings.Contains(found, "shop.find_customer") || !strings.Contains(found, "shop.list_orders") {
		return ex, fmt.Errorf("search_tools did not find the tools:\n%s", found)
	}
	out, err := callTool(ctx, c, &ex, "execute_code", map[string]any{"language": "python", "code": ShopCode})
	if err != nil {
		return ex, err
	}
	_, stdout, ok := strings.Cut(out, "--- stdout ---\n")
	if !ok || !strings.HasPrefix(out, "job ") || !strings.Contains(out, ": succeeded") {
		return ex, fmt.Errorf("execute_code answered:\n%s", out)
	}
	stdout, _, _ = strings.Cut(stdout, "--- stderr ---\n")
	ex.Answer = stdout
	return ex, nil
}

// marshal is v as compact JSON, as sent (without escaping <, > and &).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// gantryAPI makes one call of gantry's HTTP API and checks its status.
func gantryAPI(ctx context.Context, base, key, method, path string, body any, want ...int) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	for _, w := range want {
		if resp.StatusCode == w {
			return nil
		}
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
}
