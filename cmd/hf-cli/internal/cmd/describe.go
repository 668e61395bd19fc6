package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

func newDescribeCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show an object for people: its state and why, its history and the objects it relates to",
		Example: "  hf-cli describe claim c1\n" +
			"  hf-cli describe node vm-1a2b3c",
		Args:              exactArgs(2, "KIND and NAME"),
		ValidArgsFunction: completeKindAndName(f),
		RunE: func(c *cobra.Command, args []string) error {
			res, ok := resourceFor(args[0])
			if !ok {
				return usageErrorf("unknown kind %q%s", args[0], suggestKind(args[0]))
			}
			return runDescribe(c.Context(), f, res, args[1])
		},
	}
}

func runDescribe(ctx context.Context, f *Factory, res *resource, name string) error {
	cl, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	obj, err := cl.Get(ctx, res.Kind, name)
	if err != nil {
		return withNameSuggestion(ctx, cl, res.Kind, name, err)
	}
	if p := f.printer(); p.structured() {
		return p.encode(obj)
	}
	var generic map[string]any
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &generic); err != nil {
		return err
	}
	w := &describer{out: f.Out, now: f.Now()}
	m := obj.Meta()
	w.field("Name", m.Name)
	w.field("Kind", res.Kind)
	w.field("Created", timestamp(m.CreatedAt)+" ("+age(w.now, m.CreatedAt)+" ago)")
	w.field("Labels", labelsString(m.Labels))
	w.field("Annotations", labelsString(m.Annotations))
	status, _ := generic["status"].(map[string]any)
	for _, k := range []string{"phase", "status", "reason"} {
		if v, ok := status[k].(string); ok && v != "" {
			w.field(strings.ToUpper(k[:1])+k[1:], v)
		}
	}
	if spec, ok := generic["spec"].(map[string]any); ok {
		w.section("Spec")
		w.tree(spec, "  ")
	}
	// The rest of the status (a machine's addresses and resource, a node's
	// heartbeat, ...); what has a line or a section of its own is left out.
	rest := map[string]any{}
	for k, v := range status {
		switch k {
		case "phase", "status", "reason", "conditions", "phaseTimes":
		default:
			rest[k] = v
		}
	}
	if hasValue(rest) {
		w.section("Status")
		w.tree(rest, "  ")
	}
	if conds, ok := status["conditions"].([]any); ok && len(conds) > 0 {
		w.section("Conditions")
		rows := [][]string{{"TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"}}
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			since, _ := time.Parse(time.RFC3339Nano, str(cm["lastTransitionTime"]))
			rows = append(rows, []string{str(cm["type"]), str(cm["status"]), str(cm["reason"]), str(cm["message"]), age(w.now, since)})
		}
		w.rows(rows)
	}
	if pt, ok := status["phaseTimes"].(map[string]any); ok && len(pt) > 0 {
		w.section("History")
		type at struct {
			phase string
			t     time.Time
		}
		var hist []at
		for phase, v := range pt {
			t, _ := time.Parse(time.RFC3339Nano, str(v))
			hist = append(hist, at{phase, t})
		}
		sort.Slice(hist, func(i, j int) bool { return hist[i].t.Before(hist[j].t) })
		rows := [][]string{{"PHASE", "AT", "AFTER"}}
		for _, h := range hist {
			rows = append(rows, []string{h.phase, timestamp(h.t), h.t.Sub(hist[0].t).Round(time.Millisecond).String()})
		}
		w.rows(rows)
	}
	related := relatedObjects(ctx, cl, obj)
	if len(related) > 0 {
		w.section("Related")
		for _, r := range related {
			fmt.Fprintf(w.out, "  %s\n", r)
		}
	}
	return nil
}

// relatedObjects are one-line summaries of the objects obj refers to or
// that refer to it; what the caller may not read is left out.
func relatedObjects(ctx context.Context, cl *client.Client, obj types.Object) []string {
	var out []string
	get := func(kind, name string) types.Object {
		if name == "" {
			return nil
		}
		o, err := cl.Get(ctx, kind, name)
		if err != nil {
			return nil
		}
		return o
	}
	machine := func(name string) {
		if o := get(types.KindMachine, name); o != nil {
			m := o.(*types.Machine)
			line := fmt.Sprintf("machine %s: %s on node %s, driver %s", name, m.Status.Phase, m.Spec.Node, m.Spec.Driver)
			if eps := m.Spec.ConnectEndpoints; len(eps) > 0 {
				line += ", connect " + labelsString(eps)
			}
			out = append(out, line)
		}
	}
	node := func(name string) {
		if o := get(types.KindNode, name); o != nil {
			n := o.(*types.Node)
			out = append(out, fmt.Sprintf("node %s: %s, api %s, %d machines", name, n.Status.Phase, n.Spec.APIAddress, n.Status.Machines))
		}
	}
	switch o := obj.(type) {
	case *types.MachineClaim:
		machine(o.Status.Machine)
		node(o.Status.Node)
		if t := get(types.KindMachineTemplate, o.Spec.MachineTemplate); t != nil {
			r := t.(*types.MachineTemplate).Spec.Resources
			out = append(out, fmt.Sprintf("template %s: %s CPU, %s GiB RAM", o.Spec.MachineTemplate, num(r.CPU), num(r.RAMGB)))
		}
	case *types.Machine:
		if o.Spec.Claim != "" {
			if c := get(types.KindMachineClaim, o.Spec.Claim); c != nil {
				cl := c.(*types.MachineClaim)
				line := fmt.Sprintf("claim %s: %s", cl.Metadata.Name, cl.Status.Phase)
				if cl.Spec.User != "" {
					line += ", user " + cl.Spec.User
				}
				out = append(out, line)
			}
		}
		node(o.Spec.Node)
	case *types.Node:
		if ms, err := cl.ListFields(ctx, types.KindMachine, "", "spec.node="+o.Metadata.Name); err == nil {
			for _, m := range ms {
				if mm := m.(*types.Machine); mm.Spec.Node == o.Metadata.Name {
					claim := "unclaimed"
					if mm.Spec.Claim != "" {
						claim = "claim " + mm.Spec.Claim
					}
					out = append(out, fmt.Sprintf("machine %s: %s, %s, driver %s", mm.Metadata.Name, mm.Status.Phase, claim, mm.Spec.Driver))
				}
			}
		}
	case *types.MachineSet:
		if ms, err := cl.ListFields(ctx, types.KindMachine, "", "spec.machineSet="+o.Metadata.Name); err == nil {
			phases := map[string]int{}
			for _, m := range ms {
				if mm := m.(*types.Machine); mm.Spec.MachineSet == o.Metadata.Name {
					phases[string(mm.Status.Phase)]++
				}
			}
			if len(phases) > 0 {
				out = append(out, "machines by phase: "+countsString(phases))
			}
		}
	case *types.Session:
		if c := get(types.KindMachineClaim, o.Status.MachineClaim); c != nil {
			out = append(out, fmt.Sprintf("claim %s: %s", o.Status.MachineClaim, c.(*types.MachineClaim).Status.Phase))
		}
	}
	return out
}

