package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sirupsen/logrus"

	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// LoadRequest loads the project the CLI's request names (Load with its
// options and bind policy, the process environment for interpolation).
func LoadRequest(ctx context.Context, req composeapi.Request) (*Result, error) {
	return Load(ctx, Options{
		Files:       req.Files,
		WorkDir:     req.WorkDir,
		ProjectName: req.ProjectName,
		EnvFiles:    req.EnvFiles,
		Profiles:    req.Profiles,
		BindName:    req.Binds.Name,
	})
}

// Serve is the gordon-compose helper (cmd/gordon-compose,
// composeapi.Exec): it reads one composeapi.Request from r, loads it as
// LoadRequest does in the CLI's process and writes the
// composeapi.Response to w. It returns an error only when it could not
// read the request or write the response.
func Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	var req composeapi.Request
	if err := json.NewDecoder(r).Decode(&req); err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	if lvl, err := logrus.ParseLevel(req.LogLevel); err == nil && req.LogLevel != "" {
		logrus.SetLevel(lvl)
	}
	res, err := LoadRequest(ctx, req)
	return json.NewEncoder(w).Encode(composeapi.NewResponse(res, err))
}
