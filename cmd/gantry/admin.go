package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
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
		fmt.Fprintln(tw, "NAME\tID\tCREATED\tREQUESTS/S\tMAX QUEUED\tMAX RUNNING\tMAX LIVE SESSIONS")
		for _, t := range ts {
			rps, queued, running, live := limitCells(t.Limits, cfg.TenantLimits)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.ID, t.CreatedAt.Format("2006-01-02 15:04"), rps, queued, running, live)
		}
		return tw.Flush()
	case args[0] == "set-limits" && len(args) >= 3:
		return setLimits(ctx, cfg, st, args[1], args[2:])
	}
	return errUsage
}

// limitCells shows a tenant's quotas, marking the operator's defaults.
func limitCells(l, def jobs.TenantLimits) (rps, queued, running, live string) {
	cell := func(v, d float64) string {
		if v == 0 {
			return strconv.FormatFloat(d, 'g', -1, 64) + " (default)"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return cell(l.RequestsPerSecond, def.RequestsPerSecond), cell(float64(l.MaxQueued), float64(def.MaxQueued)),
		cell(float64(l.MaxRunning), float64(def.MaxRunning)), cell(float64(l.MaxLiveSessions), float64(def.MaxLiveSessions))
}

// setLimits is `gantry tenants set-limits NAME [--rps N] [--max-queued N]
// [--max-running N] [--max-live-sessions N]`; "default" puts a quota back to the operator's
// default. The cap on running jobs is the tenant's queue's max ack pending
// in JetStream: it is changed there at once if NATS answers, else by the
// next submission of the tenant after a minute.
func setLimits(ctx context.Context, cfg config, st *store.Store, name string, args []string) error {
	t, err := st.TenantByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no tenant named %q (gantry tenants list)", name)
	}
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("set-limits", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	rps := fs.String("rps", "", "API requests per second (each ingress), or default")
	queued := fs.String("max-queued", "", "jobs queued at once, or default")
	running := fs.String("max-running", "", "jobs running at once across all runners, or default")
	live := fs.String("max-live-sessions", "", "stateful sessions (live sandboxes) at once, or default")
	snaps := fs.String("max-snapshot-mb", "", "MiB the tenant's snapshots may hold, or default")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	var u store.LimitsUpdate
	var errs []string
	if *rps != "" {
		v, err := parseLimit(*rps, strconv.ParseFloat)
		if err != nil {
			errs = append(errs, "--rps "+err.Error())
		}
		u.RequestsPerSecond = &v
	}
	parseInt := func(s string, _ int) (int, error) { return strconv.Atoi(s) }
	if *queued != "" {
		v, err := parseLimit(*queued, parseInt)
		if err != nil {
			errs = append(errs, "--max-queued "+err.Error())
		}
		u.MaxQueued = &v
	}
	if *running != "" {
		v, err := parseLimit(*running, parseInt)
		if err != nil {
			errs = append(errs, "--max-running "+err.Error())
		}
		u.MaxRunning = &v
	}
	if *live != "" {
		v, err := parseLimit(*live, parseInt)
		if err != nil {
			errs = append(errs, "--max-live-sessions "+err.Error())
		}
		u.MaxLiveSessions = &v
	}
	if *snaps != "" {
		v, err := parseLimit(*snaps, parseInt)
		if err != nil {
			errs = append(errs, "--max-snapshot-mb "+err.Error())
		}
		u.MaxSnapshotMB = &v
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if u == (store.LimitsUpdate{}) {
		return errors.New("set-limits: give at least one of --rps, --max-queued, --max-running, --max-live-sessions, --max-snapshot-mb")
	}
	l, err := st.SetTenantLimits(ctx, t.ID, u)
	if err != nil {
		return err
	}
	r, q, n, lv := limitCells(l, cfg.TenantLimits)
	fmt.Printf("tenant %s: %s requests/s, %s queued, %s running, %s live sessions\n", t.Name, r, q, n, lv)
	if u.MaxRunning != nil {
		if err := applyRunningCap(cfg, t.ID, l.Or(cfg.TenantLimits).MaxRunning); err != nil {
			fmt.Fprintf(os.Stderr, "warning: the cap on running jobs is stored, but the tenant's queue could not be updated through NATS at %s (%v): "+
				"it takes effect with the tenant's next submission after a minute\n", redactServers(cfg.NATSURL), err)
		}
	}
	return nil
}

// parseLimit reads a positive quota, or "default" (0).
func parseLimit[T int | float64](s string, parse func(string, int) (T, error)) (T, error) {
	if s == "default" {
		return 0, nil
	}
	v, err := parse(s, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q: want a number above 0, or default", s)
	}
	return v, nil
}

// applyRunningCap sets the tenant's queue's max ack pending.
func applyRunningCap(cfg config, tenantID string, maxRunning int) error {
	nc, err := nats.Connect(cfg.NATSURL, append(cfg.NATSAuth.Options(), nats.Name("gantry tenants set-limits"), nats.Timeout(2*time.Second))...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = queue.EnsureTenant(ctx, js, cfg.Queue, tenantID, maxRunning)
	return err
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
		if err := announceRevocation(cfg, rk); err != nil {
			fmt.Fprintf(os.Stderr, "warning: the key is revoked, but the ingresses could not be told through NATS at %s (%v): "+
				"an ingress that checked the key in the last %s may accept it until that check expires\n", redactServers(cfg.NATSURL), err, service.KeyCacheTTL)
		}
		return nil
	}
	return errUsage
}

// announceRevocation tells every ingress (and runner) listening on NATS that
// a key was revoked, so that none keeps accepting it from its cache.
func announceRevocation(cfg config, rk store.RevokedKey) error {
	nc, err := nats.Connect(cfg.NATSURL, append(cfg.NATSAuth.Options(), nats.Name("gantry keys revoke"), nats.Timeout(2*time.Second))...)
	if err != nil {
		return err
	}
	defer nc.Close()
	data, _ := json.Marshal(queue.KeyRevoked{KeyID: rk.ID, TenantID: rk.TenantID, KeyEpoch: rk.KeyEpoch})
	if err := nc.Publish(queue.KeyRevokedSubject, data); err != nil {
		return err
	}
	return nc.FlushTimeout(2 * time.Second)
}
