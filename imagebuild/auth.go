package imagebuild

import (
	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/registry"
)

// ClientAuths returns the client's registry credentials from cfg (docker
// login, credential helpers) by registry host, for the builds' base image
// pulls (none when they cannot be read: a warning on log), and the push
// credentials of a reference (Builder.PushAuth).
func ClientAuths(cfg *configfile.ConfigFile, log hclog.Logger) (map[string]registry.AuthConfig, func(ref string) string) {
	push := func(ref string) string {
		tok, _ := command.RetrieveAuthTokenFromImage(cfg, ref)
		return tok
	}
	all, err := cfg.GetAllCredentials()
	if err != nil {
		if log != nil {
			log.Warn("registry credentials unavailable", "error", err)
		}
		return nil, push
	}
	out := make(map[string]registry.AuthConfig, len(all))
	for host, ac := range all {
		out[host] = registry.AuthConfig{Username: ac.Username, Password: ac.Password, Auth: ac.Auth, ServerAddress: ac.ServerAddress,
			IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken}
	}
	return out, push
}
