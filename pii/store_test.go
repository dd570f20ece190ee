package pii_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/pii"
	"github.com/gantryhq/gantry/secret"
	"github.com/gantryhq/gantry/store"
	"github.com/gantryhq/gantry/store/storetest"
)

func newBox(t *testing.T) *secret.Box {
	t.Helper()
	key, _ := secret.ParseKey(secret.NewKey())
	box, err := secret.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return box
}

// The store is a Vault.
var _ pii.Vault = (*store.Store)(nil)

func TestTokenizerWithStore(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	b, _ := storetest.Tenant(t, st, "b")
	tk := pii.New(st, newBox(t), time.Hour)

	in := `{"customer":"Ada Lovelace","email":"Ada@Example.com","phone":"+44 20 7946 0958",` +
		`"card":"4111 1111 1111 1111","iban":"DE89 3704 0044 0532 0130 00","ssn":"078-05-1120","order":"ORD-2024-000123"}`
	out, err := tk.Tokenize(ctx, a, in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"customer":"Ada Lovelace","email":"[EMAIL_1]","phone":"[PHONE_1]",` +
		`"card":"[CARD_1]","iban":"[IBAN_1]","ssn":"[SSN_1]","order":"ORD-2024-000123"}`
	if out != want {
		t.Fatalf("Tokenize\n got %s\nwant %s", out, want)
	}
	// Stable: the same values written another way get the same tokens.
	again, err := tk.Tokenize(ctx, a, "ada@example.COM 4111-1111-1111-1111 de89370400440532013000 new@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if again != "[EMAIL_1] [CARD_1] [IBAN_1] [EMAIL_2]" {
		t.Fatalf("second Tokenize = %q", again)
	}
	// The model passes tokens into a tool call: values come back as first
	// seen; unknown tokens stay.
	call := `send_mail(to="[EMAIL_1]", cc="[EMAIL_2]", bcc="[EMAIL_7]", body="card [CARD_1], IBAN [IBAN_1]")`
	back, err := tk.Detokenize(ctx, a, call)
	if err != nil {
		t.Fatal(err)
	}
	if wantBack := `send_mail(to="Ada@Example.com", cc="new@example.com", bcc="[EMAIL_7]", body="card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00")`; back != wantBack {
		t.Fatalf("Detokenize\n got %s\nwant %s", back, wantBack)
	}
	if full, _ := tk.Detokenize(ctx, a, out); full != in {
		t.Fatalf("round trip\n got %s\nwant %s", full, in)
	}

	// Tenant b cannot detokenize a's tokens, and numbers its own from 1.
	if got, _ := tk.Detokenize(ctx, b, call); got != call {
		t.Fatalf("tenant b detokenized a's tokens: %s", got)
	}
	if got, _ := tk.Tokenize(ctx, b, "grace@example.com"); got != "[EMAIL_1]" {
		t.Fatalf("tenant b Tokenize = %q", got)
	}
	if got, _ := tk.Detokenize(ctx, b, "[EMAIL_1]"); got != "grace@example.com" {
		t.Fatalf("tenant b Detokenize = %q", got)
	}
	// A sealed value copied into another tenant's row does not open.
	if err := storetest.Exec(st, `UPDATE pii_tokens SET value_sealed = (SELECT value_sealed FROM pii_tokens WHERE tenant_id = $1 AND kind = 'EMAIL' AND n = 1)
		WHERE tenant_id = $2 AND kind = 'EMAIL' AND n = 1`, a, b); err != nil {
		t.Fatal(err)
	}
	if got, err := tk.Detokenize(ctx, b, "[EMAIL_1]"); err == nil {
		t.Fatalf("opened a value copied from another tenant: %q", got)
	}
	// No value in the clear in the table.
	if err := storetest.Exec(st, `DO $$ BEGIN
		IF EXISTS (SELECT 1 FROM pii_tokens WHERE position('Example'::bytea IN value_sealed) > 0 OR position('4111'::bytea IN value_sealed) > 0) THEN
			RAISE EXCEPTION 'plaintext in pii_tokens';
		END IF; END $$`); err != nil {
		t.Fatal(err)
	}

	// Expired tokens stay tokens.
	if err := storetest.Exec(st, `UPDATE pii_tokens SET expires_at = now() - interval '1 second' WHERE tenant_id = $1 AND kind = 'CARD'`, a); err != nil {
		t.Fatal(err)
	}
	if got, _ := tk.Detokenize(ctx, a, "[CARD_1] [EMAIL_1]"); got != "[CARD_1] Ada@Example.com" {
		t.Fatalf("after expiry: %q", got)
	}
}

func TestTokenizerConcurrentWithStore(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := context.Background()
	a, _ := storetest.Tenant(t, st, "a")
	tk := pii.New(st, newBox(t), time.Hour)
	in := "a@example.com b@example.com c@example.com +1 555 123 4567 4111111111111111"
	outs := make([]string, 16)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := tk.Tokenize(ctx, a, in)
			if err != nil {
				t.Error(err)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	for _, o := range outs {
		if o != outs[0] {
			t.Fatalf("concurrent Tokenize differ: %q vs %q", o, outs[0])
		}
	}
	if strings.Count(outs[0], "[EMAIL_") != 3 || strings.Contains(outs[0], "@") {
		t.Fatalf("Tokenize = %q", outs[0])
	}
	if back, _ := tk.Detokenize(ctx, a, outs[0]); back != in {
		t.Fatalf("round trip = %q", back)
	}
}
