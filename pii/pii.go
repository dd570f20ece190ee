// Package pii keeps personal data out of the model's context. With privacy
// tokens on for a tenant, e-mail addresses, phone numbers, card numbers,
// IBANs and US social security numbers in what a job returns to the model
// are replaced by tokens such as [EMAIL_3] (Tokenize), and tokens the model
// passes into a later job or tool call are turned back into the values
// (Detokenize): personal data flows between tools without the model seeing
// it.
//
// Tokens are per tenant and stable: while a token lives, the same value
// (after Normalize) always gets the same token. A Vault (the store) keeps
// each value sealed with GANTRY_SECRET_KEY, bound to the tenant and kind,
// and found by a keyed hash, never in the clear; tokens expire a TTL after
// the value was last seen.
package pii

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/secret"
)

// DefaultTTL is how long a token lives after its value was last seen when
// New is given no TTL.
const DefaultTTL = 24 * time.Hour

// Ref names one of a tenant's tokens: its kind and number.
type Ref struct {
	Kind string
	N    int
}

// String is the token's text, e.g. "[EMAIL_3]".
func (r Ref) String() string { return Token(r.Kind, r.N) }

// Vault stores tokens; *store.Store is one.
type Vault interface {
	// PIIToken returns the number of the tenant's token for the value with
	// this hash, allocating the next one for the kind if there is none,
	// and keeps it live for at least ttl.
	PIIToken(ctx context.Context, tenantID, kind string, valueHash, sealed []byte, ttl time.Duration) (int, error)
	// PIIValues returns the sealed values of the tenant's live tokens
	// among refs; unknown, expired or foreign ones are absent.
	PIIValues(ctx context.Context, tenantID string, refs []Ref) (map[Ref][]byte, error)
}

// Tokenizer replaces personal data by tokens and back. It is safe for
// concurrent use.
type Tokenizer struct {
	vault Vault
	box   *secret.Box
	ttl   time.Duration
}

// New returns a Tokenizer storing tokens in v, with values sealed and
// hashed by box, living ttl (0: DefaultTTL) after their value was last
// seen.
func New(v Vault, box *secret.Box, ttl time.Duration) *Tokenizer {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Tokenizer{vault: v, box: box, ttl: ttl}
}

// tokenRE matches a token: [KIND_n] for a kind Find detects.
var tokenRE = regexp.MustCompile(`\[(` + strings.Join(Kinds, "|") + `)_([1-9][0-9]{0,9})\]`)

// Token returns the text of a token, e.g. "[EMAIL_3]".
func Token(kind string, n int) string { return "[" + kind + "_" + strconv.Itoa(n) + "]" }

// HasTokens reports whether text holds something shaped like a token.
func HasTokens(text string) bool { return tokenRE.MatchString(text) }

func hashContext(tenantID string) string       { return "pii:" + tenantID }
func sealContext(tenantID, kind string) string { return "pii:" + tenantID + ":" + kind }

// Tokenize replaces the personal data Find detects in text by the tenant's
// tokens. Text already shaped like a token is left as it is.
func (t *Tokenizer) Tokenize(ctx context.Context, tenantID, text string) (string, error) {
	ms := Find(text)
	if len(ms) == 0 {
		return text, nil
	}
	if !t.box.Enabled() {
		return "", secret.ErrNoKey
	}
	tokens := make(map[string]string, len(ms)) // kind \x00 normalised value -> token
	var b strings.Builder
	b.Grow(len(text))
	prev := 0
	for _, m := range ms {
		key := m.Kind + "\x00" + Normalize(m.Kind, m.Value)
		tok, ok := tokens[key]
		if !ok {
			hash, err := t.box.Hash([]byte(key), hashContext(tenantID))
			if err != nil {
				return "", err
			}
			sealed, err := t.box.Seal([]byte(m.Value), sealContext(tenantID, m.Kind))
			if err != nil {
				return "", err
			}
			n, err := t.vault.PIIToken(ctx, tenantID, m.Kind, hash, sealed, t.ttl)
			if err != nil {
				return "", fmt.Errorf("pii token: %w", err)
			}
			tok = Token(m.Kind, n)
			tokens[key] = tok
		}
		b.WriteString(text[prev:m.Start])
		b.WriteString(tok)
		prev = m.End
	}
	b.WriteString(text[prev:])
	return b.String(), nil
}

// Detokenize replaces the tenant's live tokens in text by their values as
// first seen. Unknown and expired tokens, and other tenants' tokens, are
// left as they are.
func (t *Tokenizer) Detokenize(ctx context.Context, tenantID, text string) (string, error) {
	locs := tokenRE.FindAllStringSubmatchIndex(text, -1)
	if len(locs) == 0 {
		return text, nil
	}
	refOf := func(loc []int) (Ref, bool) {
		n, err := strconv.Atoi(text[loc[4]:loc[5]])
		return Ref{Kind: text[loc[2]:loc[3]], N: n}, err == nil && n <= 1<<31-1
	}
	seen := make(map[Ref]bool, len(locs))
	refs := make([]Ref, 0, len(locs))
	for _, loc := range locs {
		if r, ok := refOf(loc); ok && !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	sealed, err := t.vault.PIIValues(ctx, tenantID, refs)
	if err != nil {
		return "", fmt.Errorf("pii values: %w", err)
	}
	if len(sealed) == 0 {
		return text, nil
	}
	values := make(map[Ref]string, len(sealed))
	for r, s := range sealed {
		v, err := t.box.Open(s, sealContext(tenantID, r.Kind))
		if err != nil {
			return "", fmt.Errorf("pii token %s: %w", r, err)
		}
		values[r] = string(v)
	}
	var b strings.Builder
	b.Grow(len(text))
	prev := 0
	for _, loc := range locs {
		r, ok := refOf(loc)
		v, found := values[r]
		if !ok || !found {
			continue
		}
		b.WriteString(text[prev:loc[0]])
		b.WriteString(v)
		prev = loc[1]
	}
	b.WriteString(text[prev:])
	return b.String(), nil
}

// TokenizeBytes is Tokenize for a byte slice.
func (t *Tokenizer) TokenizeBytes(ctx context.Context, tenantID string, data []byte) ([]byte, error) {
	s, err := t.Tokenize(ctx, tenantID, string(data))
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// DetokenizeBytes is Detokenize for a byte slice.
func (t *Tokenizer) DetokenizeBytes(ctx context.Context, tenantID string, data []byte) ([]byte, error) {
	s, err := t.Detokenize(ctx, tenantID, string(data))
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}
