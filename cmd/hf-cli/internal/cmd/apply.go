package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// fileOp is what a -f command does with each document.
type fileOp string

// File operations.
const (
	fileCreate fileOp = "create"
	fileApply  fileOp = "apply"
	fileDelete fileOp = "delete"
)

// fileOptions are the options of create/apply/delete -f.
type fileOptions struct {
	f    *Factory
	op   fileOp
	file string
	// kind restricts the documents to one kind (resource subcommands); empty at
	// the top level, where each document names its kind.
	kind           string
	ignoreNotFound bool
	// capacityCheck is passed on the creates (client.CreateOptions).
	capacityCheck string
}

// capacityChecks are the values of --capacity-check, as the API takes them.
var capacityChecks = []string{"refuse", "warn", "off"}

// addCapacityCheckFlag gives a create or apply command --capacity-check.
func addCapacityCheckFlag(c *cobra.Command, opts *fileOptions) {
	c.Flags().StringVar(&opts.capacityCheck, "capacity-check", "",
		"a ScheduledEvent that does not fit the cluster's capacity (created, or updated in what it needs or when): refuse (the server's default), warn (write it with a warning) or off")
}

// newFileCmd builds the top-level `create|apply|delete -f FILE`. The top-level
// delete also takes `KIND NAME...`.
func newFileCmd(f *Factory, op fileOp) *cobra.Command {
	opts := &fileOptions{f: f, op: op}
	c := &cobra.Command{
		Use:   string(op) + " -f FILE",
		Short: fileShort(op, "objects"),
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.file == "" {
				return usageErrorf("%s needs -f FILE (or - for stdin)", c.CommandPath())
			}
			return runFile(c.Context(), opts)
		},
	}
	c.Flags().StringVarP(&opts.file, "filename", "f", "", "YAML or JSON file with one or more objects (- for stdin)")
	if op != fileDelete {
		addCapacityCheckFlag(c, opts)
	}
	if op == fileDelete {
		c.Use = "delete (-f FILE | KIND NAME...)"
		c.Args = cobra.ArbitraryArgs
		c.Flags().BoolVar(&opts.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
		c.RunE = func(c *cobra.Command, args []string) error {
			switch {
			case opts.file != "" && len(args) > 0:
				return usageErrorf("delete takes either -f FILE or KIND NAME..., not both")
			case opts.file != "":
				return runFile(c.Context(), opts)
			case len(args) < 2:
				return usageErrorf("delete needs -f FILE or KIND NAME...")
			}
			res, ok := resourceFor(args[0])
			if !ok {
				return usageErrorf("unknown kind %q", args[0])
			}
			return runDelete(c.Context(), &deleteOptions{f: f, res: res, names: args[1:], ignoreNotFound: opts.ignoreNotFound})
		}
	}
	return c
}

// newKindFileCmd builds `<resource> create|apply -f FILE`.
func newKindFileCmd(f *Factory, res *resource, op fileOp) *cobra.Command {
	opts := &fileOptions{f: f, op: op, kind: res.Kind}
	c := &cobra.Command{
		Use:   string(op) + " -f FILE",
		Short: fileShort(op, res.Use+"s"),
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.file == "" {
				return usageErrorf("%s needs -f FILE (or - for stdin)", c.CommandPath())
			}
			return runFile(c.Context(), opts)
		},
	}
	c.Flags().StringVarP(&opts.file, "filename", "f", "", "YAML or JSON file with one or more objects (- for stdin)")
	if res.Kind == types.KindScheduledEvent {
		addCapacityCheckFlag(c, opts)
	}
	return c
}

func fileShort(op fileOp, what string) string {
	switch op {
	case fileCreate:
		return "Create " + what + " from a YAML or JSON file"
	case fileApply:
		return "Create " + what + " from a file, or update them if they exist"
	}
	return "Delete " + what
}

