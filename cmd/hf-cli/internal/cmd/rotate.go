package cmd

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/pki"
)

func newRotateKeyCmd(f *Factory) *cobra.Command {
	var key string
	c := &cobra.Command{
		Use:   "rotate-key [--key K]",
		Short: "Replace the cluster's gossip key on every node without downtime (admin only)",
		Long: "Installs a new key on every node, then makes every node use it, then removes\n" +
			"the old keys everywhere; gossip goes on throughout. Every node must be Up: a node\n" +
			"that misses the rotation can no longer gossip once the old key is gone.",
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runRotateKey(c.Context(), f, key) },
	}
	c.Flags().StringVar(&key, "key", "", "the new key, base64 of 32 bytes (default: a new random one, as cluster keygen makes)")
	return c
}

func runRotateKey(ctx context.Context, f *Factory, key string) error {
	if key == "" {
		var err error
		if key, err = newKey(f.Rand); err != nil {
			return err
		}
	} else if raw, err := base64.StdEncoding.DecodeString(key); err != nil || (len(raw) != 16 && len(raw) != 24 && len(raw) != 32) {
		return usageErrorf("--key must be base64 of 16, 24 or 32 bytes")
	}
	cl, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	// A drained node runs and gossips: it takes the key as any other. One
	// that is Down cannot, and would not get into the cluster again with
	// the old key once it is retired.
	clients, down, err := f.nodeClients(ctx, cl)
	if err != nil {
		return err
	}
	if len(down) > 0 {
		return fmt.Errorf("cannot reach node %s to give it the new key: start it again, or delete a node gone for good (hf-cli node delete NAME), first", strings.Join(down, ", "))
	}
	before, err := clients[0].GossipKeys(ctx)
	if err != nil {
		return err
	}
	for _, step := range []string{"install", "use"} {
		for _, c := range clients {
			if _, err := c.ChangeGossipKey(ctx, step, key); err != nil {
				return fmt.Errorf("%s the new key on %s: %w (the nodes done so far have it; run rotate-key again with --key to finish)", step, c.Endpoint(), err)
			}
		}
		fmt.Fprintf(f.Err, "%s: done on %d nodes\n", step, len(clients))
	}
	for _, c := range clients {
		if _, err := c.ChangeGossipKey(ctx, "retire", key); err != nil {
			return fmt.Errorf("remove the old keys on %s: %w (run rotate-key again with --key to finish)", c.Endpoint(), err)
		}
	}
	fmt.Fprintf(f.Err, "remove the old keys: done on %d nodes\n", len(clients))
	raw, _ := base64.StdEncoding.DecodeString(key)
	fmt.Fprintf(f.Out, "gossip key %s in use on every node (was %s)\n", pki.KeyID(raw), before.Primary)
	return nil
}
