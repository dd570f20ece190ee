package sandbox

import (
	"compress/gzip"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gantryhq/gantry/ingress/compat"
	"github.com/gantryhq/gantry/ingress/service"
)

// envd's /files: a file's bytes down (GET) and up (POST, multipart form
// data or the raw bytes), moved in chunks of live file operations.

// plainUser refuses a user other than E2B's own (envd's /files names it
// in ?username=, and answers 401 for one it cannot use).
func plainUser(r *http.Request) error {
	if u := r.URL.Query().Get("username"); u != "" && u != username {
		return &service.LiveError{Code: service.LivePermission,
			Message: "user '" + u + "': a gantry sandbox runs everything as one unprivileged user ('" + username + "'), never as root"}
	}
	return nil
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := plainUser(r); err != nil {
		return err
	}
	q := r.URL.Query()
	p := toSandbox(q.Get("path"))
	ctx := r.Context()
	live, err := s.live(ctx, c)
	if err != nil {
		return err
	}
	var offset int64
	first := true
	for {
		chunk, err := live.Read(ctx, p, offset, service.MaxFileChunk)
		if err != nil {
			var le *service.LiveError
			if first {
				if errors.As(err, &le) && le.Code == service.LiveNotFound {
					return &service.LiveError{Code: le.Code, Message: "path '" + fromSandbox(p) + "' does not exist"}
				}
				return err
			}
			// The headers are out: the body stops short of its length.
			s.log.Warn("e2b download cut short", "session_id", c.session, "err", err)
			return nil
		}
		if first {
			first = false
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
			w.Header().Set("Content-Length", strconv.FormatInt(chunk.Size, 10))
			w.WriteHeader(http.StatusOK)
		}
		take := chunk.Data
		if rest := chunk.Size - offset; int64(len(take)) > rest {
			take = take[:max(rest, 0)] // it grew meanwhile: its length as first read
		}
		if _, err := w.Write(take); err != nil {
			return nil
		}
		offset += int64(len(take))
		if chunk.EOF || offset >= chunk.Size || len(chunk.Data) == 0 {
			return nil
		}
	}
}

// writtenEntry is envd's answer for each uploaded file.
type writtenEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, c caller) error {
	if err := plainUser(r); err != nil {
		return err
	}
	body := io.Reader(r.Body)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return &service.LiveError{Code: service.LiveInvalid, Message: "the body is not gzip: " + err.Error()}
		}
		defer gz.Close()
		body = gz
	}
	target := r.URL.Query().Get("path")
	var written []writtenEntry
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return &service.LiveError{Code: service.LiveInvalid, Message: "a malformed multipart body: " + err.Error()}
			}
			if part.FormName() != "file" {
				continue
			}
			dest := target
			if dest == "" {
				dest = part.FileName()
			}
			if dest == "" {
				return &service.LiveError{Code: service.LiveInvalid, Message: "a file without a path: give ?path= or the part's filename"}
			}
			e, err := s.writeFile(r, c, toSandbox(dest), part)
			if err != nil {
				return err
			}
			written = append(written, e)
		}
	case "application/octet-stream", "":
		if target == "" {
			return &service.LiveError{Code: service.LiveInvalid, Message: "an upload of raw bytes needs ?path="}
		}
		e, err := s.writeFile(r, c, toSandbox(target), body)
		if err != nil {
			return err
		}
		written = append(written, e)
	default:
		return &service.LiveError{Code: service.LiveInvalid, Message: "content type " + ct + ": send multipart/form-data or application/octet-stream"}
	}
	if len(written) == 0 {
		return &service.LiveError{Code: service.LiveInvalid, Message: "no file in the request"}
	}
	compat.WriteJSON(w, http.StatusOK, written)
	return nil
}

// writeFile writes what src yields to the sandbox path p, in chunks (the
// first creates or empties the file and its parent directories).
func (s *Server) writeFile(r *http.Request, c caller, p string, src io.Reader) (writtenEntry, error) {
	buf := make([]byte, service.MaxFileChunk)
	var offset int64
	live, err := s.live(r.Context(), c)
	if err != nil {
		return writtenEntry{}, err
	}
	for first := true; ; first = false {
		n, rerr := io.ReadFull(src, buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) && !errors.Is(rerr, io.ErrUnexpectedEOF) {
			return writtenEntry{}, &service.LiveError{Code: service.LiveInvalid, Message: "reading the upload: " + rerr.Error()}
		}
		if n > 0 || first {
			if first {
				err = live.Create(r.Context(), p, buf[:n])
			} else {
				err = live.WriteAt(r.Context(), p, offset, buf[:n])
			}
			if err != nil {
				return writtenEntry{}, err
			}
			offset += int64(n)
		}
		if rerr != nil {
			break
		}
	}
	return writtenEntry{Path: fromSandbox(p), Name: path.Base(p), Type: "file"}, nil
}
