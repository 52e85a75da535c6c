package swarm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

// The state configs hold an app's records (manifest env values, webhook
// URLs, basic-auth hashes), and `docker config inspect` returns a config's
// data to anyone with a manager's API, and into every support bundle. So a
// state config is sealed: AES-256-GCM under the mirror key of the control
// record (Control.MirrorKey), which lives only in the state directory
// (0600) and in the manager-only record secret an adopting manager
// recovers before it reads the configs. LabelStateEnc says how a config's
// data is sealed ("" : not at all, an edge from before the key).

// LabelStateEnc is the sealing of a state config's data.
const LabelStateEnc = "dev.gordon.state-enc"

// sealAESGCM is LabelStateEnc's value for sealed data; sealedPrefix
// starts such data (then the 12-byte nonce, then the ciphertext).
const (
	sealAESGCM   = "aes256gcm-1"
	sealedPrefix = "gordon-sealed-1\x00"
)

// ErrSealed is a sealed state config read without its key.
var ErrSealed = errors.New("the state config is sealed and the mirror key is not at hand")

// mirrorKey is the key of the control record in stateDir (nil when there
// is none, or it has no key: the configs are then written unsealed).
func mirrorKey(stateDir string) []byte {
	c, ok, err := LoadControl(stateDir)
	if err != nil || !ok {
		return nil
	}
	return c.Key()
}

// Key is the mirror key (32 bytes; nil without one).
func (c Control) Key() []byte {
	k, err := hex.DecodeString(c.MirrorKey)
	if err != nil || len(k) != 32 {
		return nil
	}
	return k
}

func seal(key, plain []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte(sealedPrefix), nonce...)
	return gcm.Seal(out, nonce, plain, []byte(sealedPrefix)), nil
}

// unseal opens data sealed with key; data without the prefix is returned
// as it is (an unsealed config).
func unseal(key, data []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(data, []byte(sealedPrefix))
	if !ok {
		return data, nil
	}
	if key == nil {
		return nil, fmt.Errorf("%w: %w", ErrSealed, core.ErrUnavailable)
	}
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(rest) < gcm.NonceSize() {
		return nil, fmt.Errorf("a sealed state config too short: %w", core.ErrInvalid)
	}
	plain, err := gcm.Open(nil, rest[:gcm.NonceSize()], rest[gcm.NonceSize():], []byte(sealedPrefix))
	if err != nil {
		return nil, fmt.Errorf("the state config does not open with this swarm's mirror key: %w", core.ErrInvalid)
	}
	return plain, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
