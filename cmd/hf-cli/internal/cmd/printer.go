package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/types"
)

// printer writes command results in the chosen format: aligned tables on a
// terminal, tab-separated lines with a header when piped, or the JSON shape of
// the API as JSON or YAML.
type printer struct {
	out      io.Writer
	format   string
	terminal bool
	now      func() time.Time
}

// structured reports whether the format is json or yaml.
func (p *printer) structured() bool { return p.format == formatJSON || p.format == formatYAML }

// objects prints objects of one resource: a table, or in json/yaml the object
// itself when there is one and list is false, else a {"kind":"<Kind>List"}.
func (p *printer) objects(res *resource, objs []types.Object, list bool) error {
	if p.structured() {
		if len(objs) == 1 && !list {
			return p.encode(objs[0])
		}
		return p.encode(listOf(res.Kind+"List", objs))
	}
	rows := make([][]string, 0, len(objs))
	for _, o := range objs {
		rows = append(rows, p.row(res, o))
	}
	return p.table(p.header(res), rows)
}

// header is the table header of res.
func (p *printer) header(res *resource) []string {
	h := append([]string{"NAME"}, res.Columns...)
	if p.terminal {
		return append(h, "AGE")
	}
	// Piped output carries the exact creation time, which scripts can use.
	return append(h, "CREATED")
}

// row is the table row of o.
func (p *printer) row(res *resource, o types.Object) []string {
	m := o.Meta()
	created := timestamp(m.CreatedAt)
	if p.terminal {
		created = age(p.now(), m.CreatedAt)
	}
	r := append([]string{m.Name}, res.Row(o)...)
	return append(r, created)
}

// table writes header and rows.
func (p *printer) table(header []string, rows [][]string) error {
	if !p.terminal {
		var b strings.Builder
		for _, r := range append([][]string{header}, rows...) {
			for i, c := range r {
				if i > 0 {
					b.WriteByte('\t')
				}
				b.WriteString(strings.NewReplacer("\t", " ", "\n", " ").Replace(c))
			}
			b.WriteByte('\n')
		}
		_, err := io.WriteString(p.out, b.String())
		return err
	}
	tw := tabwriter.NewWriter(p.out, 0, 8, 3, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		cells := make([]string, len(r))
		for i, c := range r {
			c = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
			if c == "" {
				c = "-"
			}
			cells[i] = c
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// encode writes v as indented JSON or as YAML of the same shape.
func (p *printer) encode(v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if p.format == formatYAML {
		if raw, err = jsonToYAML(raw); err != nil {
			return err
		}
		_, err = p.out.Write(raw)
		return err
	}
	_, err = fmt.Fprintf(p.out, "%s\n", raw)
	return err
}

// done prints the outcome of a write ("machineclaim/c1 created") in table
// format; json and yaml print the objects instead (see objects).
func (p *printer) done(kind, name, what string) {
	fmt.Fprintf(p.out, "%s %s\n", ref(kind, name), what)
}

// list is the JSON shape of a list response.
type list struct {
	Kind  string         `json:"kind"`
	Items []types.Object `json:"items"`
}

func listOf(kind string, objs []types.Object) list {
	if objs == nil {
		objs = []types.Object{}
	}
	return list{Kind: kind, Items: objs}
}

// jsonToYAML converts a JSON document to block-style YAML, keeping the order
// and names of the JSON fields.
func jsonToYAML(raw []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("convert to yaml: %w", err)
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("convert to yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("convert to yaml: %w", err)
	}
	return buf.Bytes(), nil
}

// plain drops the flow and quoting styles JSON parsing leaves on nodes; the
// encoder still quotes strings that would otherwise read as another type.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}
