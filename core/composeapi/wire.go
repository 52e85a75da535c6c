package composeapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// ManifestSource is the name a converted manifest is parsed under.
const ManifestSource = "(converted from compose)"

// HelperArg is the one argument the gordon-compose helper is run with.
const HelperArg = "load"

// Request asks the gordon-compose helper to load one compose project: the
// loader's options as the CLI's flags give them. The environment used for
// interpolation is the helper's own, inherited from the CLI.
type Request struct {
	Files       []string   `json:"files"`
	WorkDir     string     `json:"work_dir,omitempty"`
	ProjectName string     `json:"project_name,omitempty"`
	EnvFiles    []string   `json:"env_files,omitempty"`
	Profiles    []string   `json:"profiles,omitempty"`
	Binds       BindPolicy `json:"binds"`
	// LogLevel is the CLI's logrus level (docker --log-level, -D):
	// compose-go warns through logrus.
	LogLevel string `json:"log_level,omitempty"`
}

// Response is the helper's answer: a Result, the project's Problems, or
// another load error (its message; Invalid when it wraps core.ErrInvalid).
type Response struct {
	Result   *wireResult `json:"result,omitempty"`
	Problems *Error      `json:"problems,omitempty"`
	Error    string      `json:"error,omitempty"`
	Invalid  bool        `json:"invalid,omitempty"`
}

// wireResult is a Result without what the CLI derives from Manifest (its
// Spec and Source, see Response.Load).
type wireResult struct {
	Files    []string     `json:"files"`
	Manifest []byte       `json:"manifest"`
	WorkDir  string       `json:"work_dir"`
	Secrets  []wireSecret `json:"secrets,omitempty"`
	Notes    []string     `json:"notes,omitempty"`
}

// wireSecret is a Secret; an environment: secret carries the variable's
// value when the project environment sets it (the environment may come
// from an env file only the helper read).
type wireSecret struct {
	Service string  `json:"service"`
	Name    string  `json:"name"`
	File    string  `json:"file,omitempty"`
	Env     string  `json:"env,omitempty"`
	Value   *string `json:"value,omitempty"`
}

// NewResponse is the helper's answer for what the loader returned.
func NewResponse(res *Result, err error) Response {
	if err != nil {
		var cerr *Error
		if errors.As(err, &cerr) {
			return Response{Problems: cerr}
		}
		return Response{Error: err.Error(), Invalid: errors.Is(err, core.ErrInvalid)}
	}
	w := &wireResult{Files: res.Files, Manifest: res.Manifest, WorkDir: res.WorkDir, Notes: res.Notes}
	for _, s := range res.Secrets {
		ws := wireSecret{Service: s.Service, Name: s.Name, File: s.File, Env: s.Env}
		if v, ok := s.environ[s.Env]; ok && s.File == "" {
			ws.Value = &v
		}
		w.Secrets = append(w.Secrets, ws)
	}
	return Response{Result: w}
}

// Load returns what the loader returned in the helper: the Result (its
// Spec parsed from Manifest as the loader parsed it), the *Error listing
// the project's problems, or an error with the loader's message.
func (r Response) Load() (*Result, error) {
	switch {
	case r.Problems != nil:
		return nil, r.Problems
	case r.Error != "":
		if r.Invalid {
			return nil, invalidError(r.Error)
		}
		return nil, errors.New(r.Error)
	case r.Result == nil:
		return nil, errors.New("the compose loader answered neither a result nor an error")
	}
	w := r.Result
	spec, err := manifest.Parse(ManifestSource, w.Manifest)
	if err != nil {
		return nil, fmt.Errorf("the compose loader's manifest: %w", err)
	}
	AbsBuildContexts(&spec, w.WorkDir)
	if err := manifest.ReadConfigFiles(&spec, w.WorkDir); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(w.Manifest)
	res := &Result{Files: w.Files, Manifest: w.Manifest, Spec: spec, WorkDir: w.WorkDir, Source: hex.EncodeToString(sum[:]), Notes: w.Notes}
	for _, ws := range w.Secrets {
		s := Secret{Service: ws.Service, Name: ws.Name, File: ws.File, Env: ws.Env}
		if ws.File == "" {
			s.environ = map[string]string{}
			if ws.Value != nil {
				s.environ[ws.Env] = *ws.Value
			}
		}
		res.Secrets = append(res.Secrets, s)
	}
	return res, nil
}

// invalidError is a load error of the helper that wrapped core.ErrInvalid.
type invalidError string

func (e invalidError) Error() string { return string(e) }
func (e invalidError) Unwrap() error { return core.ErrInvalid }

// Exec loads req in the gordon-compose helper exe (cmd/gordon-compose): the
// same Result or error the loader returns in process. The helper's stderr
// (compose-go's warnings) goes to stderr.
func Exec(ctx context.Context, exe string, req Request, stderr io.Writer) (*Result, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, HelperArg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the compose loader %s failed: %w", exe, err)
	}
	var resp Response
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("the compose loader %s: unreadable answer: %w", exe, err)
	}
	return resp.Load()
}
