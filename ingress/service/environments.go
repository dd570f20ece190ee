package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// environmentsTTL is how old the service's copy of the registered
// environments may get; a name it does not know is looked up again at
// once, so a new registration is usable immediately.
const environmentsTTL = 10 * time.Second

// environments caches the registered environments.
type environments struct {
	mu      sync.Mutex
	list    []store.Environment
	fetched time.Time
}

func (s *Service) registered(ctx context.Context, fresh bool) ([]store.Environment, error) {
	e := &s.envs
	e.mu.Lock()
	defer e.mu.Unlock()
	if !fresh && !e.fetched.IsZero() && time.Since(e.fetched) < environmentsTTL {
		return e.list, nil
	}
	list, err := s.store.Environments(ctx)
	if err != nil {
		return nil, err
	}
	e.list, e.fetched = list, time.Now()
	return list, nil
}

// Environments lists the environments the tenant may use, the default
// (the runner's own image) first.
func (s *Service) Environments(ctx context.Context, p Principal) ([]jobs.Environment, error) {
	list, err := s.registered(ctx, false)
	if err != nil {
		return nil, err
	}
	out := []jobs.Environment{{Name: jobs.DefaultEnvironment, Description: "gantry's sandbox image", Default: true}}
	for _, e := range list {
		if e.For(p.TenantID) {
			out = append(out, jobs.Environment{Name: e.Name, Description: e.Description})
		}
	}
	return out, nil
}

// checkEnvironment refuses an environment the tenant may not use: one
// not registered, or registered for other tenants only (the two answer
// alike). "" is the default.
func (s *Service) checkEnvironment(ctx context.Context, p Principal, name string) error {
	if name == "" {
		return nil
	}
	for _, fresh := range []bool{false, true} {
		list, err := s.registered(ctx, fresh)
		if err != nil {
			return err
		}
		for _, e := range list {
			if e.Name == name && e.For(p.TenantID) {
				return nil
			}
		}
	}
	return BadRequest("environment", "%s", fmt.Sprintf("unknown environment %q (GET /v1/environments lists the ones you may use)", name))
}