func countsString(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// describer writes the sections of describe.
type describer struct {
	out io.Writer
	now time.Time
}

func (w *describer) field(k, v string) {
	if v != "" {
		fmt.Fprintf(w.out, "%-12s %s\n", k+":", v)
	}
}

func (w *describer) section(title string) { fmt.Fprintf(w.out, "%s:\n", title) }

func (w *describer) rows(rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, c := range r {
			if c == "" {
				c = "-"
			}
			if i < len(r)-1 {
				fmt.Fprintf(&b, "%-*s  ", widths[i], c)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w.out, b.String())
	}
}

// tree writes a JSON object as indented "key: value" lines: an object's
// fields one level further in, a list of objects as "- " items (a node's
// drivers, a machine's addresses), a list of plain values on one line.
func (w *describer) tree(m map[string]any, indent string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !hasValue(m[k]) {
			continue
		}
		switch v := m[k].(type) {
		case map[string]any:
			if line, ok := flatString(v); ok {
				fmt.Fprintf(w.out, "%s%s: %s\n", indent, k, line)
				continue
			}
			fmt.Fprintf(w.out, "%s%s:\n", indent, k)
			w.tree(v, indent+"  ")
		case []any:
			if !slices.ContainsFunc(v, func(e any) bool { _, ok := e.(map[string]any); return ok }) {
				fmt.Fprintf(w.out, "%s%s: %s\n", indent, k, listString(v))
				continue
			}
			fmt.Fprintf(w.out, "%s%s:\n", indent, k)
			for _, e := range v {
				item, ok := e.(map[string]any)
				if !ok {
					fmt.Fprintf(w.out, "%s  - %s\n", indent, str(e))
					continue
				}
				// The item's first field after the dash, the rest under it.
				var b strings.Builder
				sub := &describer{out: &b, now: w.now}
				sub.tree(item, indent+"    ")
				fmt.Fprintf(w.out, "%s  - %s", indent, strings.TrimPrefix(b.String(), indent+"    "))
			}
		default:
			fmt.Fprintf(w.out, "%s%s: %s\n", indent, k, str(v))
		}
	}
}

// hasValue reports whether v is worth a line: not null, "", {} or [].
func hasValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case map[string]any:
		for _, e := range x {
			if hasValue(e) {
				return true
			}
		}
		return false
	case []any:
		return len(x) > 0
	}
	return true
}

// flatString is a small object of plain values on one line ("cpu=2,
// ramGB=4"), false for anything larger, longer than a short line, or
// nested.
func flatString(m map[string]any) (string, bool) {
	if len(m) > 4 {
		return "", false
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch m[k].(type) {
		case map[string]any, []any:
			return "", false
		}
		parts = append(parts, k+"="+str(m[k]))
	}
	line := strings.Join(parts, ", ")
	return line, len(line) <= 80
}

// listString is a list of plain values on one line, comma-separated.
func listString(v []any) string {
	parts := make([]string, len(v))
	for i, e := range v {
		parts[i] = str(e)
	}
	return strings.Join(parts, ", ")
}

func newMachineLogsCmd(f *Factory, res *resource) *cobra.Command {
	var (
		follow bool
		tail   int
	)
	c := &cobra.Command{
		Use:   "logs NAME [-f] [--tail N]",
		Short: "Print a machine's output (a native entry's, a container's, a cloud VM's console), from its node",
		Example: "  hf-cli machine logs m-0dae389cb391 --tail 20\n" +
			"  hf-cli machine logs m-0dae389cb391 -f",
		Args:              exactArgs(1, "NAME"),
		ValidArgsFunction: completeNamesOf(f, res),
		RunE: func(c *cobra.Command, args []string) error {
			if tail < 0 {
				return usageErrorf("--tail must not be negative, got %d", tail)
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			ctx := c.Context()
			if !follow {
				var cancel context.CancelFunc
				ctx, cancel = f.requestContext(ctx)
				defer cancel()
			}
			err = cl.MachineLogs(ctx, args[0], tail, follow, f.Out)
			return withNameSuggestion(c.Context(), cl, types.KindMachine, args[0], err)
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the machine ends (Ctrl-C to stop)")
	c.Flags().IntVar(&tail, "tail", 0, "start with the last N lines (default: all)")
	return c
}
