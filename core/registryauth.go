package core

import "context"

// registryAuthKey carries the registry credentials of one pull in a context.
type registryAuthKey struct{}

// WithRegistryAuth returns ctx carrying auth, the Engine API's X-Registry-Auth
// value (base64url JSON of the registry credentials) for the Runtime.PullImage
// call made with it (SPEC R13, S26). An empty auth returns ctx unchanged. The
// value crosses the plugin wire in the pull request only; it is never logged,
// journaled or stored.
func WithRegistryAuth(ctx context.Context, auth string) context.Context {
	if auth == "" {
		return ctx
	}
	return context.WithValue(ctx, registryAuthKey{}, auth)
}

// RegistryAuthFrom returns the credentials WithRegistryAuth put in ctx, ""
// for an anonymous pull.
func RegistryAuthFrom(ctx context.Context) string {
	s, _ := ctx.Value(registryAuthKey{}).(string)
	return s
}