// runFile applies op to every document of the file. It carries on past a
// failed document and returns every failure.
func runFile(ctx context.Context, opts *fileOptions) error {
	f := opts.f
	if opts.capacityCheck != "" && !slices.Contains(capacityChecks, opts.capacityCheck) {
		return usageErrorf("--capacity-check must be one of %s, got %q", strings.Join(capacityChecks, ", "), opts.capacityCheck)
	}
	docs, err := readManifest(opts.file, f.In, opts.kind)
	if err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	p := f.printer()
	var (
		errs    []error
		results []types.Object
	)
	for _, d := range docs {
		obj, what, err := fileStep(ctx, f, c, opts, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", opts.op, d.ref(), err))
			continue
		}
		if obj != nil {
			results = append(results, obj)
		}
		if !p.structured() || opts.op == fileDelete {
			p.done(d.Kind, d.Name, what)
		}
	}
	if p.structured() && opts.op != fileDelete && len(results) > 0 {
		if err := printMixed(p, results, len(docs) > 1); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fileStep does op for one document and says what happened.
func fileStep(ctx context.Context, f *Factory, c *client.Client, opts *fileOptions, d document) (types.Object, string, error) {
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	create := client.CreateOptions{CapacityCheck: opts.capacityCheck}
	switch opts.op {
	case fileCreate:
		obj, err := c.CreateRawWith(ctx, d.Kind, d.JSON, create)
		return obj, "created", err
	case fileApply:
		return applyDocument(ctx, c, d, create)
	}
	err := c.Delete(ctx, d.Kind, d.Name)
	if opts.ignoreNotFound && client.IsNotFound(err) {
		return nil, "not found", nil
	}
	return nil, "deleted", err
}

// applyDocument creates d, or updates the existing object with d's spec,
// labels and annotations (keeping its status), conditional on the version
// read; both with create's options.
func applyDocument(ctx context.Context, c *client.Client, d document, create client.CreateOptions) (types.Object, string, error) {
	cur, err := c.Get(ctx, d.Kind, d.Name)
	if client.IsNotFound(err) {
		obj, err := c.CreateRawWith(ctx, d.Kind, d.JSON, create)
		return obj, "created", err
	}
	if err != nil {
		return nil, "", err
	}
	merged, changed, err := mergeForApply(cur, d)
	if err != nil {
		return nil, "", err
	}
	if !changed {
		return cur, "unchanged", nil
	}
	// An update that changes what an event needs is checked as a create is.
	obj, err := c.UpdateWith(ctx, merged, create)
	return obj, "configured", err
}

// mergeForApply overlays the document's spec (and any other top-level field
// but kind, metadata and status), labels and annotations on cur. The result
// keeps cur's version, so the update fails if someone wrote in between.
func mergeForApply(cur types.Object, d document) (types.Object, bool, error) {
	curJSON, err := json.Marshal(cur)
	if err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	var into, from map[string]json.RawMessage
	if err := json.Unmarshal(curJSON, &into); err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	// The document as decoded, so that what it gives under a field's
	// earlier name compares as today's field.
	docJSON, err := json.Marshal(d.Object)
	if err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	if err := json.Unmarshal(docJSON, &from); err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	for k, v := range from {
		if k != "kind" && k != "metadata" && k != "status" {
			into[k] = v
		}
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(into["metadata"], &meta); err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	want := d.Object.Meta()
	for key, v := range map[string]map[string]string{"labels": want.Labels, "annotations": want.Annotations} {
		if len(v) == 0 {
			delete(meta, key)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, false, fmt.Errorf("apply: %w", err)
		}
		meta[key] = raw
	}
	if into["metadata"], err = json.Marshal(meta); err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	mergedJSON, err := json.Marshal(into)
	if err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	merged, err := client.DecodeObject(d.Kind, mergedJSON)
	if err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	after, err := json.Marshal(merged)
	if err != nil {
		return nil, false, fmt.Errorf("apply: %w", err)
	}
	return merged, !bytes.Equal(after, curJSON), nil
}

// printMixed prints objects that may be of several kinds as json/yaml: the
// object alone, or a list named for the kind when all share one.
func printMixed(p *printer, objs []types.Object, asList bool) error {
	if len(objs) == 1 && !asList {
		return p.encode(objs[0])
	}
	kind := objs[0].GetKind()
	for _, o := range objs[1:] {
		if o.GetKind() != kind {
			kind = ""
			break
		}
	}
	return p.encode(listOf(kind+"List", objs))
}
