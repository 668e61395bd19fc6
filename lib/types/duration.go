package types

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration string
// ("90s", "1h30m"). A JSON number is taken as seconds.
type Duration struct{ time.Duration }

// D builds a Duration.
func D(d time.Duration) Duration { return Duration{d} }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err2 := json.Unmarshal(b, &secs); err2 != nil {
			return fmt.Errorf("duration: want a string like \"30s\" or seconds")
		}
		// time.Duration holds ~292 years: more does not convert (1e10
		// seconds came out negative).
		if ns := secs * float64(time.Second); math.Abs(ns) < math.MaxInt64 {
			d.Duration = time.Duration(ns)
			return nil
		}
		return fmt.Errorf("duration: %g seconds is too long (at most ~292 years)", secs)
	}
	if s == "" {
		d.Duration = 0
		return nil
	}
	p, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	d.Duration = p
	return nil
}
