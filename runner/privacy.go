package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// Privacy tokens (per tenant, opt-in): personal data in what a job returns
// to the model (its output, and the errors of its tool calls) is replaced by
// stable tokens such as [EMAIL_1], and tokens in what the model sends (the
// job's code, files, stdin, env and arguments, and the arguments of tool
// calls) are turned back into the values before the sandbox or an upstream
// sees them. Live output is not streamed for such jobs: a value split
// across two chunks would slip past the tokenizer, so their output arrives
// with the result.

// detokenizeSpec returns the spec with tokens replaced by their values.
func (r *Runner) detokenizeSpec(ctx context.Context, tenantID string, spec jobs.Spec) (jobs.Spec, error) {
	t := r.cfg.Privacy
	var err error
	if spec.Code, err = t.Detokenize(ctx, tenantID, spec.Code); err != nil {
		return spec, err
	}
	if spec.Stdin, err = t.Detokenize(ctx, tenantID, spec.Stdin); err != nil {
		return spec, err
	}
	spec.Command = slices.Clone(spec.Command)
	for i, a := range spec.Command {
		if spec.Command[i], err = t.Detokenize(ctx, tenantID, a); err != nil {
			return spec, err
		}
	}
	spec.Env = maps.Clone(spec.Env)
	for k, v := range spec.Env {
		if spec.Env[k], err = t.Detokenize(ctx, tenantID, v); err != nil {
			return spec, err
		}
	}
	spec.Files = slices.Clone(spec.Files)
	for i, f := range spec.Files {
		if spec.Files[i].Content, err = t.DetokenizeBytes(ctx, tenantID, f.Content); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// tokenizeResult replaces personal data in what the result shows the model.
func (r *Runner) tokenizeResult(ctx context.Context, tenantID string, res *jobs.Result) error {
	t := r.cfg.Privacy
	var err error
	if res.Stdout, err = t.TokenizeBytes(ctx, tenantID, res.Stdout); err != nil {
		return fmt.Errorf("privacy tokens: %w", err)
	}
	if res.Stderr, err = t.TokenizeBytes(ctx, tenantID, res.Stderr); err != nil {
		return fmt.Errorf("privacy tokens: %w", err)
	}
	for i, c := range res.ToolCalls {
		if c.Error != "" {
			if res.ToolCalls[i].Error, err = t.Tokenize(ctx, tenantID, c.Error); err != nil {
				return fmt.Errorf("privacy tokens: %w", err)
			}
		}
	}
	return nil
}

// withPrivacy returns the claim of a private tenant with its spec
// detokenized. It fails closed: a runner that cannot tokenize (no
// GANTRY_SECRET_KEY) does not run a private tenant's job.
func (r *Runner) withPrivacy(ctx context.Context, claim store.Claim) (store.Claim, error) {
	if !claim.Private {
		return claim, nil
	}
	if r.cfg.Privacy == nil {
		return claim, errors.New("the tenant has privacy tokens on but this runner has no GANTRY_SECRET_KEY to tokenize with")
	}
	var err error
	claim.Spec, err = r.detokenizeSpec(ctx, claim.TenantID, claim.Spec)
	return claim, err
}
