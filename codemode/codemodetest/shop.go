package codemodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ShopTools is how many tools the Shop fixture lists.
const ShopTools = 60

// ShopOrdersPerCustomer is how many orders each Shop customer has: a
// customer's order history is a large result, as real order APIs return.
const ShopOrdersPerCustomer = 150

// ShopEmails are the Shop fixture's customers.
var ShopEmails = []string{"ada@example.com", "grace@example.com", "alan@example.com"}

var shopNames = []string{"Ada Lovelace", "Grace Hopper", "Alan Turing"}

// shopCustomer is a customer record as the Shop returns it.
func shopCustomer(i int) map[string]any {
	first, last, _ := strings.Cut(shopNames[i], " ")
	return map[string]any{
		"id": 1001 + i, "name": shopNames[i], "email": ShopEmails[i], "phone": fmt.Sprintf("+44 20 7946 %04d", 958+i),
		"tier": []string{"gold", "silver", "gold"}[i], "created_at": time.Date(2019, time.Month(3+i), 4, 10, 0, 0, 0, time.UTC),
		"billing_address":    shopAddress(i, 0),
		"shipping_addresses": []any{shopAddress(i, 0), shopAddress(i, 1)},
		"account_manager":    map[string]any{"id": 77 + i, "name": "Sam Rivera", "email": "sam.rivera@shop.example"},
		"marketing_consent":  i%2 == 0, "preferred_language": "en-GB",
		"tags":  []string{"b2c", "newsletter", "loyalty-" + []string{"gold", "silver", "gold"}[i]},
		"notes": fmt.Sprintf("%s %s prefers delivery before noon; call ahead for large parcels.", first, last),
	}
}

func shopAddress(customer, n int) map[string]any {
	streets := []string{"Baker Street", "Mill Lane", "Station Road", "Church Street", "High Street", "Park Avenue"}
	cities := []string{"London", "Manchester", "Cambridge", "Leeds", "Bristol", "Oxford"}
	k := customer*2 + n
	return map[string]any{"line1": fmt.Sprintf("%d %s", 10+7*k, streets[k%len(streets)]), "line2": "",
		"city": cities[k%len(cities)], "postcode": fmt.Sprintf("SW%d %dAA", 1+k, 2+k), "country": "GB"}
}

var (
	shopProducts = []string{"USB-C cable 2 m", "Mechanical keyboard", "27-inch monitor", "Laptop stand", "Noise-cancelling headphones",
		"Webcam 1080p", "Desk lamp", "Ergonomic mouse", "Docking station", "Portable SSD 1 TB", "Notebook A5", "Fountain pen"}
	shopStatuses = []string{"delivered", "delivered", "delivered", "shipped", "late", "processing", "cancelled", "late"}
	shopCarriers = []string{"DHL", "UPS", "Royal Mail", "DPD"}
)

// ShopOrders returns the orders of the customer with the given id: the
// same every time (a fixed seed), so sizes and answers are exact.
func ShopOrders(customerID int) []map[string]any {
	i := customerID - 1001
	if i < 0 || i >= len(ShopEmails) {
		return []map[string]any{}
	}
	rng := rand.New(rand.NewPCG(uint64(customerID), 42))
	out := make([]map[string]any, 0, ShopOrdersPerCustomer)
	for n := range ShopOrdersPerCustomer {
		placed := time.Date(2024, 1, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(n*53+rng.IntN(48)) * time.Hour)
		var lines []any
		total := 0.0
		for range 2 + rng.IntN(3) {
			qty := 1 + rng.IntN(3)
			price := float64(500+rng.IntN(20000)) / 100
			p := rng.IntN(len(shopProducts))
			lines = append(lines, map[string]any{"sku": fmt.Sprintf("SKU-%05d", 10000+p*37), "name": shopProducts[p], "quantity": qty, "unit_price": price})
			total += float64(qty) * price
		}
		status := shopStatuses[rng.IntN(len(shopStatuses))]
		out = append(out, map[string]any{
			"id": customerID*1000 + n, "number": fmt.Sprintf("SO-2024-%06d", customerID*1000+n), "customer_id": customerID,
			"status": status, "placed_at": placed, "promised_at": placed.Add(72 * time.Hour),
			"currency": "EUR", "total": float64(int(total*100+0.5)) / 100, "lines": lines,
			"shipping": map[string]any{"carrier": shopCarriers[rng.IntN(len(shopCarriers))], "tracking": fmt.Sprintf("TRK%010d", rng.IntN(1e10)),
				"address": shopAddress(i, n%2)},
			"payment": map[string]any{"method": "card", "last4": fmt.Sprintf("%04d", 1000+rng.IntN(9000)), "status": "captured"},
		})
	}
	return out
}

