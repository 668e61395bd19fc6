package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/hf-fleet/hf/lib/types"
)

// sources remembers where each key's value came from, so that an error can say
// "(from HF_CLUSTER_PROFILE)" or "(hf.yml line 12)".
type sources struct {
	file  string
	lines map[string]int    // key path -> line in file
	set   map[string]string // key path -> "HF_X" or "--flag", for keys env or flags set
	// overridden holds the keys whose value is checked although a later layer
	// overrides it: key path -> "HF_X" or "--flag".
	overridden map[string]string
}

// fileAt returns "file line N" for a key path of the file, or "".
func (s *sources) fileAt(key string) string {
	if line, ok := s.lines[key]; ok && s.file != "" {
		return fmt.Sprintf("%s line %d", s.file, line)
	}
	return ""
}

// from says where the value of key came from, or "" for a default. A list
// element ("cluster.join[2]") that env or a flag set is attributed to the list,
// and a key missing from a list element ("drivers[1].instance") to the element.
func (s *sources) from(key string) string {
	if s == nil {
		return ""
	}
	for k := key; k != ""; {
		if src, ok := s.set[k]; ok {
			return s.overriddenBy(k, "from "+src)
		}
		if at := s.fileAt(k); at != "" {
			return s.overriddenBy(k, at)
		}
		switch i := strings.LastIndexByte(k, '['); {
		case i >= 0 && strings.HasSuffix(k, "]"):
			// cluster.join[2] -> cluster.join
			k = k[:i]
		case strings.Contains(k, "]."):
			// drivers[1].instance, not in the file -> drivers[1]
			k = k[:strings.LastIndexByte(k, '.')]
			if !strings.HasSuffix(k, "]") {
				return ""
			}
		default:
			return ""
		}
	}
	return ""
}

// overriddenBy adds to at the layer that overrides key (or the list that
// key is an element of: "cluster.join[1]"), if one does.
func (s *sources) overriddenBy(key, at string) string {
	for k := key; ; {
		if by, ok := s.overridden[k]; ok {
			return at + ", overridden by " + by
		}
		i := strings.LastIndexByte(k, '[')
		if i < 0 || !strings.HasSuffix(k, "]") {
			return at
		}
		k = k[:i]
	}
}

// wrap formats a field error as "config: field: message (source)".
func (s *sources) wrap(fe *types.FieldError) error {
	return fieldErr(fe.Field, s.from(fe.Field), "%s", fe.Message)
}

// fieldErr builds "config: field: message (from)"; errors.As finds the
// *types.FieldError and errors.Is(err, types.ErrInvalid) holds.
func fieldErr(field, from, format string, args ...any) error {
	fe := types.Invalid(field, format, args...)
	if from != "" {
		return fmt.Errorf("config: %w (%s)", fe, from)
	}
	return fmt.Errorf("config: %w", fe)
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook decodes Go duration strings ("30s"). A bare number is refused
// rather than taken as nanoseconds, except 0.
func durationHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to != durationType || data == nil {
		return data, nil
	}
	switch v := data.(type) {
	case time.Duration:
		return v, nil
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q; want a number with a unit such as 500ms, 30s, 5m or 1h30m", v)
		}
		return d, nil
	case int, int64, uint64, float64:
		if reflect.ValueOf(v).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("invalid duration %v: add a unit, e.g. \"%vs\"", v, v)
	}
	return nil, fmt.Errorf("invalid duration: got %s", describeValue(data))
}

