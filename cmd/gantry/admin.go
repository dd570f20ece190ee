package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/ingress"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

func openStore(ctx context.Context, cfg config) (*store.Store, error) {
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func runTenants(ctx context.Context, cfg config, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case args[0] == "create" && len(args) == 2:
		t, err := st.CreateTenant(ctx, args[1])
		if err != nil {
			return err
		}
		fmt.Printf("created tenant %s (%s)\nnext: gantry keys create %s\n", t.Name, t.ID, t.Name)
		return nil
	case args[0] == "list" && len(args) == 1:
		ts, err := st.ListTenants(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tCREATED")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.ID, t.CreatedAt.Format("2006-01-02 15:04"))
		}
		return tw.Flush()
	}
	return errUsage
}

func runKeys(ctx context.Context, cfg config, args []string) error {
	if len(args) < 2 {
		return errUsage
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	tenantByName := func(name string) (store.Tenant, error) {
		t, err := st.TenantByName(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return t, fmt.Errorf("no tenant named %q (gantry tenants list)", name)
		}
		return t, err
	}
	switch {
	case args[0] == "create" && (len(args) == 2 || len(args) == 3):
		t, err := tenantByName(args[1])
		if err != nil {
			return err
		}
		label := ""
		if len(args) == 3 {
			label = args[2]
		}
		key, k, err := st.CreateAPIKey(ctx, t.ID, label)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "created key %s for tenant %s; it is shown only now:\n", k.ID, t.Name)
		fmt.Println(key)
		return nil
	case args[0] == "list" && len(args) == 2:
		t, err := tenantByName(args[1])
		if err != nil {
			return err
		}
		keys, err := st.ListAPIKeys(ctx, t.ID)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tLABEL\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.Format("2006-01-02 15:04")
			}
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.CreatedAt.Format("2006-01-02 15:04"), revoked)
		}
		return tw.Flush()
	case args[0] == "revoke" && len(args) == 2:
		rk, err := st.RevokeAPIKey(ctx, args[1])
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no active key with id %s", args[1])
			}
			return err
		}
		fmt.Println("revoked", args[1])
		if err := announceRevocation(cfg.NATSURL, rk); err != nil {
			fmt.Fprintf(os.Stderr, "warning: the key is revoked, but the ingresses could not be told through NATS at %s (%v): "+
				"an ingress that checked the key in the last %s may accept it until that check expires\n", cfg.NATSURL, err, ingress.KeyCacheTTL)
		}
		return nil
	}
	return errUsage
}

// announceRevocation tells every ingress (and runner) listening on NATS that
// a key was revoked, so that none keeps accepting it from its cache.
func announceRevocation(natsURL string, rk store.RevokedKey) error {
	nc, err := nats.Connect(natsURL, nats.Name("gantry keys revoke"), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	data, _ := json.Marshal(jobs.KeyRevoked{KeyID: rk.ID, TenantID: rk.TenantID, KeyEpoch: rk.KeyEpoch})
	if err := nc.Publish(jobs.KeyRevokedSubject, data); err != nil {
		return err
	}
	return nc.FlushTimeout(2 * time.Second)
}
