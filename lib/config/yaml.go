package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// maxNodes bounds the nodes a document may expand to, aliases included, so that
// an alias bomb ("billion laughs") or a self-referencing anchor fails fast.
const maxNodes = 100_000

// document is a parsed config file.
type document struct {
	// root holds the file's values: map[string]any, []any and scalars (string,
	// bool, int, float64, nil). Timestamps stay strings, as written.
	root map[string]any
	// lines maps each key path ("cluster.join", "drivers[1].name") to its line.
	lines map[string]int
}

// parser turns a yaml.Node tree into plain values.
type parser struct {
	file  string
	lines map[string]int
	nodes int
	// expanding holds the anchored nodes being expanded, to refuse cycles.
	expanding map[*yaml.Node]bool
}

// parseYAML parses a config file. An empty file is an empty config.
func parseYAML(file string, data []byte) (document, error) {
	p := &parser{file: file, lines: map[string]int{}, expanding: map[*yaml.Node]bool{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return document{root: map[string]any{}, lines: p.lines}, nil
		}
		return document{}, fmt.Errorf("config: parse %s: %w", file, err)
	}
	for { // a trailing "---" is harmless; a second document is a mistake
		var extra yaml.Node
		err := dec.Decode(&extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return document{}, fmt.Errorf("config: parse %s: %w", file, err)
		}
		if len(extra.Content) > 0 && extra.Content[0].ShortTag() != "!!null" {
			return document{}, p.errorf(extra.Content[0], "a config file holds one YAML document, found another")
		}
	}
	v, err := p.value("", &n)
	if err != nil {
		return document{}, err
	}
	switch m := v.(type) {
	case nil:
		return document{root: map[string]any{}, lines: p.lines}, nil
	case map[string]any:
		return document{root: m, lines: p.lines}, nil
	}
	return document{}, p.errorf(&n, "the top level must be a mapping of keys")
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("config: parse %s: line %d: %s", p.file, n.Line, fmt.Sprintf(format, args...))
}

// value converts n; path is where it sits, for line numbers.
func (p *parser) value(path string, n *yaml.Node) (any, error) {
	p.nodes++
	if p.nodes > maxNodes {
		return nil, p.errorf(n, "document expands to more than %d nodes (aliases?)", maxNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return p.value(path, n.Content[0])
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, p.errorf(n, "unknown alias")
		}
		return p.expand(path, n, n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			ip := path + "[" + strconv.Itoa(i) + "]"
			p.lines[ip] = c.Line
			v, err := p.value(ip, c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		if n.Anchor != "" {
			return p.expand(path, n, n)
		}
		return p.mapping(path, n)
	case yaml.ScalarNode:
		return p.scalar(n)
	}
	return nil, p.errorf(n, "unsupported YAML node")
}

func (p *parser) mapping(path string, n *yaml.Node) (any, error) {
	out := map[string]any{}
	var merges, pairs []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		pairs = append(pairs, k, n.Content[i+1])
	}
	// "<<: *base" merges base's keys first, so that the keys written here win.
	for _, m := range merges {
		if err := p.merge(path, out, m); err != nil {
			return nil, err
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(pairs); i += 2 {
		k, v := pairs[i], pairs[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errorf(k, "a mapping key must be a plain value")
		}
		if line, dup := seen[k.Value]; dup {
			return nil, p.errorf(k, "key %q is already defined at line %d", k.Value, line)
		}
		seen[k.Value] = k.Line
		kp := joinKey(path, k.Value)
		p.lines[kp] = k.Line
		val, err := p.value(kp, v)
		if err != nil {
			return nil, err
		}
		out[k.Value] = val
	}
	return out, nil
}

// merge adds the keys of the mapping (or sequence of mappings) m that out does
// not have yet; in a sequence the earlier mapping wins, as YAML specifies.
func (p *parser) merge(path string, out map[string]any, m *yaml.Node) error {
	p.nodes++
	if p.nodes > maxNodes {
		return p.errorf(m, "document expands to more than %d nodes (aliases?)", maxNodes)
	}
	src := m
	for src.Kind == yaml.AliasNode && src.Alias != nil {
		src = src.Alias
	}
	if src.Kind == yaml.SequenceNode {
		for _, c := range src.Content {
			if err := p.merge(path, out, c); err != nil {
				return err
			}
		}
		return nil
	}
	if src.Kind != yaml.MappingNode {
		return p.errorf(m, "<< must merge a mapping")
	}
	v, err := p.expand(path, m, src)
	if err != nil {
		return err
	}
	for k, val := range v.(map[string]any) {
		if _, ok := out[k]; !ok {
			out[k] = val
		}
	}
	return nil
}

// expand converts target, which at refers to (an alias, a merge or target's own
// anchor), refusing an anchor that contains a reference to itself.
func (p *parser) expand(path string, at, target *yaml.Node) (any, error) {
	if p.expanding[target] {
		return nil, p.errorf(at, "anchor %q refers to itself", target.Anchor)
	}
	p.expanding[target] = true
	defer delete(p.expanding, target)
	if target.Kind == yaml.MappingNode {
		return p.mapping(path, target)
	}
	return p.value(path, target)
}

func (p *parser) scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		// A timestamp stays text: "since: 2024-01-01" is a label value, not a time.
		return n.Value, nil
	case "!!null":
		return nil, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, p.errorf(n, "%v", err)
	}
	return v, nil
}

// joinKey appends a map key to a key path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
