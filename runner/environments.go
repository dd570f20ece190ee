package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// EnvironmentStore is what the runner needs to find an environment's
// image.
type EnvironmentStore interface {
	Environments(ctx context.Context) ([]store.Environment, error)
}

// environmentsTTL is how old the runner's copy of the registered
// environments may get; a name it does not know is looked up again.
const environmentsTTL = 10 * time.Second

// environments resolves environments to images, and makes sure each image
// is on this runner's Docker host (pulling it from its registry once).
type environments struct {
	st EnvironmentStore
	sb *Sandbox

	mu      sync.Mutex
	list    []store.Environment
	fetched time.Time
	ready   map[string]time.Time // images found or pulled, and when
}

// envError is a job's environment that cannot be had: the job ends as
// error with this message, on any runner alike.
type envError struct{ msg string }

func (e *envError) Error() string { return e.msg }

// image returns the image of the tenant's environment name ("" for the
// sandbox image), on this Docker host.
func (e *environments) image(ctx context.Context, tenantID, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	env, err := e.lookup(ctx, tenantID, name)
	if err != nil {
		return "", err
	}
	if err := e.ensure(ctx, env.Image); err != nil {
		return "", &envError{msg: fmt.Sprintf("environment %q: %v", name, err)}
	}
	return env.Image, nil
}

func (e *environments) lookup(ctx context.Context, tenantID, name string) (store.Environment, error) {
	for _, fresh := range []bool{false, true} {
		e.mu.Lock()
		if fresh || e.fetched.IsZero() || time.Since(e.fetched) > environmentsTTL {
			list, err := e.st.Environments(ctx)
			if err != nil {
				e.mu.Unlock()
				return store.Environment{}, err
			}
			e.list, e.fetched = list, time.Now()
		}
		list := e.list
		e.mu.Unlock()
		for _, env := range list {
			if env.Name == name && env.For(tenantID) {
				return env, nil
			}
		}
	}
	return store.Environment{}, &envError{msg: fmt.Sprintf("environment %q is not registered for this tenant (it may have been removed since the job was submitted)", name)}
}

// ensure makes sure image is on the Docker host: found, or pulled from the
// registry its name points at.
func (e *environments) ensure(ctx context.Context, image string) error {
	e.mu.Lock()
	at, ok := e.ready[image]
	e.mu.Unlock()
	if ok && time.Since(at) < time.Minute {
		return nil
	}
	if err := e.sb.EnsureImage(ctx, image); err != nil {
		return err
	}
	e.mu.Lock()
	if e.ready == nil {
		e.ready = map[string]time.Time{}
	}
	e.ready[image] = time.Now()
	e.mu.Unlock()
	return nil
}

// EnsureImage makes sure image is on the Docker host, pulling it when a
// registry serves it.
func (s *Sandbox) EnsureImage(ctx context.Context, image string) error {
	_, err := s.docker.ImageInspect(ctx, image)
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", image, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	resp, err := s.docker.ImagePull(pctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(pctx)
	}
	if err != nil {
		return fmt.Errorf("image %s is not on this runner's Docker host and could not be pulled: %w", image, err)
	}
	return nil
}

// isEnv reports whether err is an environment that cannot be had.
func isEnv(err error) bool {
	var e *envError
	return errors.As(err, &e)
}

// lacksLanguage says why the job's image (its environment's, or the sandbox
// image) cannot run its code, as the image labels its languages; "" when
// it can, or when the image does not say, or the environment cannot be had
// (obtain reports that).
func (r *Runner) lacksLanguage(ctx context.Context, claim store.Claim) string {
	lang, ok := jobs.LookupLanguage(claim.Spec.Language)
	if !ok || claim.Spec.Code == "" {
		return ""
	}
	image, err := r.envs.image(ctx, claim.TenantID, claim.Spec.Environment)
	if err != nil {
		return ""
	}
	if image == "" {
		if r.sandbox.Runs(lang.Name) {
			return ""
		}
		return fmt.Sprintf("this runner's sandbox image (%s) has no %s: the compiled languages need the compilers image (README: Compiled languages)",
			r.sandbox.cfg.Image, lang.Name)
	}
	if langs := r.sandbox.imageLanguages(ctx, image); langs == nil || slices.Contains(langs, lang.Name) {
		return ""
	}
	return fmt.Sprintf("environment %q (image %s) has no %s: the compiled languages need an image built FROM the compilers image",
		claim.Spec.Environment, image, lang.Name)
}

// imageLanguages are the languages image labels (nil: it does not say, or
// it cannot be inspected), cached for a minute.
func (s *Sandbox) imageLanguages(ctx context.Context, image string) []string {
	s.labelsMu.Lock()
	c, ok := s.labels[image]
	s.labelsMu.Unlock()
	if ok && time.Since(c.at) < time.Minute {
		return c.languages
	}
	res, err := s.docker.ImageInspect(ctx, image)
	if err != nil {
		return nil
	}
	var langs []string
	if res.Config != nil {
		if v, ok := res.Config.Labels[LabelLanguages]; ok {
			langs = strings.Split(v, ",")
		}
	}
	s.labelsMu.Lock()
	if s.labels == nil {
		s.labels = map[string]imageLabels{}
	}
	s.labels[image] = imageLabels{languages: langs, id: res.ID, at: time.Now()}
	s.labelsMu.Unlock()
	return langs
}

// imageLabels are an image's languages and id, as read at a time.
type imageLabels struct {
	languages []string
	id        string
	at        time.Time
}

// imageID is the id of image ("": the sandbox image), cached for a minute
// as its labels are; "" when it cannot be inspected.
func (s *Sandbox) imageID(ctx context.Context, image string) string {
	if image == "" {
		image = s.cfg.Image
	}
	s.imageLanguages(ctx, image)
	s.labelsMu.Lock()
	defer s.labelsMu.Unlock()
	return s.labels[image].id
}
