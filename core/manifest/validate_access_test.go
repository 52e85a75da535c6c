package manifest

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// TestR73_ManifestRefusesBasicAuthThatIsNotBcrypt: basic_auth entries are
// htpasswd bcrypt lines only; plain text, MD5 (apr1), SHA and malformed
// entries are refused with how to make one, without repeating the
// password; allow entries are CIDRs or IPs; both need a public interface
// and a non-empty list.
func TestR73_ManifestRefusesBasicAuthThatIsNotBcrypt(t *testing.T) {
	pub := base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\n"
	checkRefusals(t, []refusalCase{
		{"plain text", pub + "basic_auth = [\"alice:hunter2\"]\n", "services.web.http[0].basic_auth[0]", `invalid basic_auth entry: user "alice": the password is not a bcrypt hash (plain text and crypt hashes are refused); make one with: htpasswd -nbB USER PASSWORD`},
		{"md5", pub + "basic_auth = [\"alice:$apr1$x$y\"]\n", "services.web.http[0].basic_auth[0]", `invalid basic_auth entry: user "alice": MD5 (apr1) hashes are refused, only bcrypt; make one with: htpasswd -nbB USER PASSWORD`},
		{"sha", pub + "basic_auth = [\"alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\"]\n", "services.web.http[0].basic_auth[0]", `invalid basic_auth entry: user "alice": SHA-1 hashes are refused, only bcrypt; make one with: htpasswd -nbB USER PASSWORD`},
		{"no user", pub + "basic_auth = [\"hunter2\"]\n", "services.web.http[0].basic_auth[0]", `invalid basic_auth entry: not an htpasswd line "user:bcrypt-hash"; make one with: htpasswd -nbB USER PASSWORD`},
		{"truncated bcrypt", pub + "basic_auth = [\"alice:$2y$05$abc\"]\n", "services.web.http[0].basic_auth[0]", `invalid basic_auth entry: user "alice": malformed bcrypt hash (want 60 characters "$2y$COST$..."); make one with: htpasswd -nbB USER PASSWORD`},
		{"empty list", pub + "basic_auth = []\n", "services.web.http[0].basic_auth", `basic_auth is empty: list htpasswd bcrypt lines ("user:$2y$..."; make one with: htpasswd -nbB USER PASSWORD), or remove basic_auth`},
		{"basic_auth needs public", base + "[[services.web.http]]\nport = 80\nbasic_auth = [\"alice:hunter2\"]\n", "services.web.http[0].basic_auth", `basic_auth applies to a public interface: set host, or remove basic_auth`},
		{"allow cidr", pub + "allow = [\"10.0.0.0/33\"]\n", "services.web.http[0].allow[0]", `invalid allow entry: "10.0.0.0/33" is not a CIDR (e.g. "10.0.0.0/8") or an IP address`},
		{"allow empty", pub + "allow = []\n", "services.web.http[0].allow", `allow is empty: list the client CIDRs or IPs let in, e.g. ["10.0.0.0/8"], or remove allow`},
		{"allow needs public", base + "[[services.web.http]]\nport = 80\nallow = [\"10.0.0.0/8\"]\n", "services.web.http[0].allow", `allow applies to a public interface: set host, or remove allow`},
	})
}

// TestR73_ManifestCarriesBasicAuthAndAllow: valid entries reach the
// interface's spec (hash lines as written, allow entries canonical), and a
// user listed twice or a cost above the bound is refused.
func TestR73_ManifestCarriesBasicAuthAndAllow(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	line := "alice:" + string(h)
	doc := "name = \"blog\"\n[services.web]\nimage = \"blog:1\"\n[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\n" +
		"basic_auth = ['" + line + "']\nallow = [\"10.1.2.3/8\", \"192.0.2.7\", \"2001:db8::/32\"]\n"
	spec, err := Parse("app.toml", []byte(doc))
	require.NoError(t, err)
	web, ok := spec.Service("web")
	require.True(t, ok)
	iface := web.HTTP[0]
	assert.Equal(t, []string{line}, iface.BasicAuth)
	assert.Equal(t, []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"}, iface.Allow)

	_, err = Parse("app.toml", []byte(withBasicAuth(doc, "basic_auth = ['"+line+"', '"+line+"']")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `user "alice" is already listed at services.web.http[0].basic_auth[0]`)
	assert.NotContains(t, err.Error(), string(h))

	costly := "alice:$2y$15$" + string(h[7:])
	_, err = Parse("app.toml", []byte(withBasicAuth(doc, "basic_auth = ['"+costly+"']")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bcrypt cost 15 is above 14")
}

// withBasicAuth replaces doc's basic_auth line with line.
func withBasicAuth(doc, line string) string {
	return regexp.MustCompile(`(?m)^basic_auth = .*$`).ReplaceAllLiteralString(doc, line)
}