// splitList splits on commas, trims spaces and drops empty entries.
func splitList(s string) []string {
	out := []string{}
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// kindHook stops mapstructure's weak typing, which the strings of the
// environment and the flags need, from bending the file's typed values: a
// YAML bool where text is wanted is "true" or "false" (weakly "1" or "0"),
// and a number where a bool is wanted, a bool where a number is, or a
// fraction where a whole number is, is an error instead of true, 1 or a
// truncated number.
func kindHook(_ reflect.Type, to reflect.Type, data any) (any, error) {
	if to == durationType { // durationHook's
		return data, nil
	}
	switch to.Kind() {
	case reflect.String:
		if b, ok := data.(bool); ok {
			return strconv.FormatBool(b), nil
		}
	case reflect.Bool:
		switch data.(type) {
		case int, int64, uint64, float64:
			return nil, fmt.Errorf("must be true or false, got %s", describeValue(data))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch x := data.(type) {
		case bool:
			return nil, fmt.Errorf("must be a whole number, got %t", x)
		case float64:
			if x != math.Trunc(x) || math.Abs(x) >= 1<<63 {
				return nil, fmt.Errorf("must be a whole number, got %s", describeValue(x))
			}
		}
	case reflect.Float32, reflect.Float64:
		if b, ok := data.(bool); ok {
			return nil, fmt.Errorf("must be a number, got %t", b)
		}
	}
	return data, nil
}

// decode turns the merged settings into a Config.
func decode(settings map[string]any, src *sources) (Config, []error) {
	var cfg Config
	md := &mapstructure.Metadata{}
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           &cfg,
		TagName:          "mapstructure",
		WeaklyTypedInput: true,
		Metadata:         md,
		DecodeHook:       mapstructure.ComposeDecodeHookFunc(durationHook, kindHook),
	})
	if err != nil {
		return Config{}, []error{fmt.Errorf("config: %w", err)}
	}
	if err := dec.Decode(settings); err != nil {
		return Config{}, decodeErrors(err, src)
	}
	// checkKeys already refused unknown keys; this catches what it might miss.
	if len(md.Unused) > 0 {
		sort.Strings(md.Unused)
		errs := make([]error, 0, len(md.Unused))
		for _, k := range md.Unused {
			errs = append(errs, &unknownKeyError{key: k, at: src.fileAt(k)})
		}
		return Config{}, errs
	}
	return cfg, nil
}

// decodeErrors rewrites mapstructure's errors as "config: key: message".
func decodeErrors(err error, src *sources) []error {
	var leaves []*mapstructure.DecodeError
	collectDecodeErrors(err, &leaves)
	if len(leaves) == 0 {
		return []error{fmt.Errorf("config: %w", err)}
	}
	sort.SliceStable(leaves, func(i, j int) bool { return leaves[i].Name() < leaves[j].Name() })
	errs := make([]error, 0, len(leaves))
	for _, de := range leaves {
		key := keyPath(de.Name())
		errs = append(errs, fieldErr(key, src.from(key), "%s", describeDecodeError(de.Unwrap())))
	}
	return errs
}

func collectDecodeErrors(err error, out *[]*mapstructure.DecodeError) {
	switch e := err.(type) {
	case *mapstructure.DecodeError:
		*out = append(*out, e)
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			collectDecodeErrors(x, out)
		}
	case interface{ Unwrap() error }:
		collectDecodeErrors(e.Unwrap(), out)
	}
}

// keyPath turns mapstructure's "labels[zone]" into "labels.zone"; list indexes
// ("drivers[1]") stay.
func keyPath(name string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(name, '[')
		if i < 0 {
			b.WriteString(name)
			return b.String()
		}
		j := strings.IndexByte(name[i:], ']')
		if j < 0 {
			b.WriteString(name)
			return b.String()
		}
		inner := name[i+1 : i+j]
		b.WriteString(name[:i])
		if _, err := strconv.Atoi(inner); err == nil {
			b.WriteString(name[i : i+j+1])
		} else {
			b.WriteString("." + inner)
		}
		name = name[i+j+1:]
	}
}

func describeDecodeError(err error) string {
	var ute *mapstructure.UnconvertibleTypeError
	var pe *mapstructure.ParseError
	switch {
	case errors.As(err, &ute) && ute.Expected.IsValid():
		return fmt.Sprintf("must be %s, got %s", describeType(ute.Expected.Type()), describeValue(ute.Value))
	case errors.As(err, &pe) && pe.Expected.IsValid():
		return fmt.Sprintf("must be %s, got %q", describeType(pe.Expected.Type()), fmt.Sprint(pe.Value))
	case err == nil:
		return "invalid value"
	}
	return err.Error()
}

// describeType names a Go type the way a config file author thinks of it.
func describeType(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration such as "30s"`
	case t != nil && (t.Kind() == reflect.Map || t.Kind() == reflect.Struct):
		return "a mapping"
	}
	return types.DescribeType(t)
}

// describeValue names the kind of a parsed value.
func describeValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing"
	case string:
		if len(x) > 32 { // may be a secret in the wrong place: do not echo it
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("%t", x)
	case int, int64, uint64, float64:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
