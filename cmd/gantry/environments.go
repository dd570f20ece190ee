package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gantryhq/gantry/agent/wire"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/runner"
	"github.com/gantryhq/gantry/store"
)

// runEnvironments is `gantry environments add|list|remove`.
func runEnvironments(ctx context.Context, cfg config, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case args[0] == "add" && len(args) >= 3:
		return addEnvironment(ctx, cfg, st, args[1:])
	case args[0] == "list" && len(args) == 1:
		return listEnvironments(ctx, st)
	case args[0] == "remove" && len(args) == 2:
		if err := st.DeleteEnvironment(ctx, args[1]); errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no environment named %q (gantry environments list)", args[1])
		} else if err != nil {
			return err
		}
		fmt.Printf("removed environment %s: jobs and sessions naming it are refused from now on\n", args[1])
		return nil
	}
	return errUsage
}

// addEnvironment is `gantry environments add NAME IMAGE [--description
// TEXT] [--tenant NAME]... [--no-check]`. Unless --no-check, the image is
// checked on the Docker engine this command reaches (pulled first if a
// registry serves it): a container of it must start and its agent answer
// with this gantry's protocol, as a runner's would.
func addEnvironment(ctx context.Context, cfg config, st *store.Store, args []string) error {
	name, image := args[0], args[1]
	fs := flag.NewFlagSet("environments add", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	desc := fs.String("description", "", "what the environment holds, shown to tenants")
	var tenants stringList
	fs.Var(&tenants, "tenant", "a tenant that may use it (repeat; none: every tenant)")
	noCheck := fs.Bool("no-check", false, "register without checking the image here (runners check it when a job needs it)")
	if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	if !jobs.ValidEnvironmentName(name) || name == jobs.DefaultEnvironment {
		return fmt.Errorf("%q is not an environment name: lowercase letters, digits and '-', starting with a letter, at most 40 (and not %q)", name, jobs.DefaultEnvironment)
	}
	env := store.Environment{Name: name, Image: image, Description: strings.TrimSpace(*desc)}
	for _, t := range tenants {
		rec, err := st.TenantByName(ctx, t)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no tenant named %q (gantry tenants list)", t)
		}
		if err != nil {
			return err
		}
		env.Tenants = append(env.Tenants, rec.ID)
	}
	if !*noCheck {
		if err := checkEnvironmentImage(ctx, cfg, image); err != nil {
			return fmt.Errorf("%w\n(run this where a runner's Docker engine is, or register with --no-check)", err)
		}
	}
	if _, err := st.PutEnvironment(ctx, env); err != nil {
		return err
	}
	who := "every tenant"
	if len(tenants) > 0 {
		who = "tenants " + strings.Join(tenants, ", ")
	}
	fmt.Printf("environment %s: image %s, for %s\njobs and sessions choose it with \"environment\": %q\n", name, image, who, name)
	return nil
}

// checkEnvironmentImage has a container of image report in, as a runner
// would make it.
func checkEnvironmentImage(ctx context.Context, cfg config, image string) error {
	runtime := cfg.Runtime
	if runtime == "runc" {
		runtime = ""
	}
	sb, err := runner.NewSandbox(cfg.DockerHost, runner.SandboxConfig{
		Image: image, RunnerID: "environment-check-" + jobs.NewID("chk")[4:], Runtime: runtime, Isolation: wire.Isolation(cfg.Isolation),
	})
	if err != nil {
		return err
	}
	defer sb.Close()
	if err := sb.EnsureImage(ctx, image); err != nil {
		return err
	}
	if err := sb.Check(ctx); err != nil {
		return fmt.Errorf("image %s: %w", image, err)
	}
	return nil
}

func listEnvironments(ctx context.Context, st *store.Store) error {
	envs, err := st.Environments(ctx)
	if err != nil {
		return err
	}
	ts, err := st.ListTenants(ctx)
	if err != nil {
		return err
	}
	names := map[string]string{}
	for _, t := range ts {
		names[t.ID] = t.Name
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIMAGE\tTENANTS\tDESCRIPTION")
	for _, e := range envs {
		who := "all"
		if e.Tenants != nil {
			var list []string
			for _, id := range e.Tenants {
				list = append(list, names[id])
			}
			who = strings.Join(list, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Image, who, e.Description)
	}
	return tw.Flush()
}
