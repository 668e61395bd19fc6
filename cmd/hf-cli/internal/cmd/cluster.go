package cmd

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// keySize is the size of a cluster (gossip encryption) key: AES-256.
const keySize = 32

func newClusterCmd(f *Factory) *cobra.Command {
	c := groupCmd(&cobra.Command{Use: "cluster", Short: "Cluster-wide tools"})
	c.AddCommand(
		&cobra.Command{
			Use:   "keygen",
			Short: "Print a new random cluster key (base64 of 32 bytes; -o json|yaml: as {key: ...})",
			Args:  noArgs,
			RunE: func(*cobra.Command, []string) error {
				key, err := newKey(f.Rand)
				if err != nil {
					return err
				}
				if p := f.printer(); p.structured() {
					return p.encode(map[string]string{"key": key})
				}
				_, err = fmt.Fprintln(f.Out, key)
				return err
			},
		},
		newJoinTokenCmd(f),
		newRotateKeyCmd(f),
		&cobra.Command{
			Use:   "health",
			Short: "Check that the endpoint is up (/healthz) and ready (/readyz)",
			Args:  noArgs,
			RunE:  func(c *cobra.Command, _ []string) error { return runHealth(c.Context(), f) },
		},
	)
	return c
}

func newJoinTokenCmd(f *Factory) *cobra.Command {
	var ttl time.Duration
	c := &cobra.Command{
		Use:   "join-token [--ttl D]",
		Short: "Make a join token and print the hf-node command that joins a new node with it (admin only)",
		Long: "A new node started with the printed command fetches the cluster's CA and gossip\n" +
			"keys from this node, over TLS pinned to the CA the token names. The token works\n" +
			"for --ttl (default " + hours(types.DefaultJoinTTL) + ", at most " + hours(types.MaxJoinTTL) + ") and for any number of nodes;\n" +
			"`hf-cli token revoke NAME` ends it earlier.",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// The server refuses the same (400); asked here, it is a
			// usage error that names the flag, and nothing is sent.
			if ttl < 0 || (ttl > 0 && ttl < types.MinJoinTTL) || ttl > types.MaxJoinTTL {
				return usageErrorf("--ttl must be from %s to %s (0, or left out: the default %s), got %s",
					types.MinJoinTTL, hours(types.MaxJoinTTL), hours(types.DefaultJoinTTL), ttl)
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			ctx, cancel := f.requestContext(c.Context())
			defer cancel()
			jt, err := cl.CreateJoinToken(ctx, ttl)
			if err != nil {
				return err
			}
			if p := f.printer(); p.structured() {
				return p.encode(jt)
			}
			fmt.Fprintf(f.Err, "join token %s, works until %s; on the new host run:\n", jt.Name, timestamp(jt.ExpiresAt))
			_, err = fmt.Fprintln(f.Out, jt.Command)
			return err
		},
	}
	c.Flags().DurationVar(&ttl, "ttl", 0, "how long the token works (default "+hours(types.DefaultJoinTTL)+", at most "+hours(types.MaxJoinTTL)+")")
	return c
}

// hours writes d as whole hours ("168h", where d.String() says
// "168h0m0s"), or as Go does when it is not.
func hours(d time.Duration) string {
	if d > 0 && d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}

// newKey returns base64 of keySize random bytes.
func newKey(rnd io.Reader) (string, error) {
	b := make([]byte, keySize)
	if _, err := io.ReadFull(rnd, b); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func runHealth(ctx context.Context, f *Factory) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	if err := c.Health(ctx); err != nil {
		return fmt.Errorf("%s is not healthy: %w", c.Endpoint(), err)
	}
	if err := c.Ready(ctx); err != nil {
		return fmt.Errorf("%s is up but not ready: %w", c.Endpoint(), err)
	}
	_, err = fmt.Fprintf(f.Out, "%s is healthy and ready\n", c.Endpoint())
	return err
}

func newWhoAmICmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the token belongs to",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			ctx, cancel := f.requestContext(c.Context())
			defer cancel()
			who, err := cl.WhoAmI(ctx)
			if err != nil {
				return err
			}
			p := f.printer()
			if p.structured() {
				return p.encode(who)
			}
			rows := make([][]string, 0, len(who))
			for _, k := range sortedKeys(who) {
				rows = append(rows, []string{k, fmt.Sprint(who[k])})
			}
			return p.table([]string{"FIELD", "VALUE"}, rows)
		},
	}
}

// versionInfo is what `version` reports.
type versionInfo struct {
	Version  string `json:"version"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Nodes are the servers' versions, by node (absent with --client or
	// when no server answers).
	Nodes map[string]string `json:"nodes,omitempty"`
}

func newVersionCmd(f *Factory) *cobra.Command {
	var clientOnly bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the hf-cli version and the version of every node of the cluster",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			v := versionInfo{Version: f.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if v.Version == "" {
				v.Version = "dev" // as hf-node says of a build with no version (see lib/buildinfo)
				if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
					v.Version = bi.Main.Version
				}
			}
			var serverErr error
			if !clientOnly {
				v.Nodes, serverErr = nodeVersions(c.Context(), f)
			}
			p := f.printer()
			if p.structured() {
				return p.encode(v)
			}
			fmt.Fprintf(f.Out, "hf-cli %s (%s, %s)\n", v.Version, v.Go, v.Platform)
			for _, name := range sortedKeys(v.Nodes) {
				fmt.Fprintf(f.Out, "node %s: hf-node %s\n", name, v.Nodes[name])
			}
			if serverErr != nil {
				fmt.Fprintf(f.Err, "server: %v\n", serverErr)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&clientOnly, "client", false, "the client's version only")
	return c
}

// nodeVersions are the hf-node versions the nodes report, by node.
func nodeVersions(ctx context.Context, f *Factory) (map[string]string, error) {
	cl, err := f.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	nodes, err := cl.List(ctx, types.KindNode, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, o := range nodes {
		n := o.(*types.Node)
		out[n.Metadata.Name] = cmp.Or(n.Spec.SoftwareVersion, "unknown")
	}
	return out, nil
}
