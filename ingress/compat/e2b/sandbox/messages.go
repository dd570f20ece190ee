package sandbox

import (
	"encoding/json"
	"strconv"
	"time"
)

// envd's messages (process.proto and filesystem.proto of e2b-dev/infra's
// envd), in protobuf's JSON form: fields by their JSON names, bytes as
// base64, 64-bit integers as strings, enums by name, timestamps in RFC
// 3339. Only what gantry serves is declared; unknown fields are ignored.

// processConfig is process.ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// startRequest is process.StartRequest.
type startRequest struct {
	Process processConfig   `json:"process"`
	Pty     json.RawMessage `json:"pty,omitempty"`
	Tag     *string         `json:"tag,omitempty"`
	Stdin   *bool           `json:"stdin,omitempty"`
}

// processSelector is process.ProcessSelector: a pid or a tag.
type processSelector struct {
	Pid *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

type connectRequest struct {
	Process processSelector `json:"process"`
}

// processInput is process.ProcessInput: stdin or pty bytes.
type processInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	Pty   []byte `json:"pty,omitempty"`
}

type sendInputRequest struct {
	Process processSelector `json:"process"`
	Input   processInput    `json:"input"`
}

type sendSignalRequest struct {
	Process processSelector `json:"process"`
	Signal  signal          `json:"signal"`
}

type closeStdinRequest struct {
	Process processSelector `json:"process"`
}

// signal is process.Signal, by name or number.
type signal int

func (s *signal) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		switch name {
		case "SIGNAL_SIGKILL":
			*s = 9
		case "SIGNAL_SIGTERM":
			*s = 15
		case "SIGNAL_UNSPECIFIED", "":
			*s = 0
		default:
			n, err := strconv.Atoi(name)
			if err != nil {
				return &json.UnmarshalTypeError{Value: "signal " + strconv.Quote(name), Field: "signal"}
			}
			*s = signal(n)
		}
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return &json.UnmarshalTypeError{Value: "signal " + string(b), Field: "signal"}
	}
	*s = signal(n)
	return nil
}

// processEvent is process.ProcessEvent: one of its four cases.
type processEvent struct {
	Start     *startEvent `json:"start,omitempty"`
	Data      *dataEvent  `json:"data,omitempty"`
	End       *endEvent   `json:"end,omitempty"`
	Keepalive *struct{}   `json:"keepalive,omitempty"`
}

type startEvent struct {
	Pid uint32 `json:"pid"`
}

type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
}

type endEvent struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// eventResponse is process.StartResponse and process.ConnectResponse.
type eventResponse struct {
	Event processEvent `json:"event"`
}

type processInfo struct {
	Config processConfig `json:"config"`
	Pid    uint32        `json:"pid"`
	Tag    *string       `json:"tag,omitempty"`
}

type listResponse struct {
	Processes []processInfo `json:"processes"`
}

// pathRequest is filesystem's StatRequest, MakeDirRequest, RemoveRequest
// and ListDirRequest (with depth).
type pathRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth,omitempty"`
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// entryInfo is filesystem.EntryInfo.
type entryInfo struct {
	Name          string    `json:"name"`
	Type          string    `json:"type"`
	Path          string    `json:"path"`
	Size          int64     `json:"size,string"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedTime  time.Time `json:"modifiedTime"`
	SymlinkTarget *string   `json:"symlinkTarget,omitempty"`
}

type entryResponse struct {
	Entry entryInfo `json:"entry"`
}

type listDirResponse struct {
	Entries []entryInfo `json:"entries"`
}
