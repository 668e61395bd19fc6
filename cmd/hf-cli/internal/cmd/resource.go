package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// newResourceCmd builds `hf-cli <resource>` with list, get, create, apply,
// delete and watch, plus the kind's own extras.
func newResourceCmd(f *Factory, res *resource) *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:     res.Use,
		Aliases: res.Aliases,
		Short:   "Manage " + res.Kind + " objects",
	})
	c.AddCommand(
		newListCmd(f, res),
		newGetCmd(f, res),
		newKindFileCmd(f, res, fileApply),
		newDeleteCmd(f, res),
		newWatchCmd(f, res),
	)
	switch res.Kind {
	case types.KindMachineClaim:
		c.AddCommand(newClaimCreateCmd(f, res))
	case types.KindNode:
		c.AddCommand(newActionCmd(f, drainAction), newActionCmd(f, undrainAction), newKindFileCmd(f, res, fileCreate))
	case types.KindSession:
		c.AddCommand(newActionCmd(f, keepaliveAction), newKindFileCmd(f, res, fileCreate))
	case types.KindMachineSet:
		c.AddCommand(newScaleCmd(f), newPoolStatusCmd(f), newKindFileCmd(f, res, fileCreate))
	case types.KindAccessCode:
		c.AddCommand(newCodeCreateCmd(f, res))
	case types.KindMachine:
		c.AddCommand(newMachineLogsCmd(f, res), newMachineShellCmd(f, res), newKindFileCmd(f, res, fileCreate))
	case types.KindUser:
		c.AddCommand(newUserCreateCmd(f, res))
	case types.KindToken:
		c.AddCommand(newTokenCreateCmd(f), newTokenRevokeCmd(f))
	default:
		c.AddCommand(newKindFileCmd(f, res, fileCreate))
	}
	return c
}

// parseSelectors joins repeated --selector values, each a label selector
// in Kubernetes' syntax ("tier!=gold,zone in (a,b)"): all must hold.
func parseSelectors(values []string) (labels.Selector, error) {
	sel, err := labels.Parse(strings.Join(values, ","))
	if err != nil {
		return nil, usageErrorf("--selector: %v", err)
	}
	return sel, nil
}

// listOptions are the options of `<resource> list`.
type listOptions struct {
	f         *Factory
	res       *resource
	selectors []string
	fields    []string
}

func newListCmd(f *Factory, res *resource) *cobra.Command {
	opts := &listOptions{f: f, res: res}
	c := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List " + res.Use + "s",
		Args:    noArgs,
		RunE:    func(c *cobra.Command, _ []string) error { return runList(c.Context(), opts) },
	}
	c.Flags().StringArrayVarP(&opts.selectors, "selector", "l", nil, "only objects a label selector selects (k=v, k!=v, k in (a,b), k, !k; comma-separated and repeatable: all must hold)")
	c.Flags().StringArrayVar(&opts.fields, "field-selector", nil, "only objects whose fields match (metadata.name, spec.node, status.phase, ...: f=v, f!=v; comma-separated and repeatable: all must hold)")
	return c
}

func runList(ctx context.Context, opts *listOptions) error {
	sel, err := parseSelectors(opts.selectors)
	if err != nil {
		return err
	}
	c, err := opts.f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := opts.f.requestContext(ctx)
	defer cancel()
	objs, err := c.ListFields(ctx, opts.res.Kind, sel.String(), strings.Join(opts.fields, ","))
	if err != nil {
		// The server knows which fields a kind can be selected by: a
		// selector it refuses is a mistake in the command line, as a bad
		// -l is.
		if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Status == http.StatusBadRequest && ae.Field == "fieldSelector" {
			return &usageError{err: fmt.Errorf("--field-selector: %s", ae.Message)}
		}
		return err
	}
	return opts.f.printer().objects(opts.res, objs, true)
}

// getOptions are the options of `<resource> get`.
type getOptions struct {
	f     *Factory
	res   *resource
	names []string
}

