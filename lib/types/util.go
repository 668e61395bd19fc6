package types

import "strconv"

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

func nonNegative(field string, v int) error {
	if v < 0 {
		return Invalid(field, "must not be negative")
	}
	return nil
}
