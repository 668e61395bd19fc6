package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// maxManifest bounds what -f reads.
const maxManifest = 32 << 20

// document is one object read from a -f file.
type document struct {
	// Index is the 1-based position in the file, for messages.
	Index int
	Kind  string
	Name  string
	// JSON is the document as the API takes it, with its kind set.
	JSON []byte
	// Object is JSON decoded strictly into its kind.
	Object types.Object
}

func (d document) ref() string { return ref(d.Kind, d.Name) }

// readManifest reads path ("-" is in) and returns its documents. See
// parseDocuments.
func readManifest(path string, in io.Reader, defaultKind string) ([]document, error) {
	var r io.Reader
	if path == "-" {
		r = in
	} else {
		fh, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		defer fh.Close()
		r = fh
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(raw) > maxManifest {
		return nil, fmt.Errorf("read %s: larger than %d MB", path, maxManifest>>20)
	}
	docs, err := parseDocuments(raw, defaultKind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", displayPath(path), err)
	}
	return docs, nil
}

func displayPath(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// parseDocuments splits raw into objects. raw is JSON (one or more objects, an
// array of objects) or YAML (documents separated by ---); either may hold a
// list {"kind":"XList","items":[...]} as printed by -o json|yaml. Documents
// without a kind get defaultKind; when defaultKind is set every document must
// be of that kind. Each document is decoded strictly, so a misspelt field is
// an error here rather than silently dropped.
func parseDocuments(raw []byte, defaultKind string) ([]document, error) {
	var values []any
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		for {
			var v any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("parse json: %w", err)
			}
			values = append(values, v)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var v any
			err := dec.Decode(&v)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("parse yaml: %w", err)
			}
			if v != nil {
				values = append(values, v)
			}
		}
	}
	var flat []map[string]any
	for _, v := range values {
		if err := flatten(jsonCompatible(v), &flat); err != nil {
			return nil, err
		}
	}
	if len(flat) == 0 {
		return nil, errors.New("no objects found")
	}
	docs := make([]document, 0, len(flat))
	for i, m := range flat {
		d, err := newDocument(i+1, m, defaultKind)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// flatten appends the objects of v (an object, an array, a list object).
func flatten(v any, out *[]map[string]any) error {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			if err := flatten(e, out); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		kind, _ := t["kind"].(string)
		if items, ok := t["items"].([]any); ok && (kind == "" || kind == "List" || strings.HasSuffix(kind, "List")) {
			return flatten(items, out)
		}
		*out = append(*out, t)
		return nil
	}
	return fmt.Errorf("document %d: want an object, got %T", len(*out)+1, v)
}

// newDocument checks and decodes one object.
func newDocument(idx int, m map[string]any, defaultKind string) (document, error) {
	kind, _ := m["kind"].(string)
	switch {
	case kind == "" && defaultKind == "":
		return document{}, fmt.Errorf("document %d: no kind", idx)
	case kind == "":
		kind = defaultKind
	default:
		k, err := client.NormalizeKind(kind)
		if err != nil || k != kind {
			return document{}, fmt.Errorf("document %d: unknown kind %q", idx, kind)
		}
		if defaultKind != "" && kind != defaultKind {
			return document{}, fmt.Errorf("document %d is a %s, not a %s", idx, kind, defaultKind)
		}
	}
	m["kind"] = kind
	raw, err := json.Marshal(m)
	if err != nil {
		return document{}, fmt.Errorf("document %d: %w", idx, err)
	}
	obj, _ := types.New(kind)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return document{}, fmt.Errorf("document %d (%s): %w", idx, strings.ToLower(kind), err)
	}
	name := obj.Meta().Name
	if name == "" {
		return document{}, fmt.Errorf("document %d (%s): metadata.name is required", idx, strings.ToLower(kind))
	}
	return document{Index: idx, Kind: kind, Name: name, JSON: raw, Object: obj}, nil
}

// jsonCompatible turns what the YAML decoder returns into values encoding/json
// marshals: maps with non-string keys get string keys.
func jsonCompatible(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonCompatible(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonCompatible(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonCompatible(e)
		}
		return t
	}
	return v
}
