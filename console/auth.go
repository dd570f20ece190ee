package console

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/localapi"
)

// Sign-in. The API key a person signs in with is sealed (AES-256-GCM under
// the console's session key) into an HttpOnly, SameSite=Strict cookie
// scoped to /console/, Secure over TLS: the browser's scripts cannot read
// it, other sites' requests do not carry it, the API (/v1) never sees it,
// and it never appears in a URL or a log. The cookie also seals a random
// session id, from which each form's CSRF token is derived.

const (
	cookieName  = "gantry_console"
	sealContext = "gantry console session v1"
	csrfContext = "gantry console csrf v1"
	// maxUpload caps a file uploaded through the console (the API's own
	// cap on a session file), and maxBody a form that carries files.
	maxUpload = 32 << 20
	maxBody   = maxUpload + 1<<20
	// maxForm caps a body that carries no files (a form, the playground's
	// JSON).
	maxForm = 1 << 20
	// maxKeyLen bounds what the sign-in form accepts as a key.
	maxKeyLen = 256
)

// sealed is what the cookie holds, sealed.
type sealed struct {
	Key     string `json:"k"`
	ID      []byte `json:"i"`
	Expires int64  `json:"e"`
}

// session is a signed-in person: the API as their tenant, and their CSRF
// token.
type session struct {
	api  *localapi.Client
	csrf string
}

// open reads the request's sign-in, if it has a valid, unexpired one.
func (c *Console) open(r *http.Request) (*session, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return nil, false
	}
	pt, err := c.box.Open(raw, sealContext)
	if err != nil {
		return nil, false
	}
	var s sealed
	if json.Unmarshal(pt, &s) != nil || s.Key == "" || len(s.ID) == 0 || time.Now().Unix() > s.Expires {
		return nil, false
	}
	return &session{api: localapi.New(c.api, s.Key), csrf: c.csrfToken(s.ID)}, true
}

func (c *Console) csrfToken(id []byte) string {
	h, err := c.box.Hash(id, csrfContext)
	if err != nil {
		panic(err) // the box always has a key
	}
	return base64.RawURLEncoding.EncodeToString(h)
}

// signedIn runs h for a signed-in request whose CSRF token checks out (on
// anything but GET), and sends everyone else to the sign-in page.
func (c *Console) signedIn(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.open(r)
		if !ok {
			if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" {
				http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
				return
			}
			c.clearCookie(w, r)
			c.render(w, r, nil, http.StatusUnauthorized, "signin", "Sign in", "", nil,
				&localapi.Error{Status: http.StatusUnauthorized, Code: "unauthenticated", Message: "your sign-in has expired: sign in again"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			limit := int64(maxForm)
			if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
				limit = maxBody
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			if err := formError(r); err != nil {
				c.render(w, r, s, err.Status, "error", "Not sent", "", nil, err)
				return
			}
			token := r.Header.Get("X-CSRF-Token")
			if token == "" {
				token = formValue(r, "csrf")
			}
			if !hmac.Equal([]byte(token), []byte(s.csrf)) {
				c.render(w, r, s, http.StatusForbidden, "error", "Forbidden", "", nil,
					&localapi.Error{Status: http.StatusForbidden, Code: "forbidden", Message: "the form's security token is missing or stale: reload the page and try again"})
				return
			}
		}
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	})
}

// formValue reads a form field of a urlencoded or multipart body (parsing
// it once, within the size the handler allows).
func formValue(r *http.Request, name string) string {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if r.MultipartForm == nil {
			if err := r.ParseMultipartForm(8 << 20); err != nil {
				return ""
			}
		}
		if v := r.MultipartForm.Value[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return r.PostFormValue(name)
}

// formError is why the form's body could not be read: too large (413),
// too slow (408), or nil.
func formError(r *http.Request) *localapi.Error {
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		err = r.ParseMultipartForm(8 << 20)
	} else {
		err = r.ParseForm()
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &localapi.Error{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large",
			Message: fmt.Sprintf("the form is larger than %d bytes", tooLarge.Limit)}
	case err != nil && !errors.Is(err, http.ErrNotMultipart):
		return &localapi.Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "the form could not be read: " + err.Error()}
	}
	return nil
}

func (c *Console) handleSigninPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.open(r); ok {
		http.Redirect(w, r, Prefix+"jobs", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "signin", "Sign in", "", nil, nil)
}

// handleSignin checks the key against the API (as any request would be)
// and, when it works, seals it into the cookie.
func (c *Console) handleSignin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	key := strings.TrimSpace(r.PostFormValue("key"))
	fail := func(status int, code, msg string) {
		c.render(w, r, nil, status, "signin", "Sign in", "", nil, &localapi.Error{Status: status, Code: code, Field: "key", Message: msg})
	}
	if key == "" {
		fail(http.StatusBadRequest, "invalid_argument", "enter an API key")
		return
	}
	if len(key) > maxKeyLen || strings.ContainsAny(key, " \t\r\n") {
		fail(http.StatusUnauthorized, "unauthenticated", "invalid or revoked API key")
		return
	}
	if err := localapi.New(c.api, key).JSON(r.Context(), http.MethodGet, "/v1/languages", nil, nil); err != nil {
		e := localapi.AsError(err)
		fail(e.Status, e.Code, e.Message)
		return
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	exp := time.Now().Add(c.cfg.SessionTTL)
	pt, _ := json.Marshal(sealed{Key: key, ID: id, Expires: exp.Unix()})
	ct, err := c.box.Seal(pt, sealContext)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: base64.RawURLEncoding.EncodeToString(ct), Path: Prefix, Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r),
	})
	http.Redirect(w, r, Prefix+"jobs", http.StatusSeeOther)
}

func (c *Console) handleSignout(w http.ResponseWriter, r *http.Request, _ *session) error {
	c.clearCookie(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return nil
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}

// secure says whether the browser reached the console over TLS, directly
// or through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
