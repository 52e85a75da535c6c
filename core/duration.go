package core

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that encodes as a Go duration string ("45s")
// in JSON and TOML (SPEC decision 1). Zero encodes as "0s"; an empty string,
// null or absent decodes to zero, which means "the default" wherever it is
// used.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; errors wrap ErrInvalid.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%w: duration %q: want a Go duration such as \"30s\" or \"2m\"", ErrInvalid, string(b))
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON accepts a duration string or null.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: duration must be a string such as \"30s\"", ErrInvalid)
	}
	return d.UnmarshalText([]byte(s))
}

// MarshalJSON encodes as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