// ShopAnswer is the answer to the Shop task: for each customer, the number
// and total of the late orders, one line each.
func ShopAnswer() string {
	var b strings.Builder
	for i, email := range ShopEmails {
		n, sum := 0, 0.0
		for _, o := range ShopOrders(1001 + i) {
			if o["status"] == "late" {
				n++
				sum += o["total"].(float64)
			}
		}
		fmt.Fprintf(&b, "%s <%s>: %d late orders, %.2f EUR\n", shopNames[i], email, n, sum)
	}
	return b.String()
}

// Shop returns an online shop's MCP server with ShopTools tools, most of
// them with several documented arguments, as a real shop or CRM server has:
// customers, orders, products, inventory, invoices, shipments, returns,
// tickets... Only find_customer and list_orders answer with data; a
// customer's order history is large (about 100 KB of JSON).
func Shop() *server.MCPServer {
	s := server.NewMCPServer("shop-fixture", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("find_customer",
		mcp.WithDescription("Find a customer by e-mail address. Returns the customer's id, name, contact details, addresses, tier and notes."),
		mcp.WithString("email", mcp.Required(), mcp.Description("The customer's e-mail address")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"email":{"type":"string"},"tier":{"type":"string"}}}`)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		email := req.GetString("email", "")
		for i, e := range ShopEmails {
			if strings.EqualFold(e, email) {
				return structured(shopCustomer(i)), nil
			}
		}
		return mcp.NewToolResultError("no customer with e-mail " + email), nil
	})
	s.AddTool(mcp.NewTool("list_orders",
		mcp.WithDescription("List all orders of a customer, newest last, with lines, totals, shipping and payment details and status (processing, shipped, delivered, late, cancelled)."),
		mcp.WithNumber("customer_id", mcp.Required(), mcp.Description("The customer's id")),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithRawOutputSchema(json.RawMessage(`{"type":"object","properties":{"orders":{"type":"array","items":{"type":"object"}}}}`)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return structured(map[string]any{"orders": ShopOrders(int(req.GetFloat("customer_id", 0)))}), nil
	})

	// The rest of a shop's surface: each tool with the arguments such a tool
	// takes, described as a generated server describes them.
	topics := []struct{ noun, desc string }{
		{"product", "a catalogue product (SKU, title, price, stock)"},
		{"inventory_item", "stock of a product in a warehouse"},
		{"invoice", "an invoice sent to a customer"},
		{"shipment", "a parcel handed to a carrier"},
		{"return", "a returned order line and its refund"},
		{"ticket", "a customer support ticket"},
		{"coupon", "a discount code and its rules"},
		{"review", "a customer's product review"},
		{"supplier", "a supplier of products"},
		{"warehouse", "a warehouse and its address"},
		{"price_list", "prices for a market or customer group"},
		{"subscription", "a customer's recurring order"},
		{"gift_card", "a prepaid gift card"},
		{"campaign", "a marketing campaign"},
		{"webhook", "a webhook subscription to shop events"},
	}
	verbs := []struct{ verb, what string }{
		{"get", "Get %s by id."},
		{"list", "List %ss, filtered and paginated."},
		{"create", "Create %s."},
		{"update", "Update fields of %s."},
	}
	for _, t := range topics {
		for _, v := range verbs {
			if len(s.ListTools()) >= ShopTools {
				break
			}
			name := v.verb + "_" + t.noun
			opts := []mcp.ToolOption{mcp.WithDescription(fmt.Sprintf(v.what, t.desc) + " Requires the shop:" + t.noun + " scope.")}
			switch v.verb {
			case "get":
				opts = append(opts, mcp.WithString("id", mcp.Required(), mcp.Description("The "+t.noun+"'s id")),
					mcp.WithBoolean("include_history", mcp.Description("Include the change history")))
			case "list":
				opts = append(opts, mcp.WithNumber("limit", mcp.Description("Page size, 1 to 200 (default 50)")),
					mcp.WithString("cursor", mcp.Description("Cursor from the previous page")),
					mcp.WithString("sort", mcp.Enum("created_at", "updated_at", "name"), mcp.Description("Sort order")),
					mcp.WithString("updated_since", mcp.Description("Only records changed after this RFC 3339 time")))
			case "create", "update":
				if v.verb == "update" {
					opts = append(opts, mcp.WithString("id", mcp.Required(), mcp.Description("The "+t.noun+"'s id")))
				}
				opts = append(opts, mcp.WithObject("fields", mcp.Required(), mcp.Description("The "+t.noun+"'s fields to set, as in get_"+t.noun)),
					mcp.WithString("idempotency_key", mcp.Description("Makes a retried request safe")))
			}
			s.AddTool(mcp.NewTool(name, opts...), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name + ": nothing to show in the fixture"), nil
			})
		}
	}
	return s
}

// structured answers with v as structured content and as JSON text, as MCP
// servers with an output schema do.
func structured(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return mcp.NewToolResultStructured(v, string(b))
}
