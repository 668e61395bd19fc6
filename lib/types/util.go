package types

import (
	"regexp"
	"slices"
	"strconv"
	"time"
)

var prefixRe = regexp.MustCompile(`^[a-z0-9][-a-z0-9]*$`)

func fieldIdx(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func oneOf[T ~string](field string, v T, allowed ...T) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	list := ""
	for i, a := range allowed {
		if i > 0 {
			list += ", "
		}
		list += string(a)
	}
	return Invalid(field, "must be one of %s, got %q", list, string(v))
}

func validateRefs(field string, names []string) error {
	for i, n := range names {
		if err := ValidateName(fieldIdx(field, i), n); err != nil {
			return err
		}
	}
	return nil
}

// MaxClaimMachineSets is the most machine sets a claim may list: each is
// kept in the claim and may be named in its reasons, so the list is short.
const MaxClaimMachineSets = 16

// validateSetList checks a list of machine set names: at most max, each a
// name, none twice.
func validateSetList(field string, names []string, max int) error {
	if len(names) > max {
		return Invalid(field, "at most %d machine sets, got %d", max, len(names))
	}
	if err := validateRefs(field, names); err != nil {
		return err
	}
	for i, n := range names {
		if slices.Index(names, n) < i {
			return Invalid(fieldIdx(field, i), "machine set %q is listed twice", n)
		}
	}
	return nil
}

func nonNegative(field string, v int) error {
	if v < 0 {
		return Invalid(field, "must not be negative")
	}
	return nil
}

// MaxPrefixLen is the longest machineNamePrefix: room is left for the
// name's random part.
const MaxPrefixLen = 40

// validatePrefix checks a machineNamePrefix: the start of an object name.
func validatePrefix(field, p string) error {
	if p == "" {
		return nil
	}
	if len(p) > MaxPrefixLen {
		return Invalid(field, "must be at most %d characters", MaxPrefixLen)
	}
	if !prefixRe.MatchString(p) {
		return Invalid(field, "must be lower-case letters, digits and '-', starting with a letter or digit")
	}
	return nil
}

// Upper bounds of counts and durations a client gives: far above any real
// fleet's, low enough that no arithmetic on them overflows.
const (
	MaxCount       = 10000
	MaxUsers       = 100000
	MaxBindTimeout = 24 * time.Hour
	// MaxSessionTimeout bounds how long a session lives without a keepalive.
	MaxSessionTimeout = 30 * 24 * time.Hour
)

// atMost refuses v above max.
func atMost(field string, v, max int) error {
	if v > max {
		return Invalid(field, "must be at most %d, got %d", max, v)
	}
	return nil
}
