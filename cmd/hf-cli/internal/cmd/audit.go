package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// auditOptions are the options of `audit`.
type auditOptions struct {
	f                *Factory
	user, kind, name string
	since            string
	limit            int
	local            bool
}

func newAuditCmd(f *Factory) *cobra.Command {
	opts := &auditOptions{f: f}
	c := &cobra.Command{
		Use:   "audit",
		Short: "Show who changed what through the API, on every node (admin only)",
		Long: "Each node keeps the writes it served; audit asks every Up node and merges\n" +
			"their records by time (--local: only the node of --endpoint).",
		Example: "  hf-cli audit --user alice --since 2026-05-01T00:00:00Z\n" +
			"  hf-cli audit --kind tokens --limit 20",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runAudit(c.Context(), opts) },
	}
	fl := c.Flags()
	fl.StringVar(&opts.user, "user", "", "only writes of this user")
	fl.StringVar(&opts.kind, "kind", "", "only writes of this kind (claims, templates, ...)")
	fl.StringVar(&opts.name, "name", "", "only writes of objects of this name")
	fl.StringVar(&opts.since, "since", "", "only writes at or after this RFC 3339 time")
	fl.IntVar(&opts.limit, "limit", 100, "the most records, the newest (1 to 10000)")
	fl.BoolVar(&opts.local, "local", false, "ask only the node of --endpoint")
	return c
}

func runAudit(ctx context.Context, opts *auditOptions) error {
	f := opts.f
	if opts.limit < 1 || opts.limit > 10000 {
		return usageErrorf("--limit must be 1 to 10000, got %d", opts.limit)
	}
	if _, err := parseTimeFlag("--since", opts.since); err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(opts.limit)}}
	if opts.kind != "" {
		kind, ok := types.KindForPlural(opts.kind)
		if !ok {
			if r, found := resourceFor(opts.kind); found {
				kind, ok = r.Kind, true
			}
		}
		if !ok {
			return usageErrorf("--kind: unknown kind %q", opts.kind)
		}
		q.Set("kind", kind)
	}
	for k, v := range map[string]string{"user": opts.user, "name": opts.name, "since": opts.since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	cl, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	clients := []*client.Client{cl}
	if !opts.local {
		var down []string
		if clients, down, err = f.nodeClients(ctx, cl); err != nil {
			return err
		}
		for _, n := range down {
			fmt.Fprintf(f.Err, "warning: node %s is not asked: its records are not in this list\n", n)
		}
	}
	recs, err := auditNodes(ctx, f, clients, q)
	if err != nil {
		return err
	}
	slices.SortStableFunc(recs, func(a, b types.AuditRecord) int { return a.Time.Compare(b.Time) })
	if len(recs) > opts.limit {
		recs = recs[len(recs)-opts.limit:]
	}
	p := f.printer()
	if p.structured() {
		if recs == nil {
			recs = []types.AuditRecord{}
		}
		return p.encode(map[string]any{"items": recs})
	}
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		rows = append(rows, []string{r.Time.UTC().Format(time.RFC3339), r.Node, r.User, r.Role, r.Token,
			r.Method, strings.TrimPrefix(r.Path, "/api/v1/"), strconv.Itoa(r.Status)})
	}
	return p.table([]string{"TIME", "NODE", "USER", "ROLE", "TOKEN", "METHOD", "PATH", "STATUS"}, rows)
}

// auditNodes merges the audit records of every client's node. A node that
// fails is a warning while another answers; when none answers the command
// fails with every node's error, so a token that may not read the audit
// (forbidden) or a cluster that cannot be reached is an exit code, not an
// empty table.
func auditNodes(ctx context.Context, f *Factory, clients []*client.Client, q url.Values) ([]types.AuditRecord, error) {
	if len(clients) == 1 {
		return clients[0].Audit(ctx, q)
	}
	var (
		recs []types.AuditRecord
		errs []error
	)
	for _, c := range clients {
		got, err := c.Audit(ctx, q)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Endpoint(), err))
			continue
		}
		recs = append(recs, got...)
	}
	if len(errs) == len(clients) {
		return nil, errors.Join(errs...)
	}
	for _, err := range errs {
		fmt.Fprintf(f.Err, "warning: %v\n", err)
	}
	return recs, nil
}

// nodeClients returns a client of the API of every node that is not Down
// (a drained node runs and answers), with the token and scheme of cl (cl
// itself for the node it talks to), and the nodes it cannot ask (Down, or
// with no API address), each with why, for the caller to say what it left
// out.
func (f *Factory) nodeClients(ctx context.Context, cl *client.Client) (clients []*client.Client, down []string, err error) {
	nodes, err := cl.List(ctx, types.KindNode, nil)
	if err != nil {
		return nil, nil, err
	}
	base, err := url.Parse(cl.Endpoint())
	if err != nil {
		return nil, nil, err
	}
	clients = []*client.Client{cl}
	for _, o := range nodes {
		n := o.(*types.Node)
		switch {
		case n.Spec.APIAddress == base.Host:
		case n.Status.Phase == types.NodeDown:
			down = append(down, n.Metadata.Name+" (Down)")
		case n.Spec.APIAddress == "":
			down = append(down, n.Metadata.Name+" (no API address)")
		default:
			c, err := f.clientFor(base.Scheme + "://" + n.Spec.APIAddress)
			if err != nil {
				return nil, nil, err
			}
			clients = append(clients, c)
		}
	}
	return clients, down, nil
}