func newGetCmd(f *Factory, res *resource) *cobra.Command {
	opts := &getOptions{f: f, res: res}
	return &cobra.Command{
		Use:               "get NAME...",
		Short:             "Show " + res.Use + "s by name",
		Args:              nameArgs("at least one NAME"),
		ValidArgsFunction: completeNamesOf(f, res),
		RunE: func(c *cobra.Command, args []string) error {
			opts.names = args
			return runGet(c.Context(), opts)
		},
	}
}

// runGet prints the objects found and returns an error for each one missing.
func runGet(ctx context.Context, opts *getOptions) error {
	c, err := opts.f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := opts.f.requestContext(ctx)
	defer cancel()
	var (
		objs []types.Object
		errs []error
	)
	for _, n := range opts.names {
		o, err := c.Get(ctx, opts.res.Kind, n)
		if err != nil {
			errs = append(errs, withNameSuggestion(ctx, c, opts.res.Kind, n, err))
			continue
		}
		objs = append(objs, o)
	}
	if len(objs) > 0 {
		if err := opts.f.printer().objects(opts.res, objs, len(opts.names) > 1); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteOptions are the options of `<resource> delete`.
type deleteOptions struct {
	f              *Factory
	res            *resource
	names          []string
	ignoreNotFound bool
	wait           bool
	waitTimeout    time.Duration
	// cascade (users): the server deletes the user's sessions and claims
	// too, once it has found it would delete the user
	// (client.DeleteOptions.Cascade); the user's tokens go with the user.
	cascade bool
	// force (nodes): delete a node the server cannot reach although its
	// last report says Up (client.DeleteOptions.Force).
	force bool
}

func newDeleteCmd(f *Factory, res *resource) *cobra.Command {
	opts := &deleteOptions{f: f, res: res}
	c := &cobra.Command{
		Use:               "delete NAME...",
		Aliases:           []string{"rm"},
		Short:             "Delete " + res.Use + "s",
		Args:              nameArgs("at least one NAME"),
		ValidArgsFunction: completeNamesOf(f, res),
		RunE: func(c *cobra.Command, args []string) error {
			opts.names = args
			return runDelete(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
	waitHelp := "wait until the objects are gone"
	if res.Kind == types.KindMachineClaim {
		waitHelp = "wait until the claims and their machines are gone"
	}
	c.Flags().BoolVar(&opts.wait, "wait", false, waitHelp)
	waitTimeoutFlag(c.Flags(), &opts.waitTimeout, 2*time.Minute, "give up waiting after this long")
	if res.Kind == types.KindUser {
		// The server refuses to delete a user who holds claims or sessions.
		c.Flags().BoolVar(&opts.cascade, "cascade", false, "delete the user's sessions and claims too (releasing their machines), unless the user cannot be deleted (the last admin): then nothing is; the user's tokens go with the user")
	}
	if res.Kind == types.KindNode {
		// The last node of two never finds its dead peer Down.
		c.Flags().BoolVar(&opts.force, "force", false, "delete a node that is Up by its last report but that the answering node cannot reach: it is gone for good (its machines are then found lost and their claims bound elsewhere)")
	}
	return c
}

func runDelete(ctx context.Context, opts *deleteOptions) error {
	f := opts.f
	c, err := f.Client()
	if err != nil {
		return err
	}
	p := f.printer()
	var errs []error
	for _, name := range opts.names {
		if err := deleteOne(ctx, f, c, opts, name); err != nil {
			if opts.ignoreNotFound && client.IsNotFound(err) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		p.done(opts.res.Kind, name, "deleted")
	}
	return errors.Join(errs...)
}

// deleteOne deletes one object and, with --wait, waits until it (and for a
// claim, its machine) is gone.
func deleteOne(ctx context.Context, f *Factory, c *client.Client, opts *deleteOptions, name string) error {
	kind := opts.res.Kind
	machine := ""
	if opts.wait && kind == types.KindMachineClaim {
		rctx, cancel := f.requestContext(ctx)
		o, err := c.Get(rctx, kind, name)
		cancel()
		if err != nil {
			return err
		}
		machine = o.(*types.MachineClaim).Status.Machine
	}
	rctx, cancel := f.requestContext(ctx)
	err := c.DeleteWith(rctx, kind, name, client.DeleteOptions{Force: opts.force, Cascade: opts.cascade})
	cancel()
	if err != nil || !opts.wait {
		return err
	}
	what := ref(kind, name)
	if machine != "" {
		what += " and " + ref(types.KindMachine, machine)
	}
	fmt.Fprintf(f.Err, "Waiting for %s to go away\n", what)
	return waitGone(ctx, f, c, kind, name, machine, opts.waitTimeout)
}

// watchOptions are the options of `<resource> watch`.
type watchOptions struct {
	f         *Factory
	res       *resource
	since     uint64
	selectors []string
}

func newWatchCmd(f *Factory, res *resource) *cobra.Command {
	opts := &watchOptions{f: f, res: res}
	c := &cobra.Command{
		Use:   "watch",
		Short: "Stream changes to " + res.Use + "s, one line per event",
		Args:  noArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return runWatch(c.Context(), opts) },
	}
	c.Flags().Uint64Var(&opts.since, "since", 0, "replay changes after this server sequence number")
	c.Flags().StringArrayVarP(&opts.selectors, "selector", "l", nil, "only objects a label selector selects (k=v, k!=v, k in (a,b), k, !k; comma-separated and repeatable: all must hold)")
	return c
}

// runWatch prints events until ctx ends (exit 0) or the stream breaks.
func runWatch(ctx context.Context, opts *watchOptions) error {
	sel, err := parseSelectors(opts.selectors)
	if err != nil {
		return err
	}
	c, err := opts.f.Client()
	if err != nil {
		return err
	}
	watch := client.WatchOptions{Kinds: []string{opts.res.Kind}, Since: opts.since}
	if opts.since == 0 && !sel.Empty() {
		// The server filters too, so what does not match is not sent at all.
		// Not with --since: a filtered stream cannot replay (the server
		// cannot tell whether a deleted object matched), it starts from now.
		watch.LabelSelector = sel.String()
	}
	events, err := opts.f.openWatch(ctx, c, watch)
	if err != nil {
		return err
	}
	p := opts.f.printer()
	for ev := range events {
		switch {
		case ev.Type == client.EventError:
			return fmt.Errorf("watch %s: %w", types.Plural(opts.res.Kind), ev.Err)
		case ev.Object != nil && !sel.Matches(labels.Set(ev.Object.Meta().Labels)):
			continue
		}
		if err := p.event(opts.res, ev); err != nil {
			return err
		}
	}
	return nil
}

// watchLine is the JSON shape of one event under -o json|yaml.
type watchLine struct {
	Type   string       `json:"type"`
	Kind   string       `json:"kind,omitempty"`
	Name   string       `json:"name,omitempty"`
	Seq    uint64       `json:"seq,omitempty"`
	Object types.Object `json:"object,omitempty"`
}

// event prints one watch event: a compact JSON line, a YAML document, or the
// event type followed by the kind's table row.
func (p *printer) event(res *resource, ev client.WatchEvent) error {
	switch p.format {
	case formatJSON:
		raw, err := json.Marshal(watchLine{Type: ev.Type, Kind: ev.Kind, Name: ev.Name, Seq: ev.Seq, Object: ev.Object})
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(p.out, "%s\n", raw)
		return err
	case formatYAML:
		if _, err := fmt.Fprintln(p.out, "---"); err != nil {
			return err
		}
		return p.encode(watchLine{Type: ev.Type, Kind: ev.Kind, Name: ev.Name, Seq: ev.Seq, Object: ev.Object})
	}
	cells := []string{strings.ToUpper(ev.Type), ev.Name}
	if ev.Object != nil && ev.Object.GetKind() == res.Kind {
		cells = append([]string{strings.ToUpper(ev.Type)}, p.row(res, ev.Object)...)
	}
	sep := "\t"
	if p.terminal {
		sep = "  "
		for i, c := range cells {
			if c == "" {
				cells[i] = "-"
			}
		}
	}
	_, err := fmt.Fprintln(p.out, strings.Join(cells, sep))
	return err
}
