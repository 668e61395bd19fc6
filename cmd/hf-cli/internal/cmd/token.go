package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// userCreateOptions are the options of `user create`.
type userCreateOptions struct {
	f           *Factory
	res         *resource
	roles       []string
	displayName string
	file        string
}

func newUserCreateCmd(f *Factory, res *resource) *cobra.Command {
	opts := &userCreateOptions{f: f, res: res}
	c := &cobra.Command{
		Use:   "create NAME --role ROLE... | -f FILE",
		Short: "Create a user of the cluster (or users from a file; admin only)",
		Long: "Create a user whose tokens may carry the given roles: admin (everything),\n" +
			"operator (the fleet, not users and tokens) or user (its own claims and sessions).",
		Example: "  hf-cli user create alice --role user\n" +
			"  hf-cli user create ops --role operator --role user\n" +
			"  hf-cli user create -f users.yaml",
		Args: maxArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if opts.file != "" {
				if countSet(c, "role", "display-name") > 0 || len(args) > 0 {
					return usageErrorf("user create -f takes no NAME and no user flags")
				}
				return runFile(c.Context(), &fileOptions{f: f, op: fileCreate, file: opts.file, kind: res.Kind})
			}
			if len(args) == 0 {
				return usageErrorf("user create needs NAME (or -f FILE)")
			}
			u := &types.User{TypeMeta: types.TypeMeta{Kind: types.KindUser}, Metadata: types.ObjectMeta{Name: args[0]},
				Spec: types.UserSpec{Roles: opts.roles, DisplayName: opts.displayName}}
			if err := u.Validate(); err != nil {
				return usageErrorf("%s", flagNames(err))
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			ctx, cancel := f.requestContext(c.Context())
			defer cancel()
			created, err := cl.Create(ctx, u)
			if err != nil {
				return err
			}
			return f.printer().objects(res, []types.Object{created}, false)
		},
	}
	c.Flags().StringArrayVar(&opts.roles, "role", nil, "a role the user's tokens may carry: admin, operator or user (repeatable, at least one)")
	c.Flags().StringVar(&opts.displayName, "display-name", "", "the user's name for people")
	c.Flags().StringVarP(&opts.file, "filename", "f", "", "create the users of a YAML or JSON file (- for stdin)")
	return c
}

// tokenCreateOptions are the options of `token create`.
type tokenCreateOptions struct {
	f         *Factory
	user      string
	role      string
	expiresIn time.Duration
}

func newTokenCreateCmd(f *Factory) *cobra.Command {
	opts := &tokenCreateOptions{f: f}
	c := &cobra.Command{
		Use:   "create NAME --user USER --role ROLE [--expires-in D]",
		Short: "Create a bearer token of a user and print it, this once (admin only)",
		Long: "Create a token that acts as USER with ROLE (one of the user's roles) on every\n" +
			"node of the cluster. The bearer token is printed once; the cluster keeps only\n" +
			"a keyed hash of it. `hf-cli token revoke NAME` ends it everywhere.",
		Example: "  hf-cli token create alice-laptop --user alice --role user --expires-in 720h\n" +
			"  export HF_TOKEN=$(hf-cli token create ci --user ci --role user -o json | jq -r .token)",
		Args: exactArgs(1, "NAME"),
		RunE: func(c *cobra.Command, args []string) error { return runTokenCreate(c.Context(), opts, args[0]) },
	}
	c.Flags().StringVar(&opts.user, "user", "", "the user the token acts as (required)")
	c.Flags().StringVar(&opts.role, "role", types.RoleUser, "the role the token carries: admin, operator or user")
	c.Flags().DurationVar(&opts.expiresIn, "expires-in", 0, "the token stops working this long from now (0: never)")
	return c
}

func runTokenCreate(ctx context.Context, opts *tokenCreateOptions, name string) error {
	f := opts.f
	if opts.user == "" {
		return usageErrorf("token create needs --user USER")
	}
	if opts.expiresIn < 0 {
		return usageErrorf("--expires-in must not be negative, got %s", opts.expiresIn)
	}
	tok := &types.Token{TypeMeta: types.TypeMeta{Kind: types.KindToken}, Metadata: types.ObjectMeta{Name: name},
		Spec: types.TokenSpec{User: opts.user, Role: opts.role}}
	if opts.expiresIn > 0 {
		tok.Spec.ExpiresAt = time.Now().Add(opts.expiresIn).UTC().Truncate(time.Second)
	}
	if err := tok.Validate(); err != nil {
		return usageErrorf("%s", flagNames(err))
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	created, bearer, err := c.CreateToken(ctx, tok)
	if err != nil {
		return err
	}
	if p := f.printer(); p.structured() {
		out := map[string]any{"name": created.Metadata.Name, "user": created.Spec.User, "role": created.Spec.Role, "token": bearer}
		if !created.Spec.ExpiresAt.IsZero() { // left out when it never expires, as the API does
			out["expiresAt"] = created.Spec.ExpiresAt
		}
		return p.encode(out)
	}
	expires := "never expires"
	if !created.Spec.ExpiresAt.IsZero() {
		expires = "expires " + timestamp(created.Spec.ExpiresAt)
	}
	fmt.Fprintf(f.Err, "token %s of user %s, role %s, %s; shown this once:\n", created.Metadata.Name, created.Spec.User, created.Spec.Role, expires)
	fmt.Fprintln(f.Out, bearer)
	return nil
}

func newTokenRevokeCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME...",
		Short: "Revoke tokens: they stop working on every node (admin only)",
		Args:  minArgs(1, "NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			for _, name := range args {
				ctx, cancel := f.requestContext(c.Context())
				err := cl.Delete(ctx, types.KindToken, name)
				cancel()
				if err != nil {
					return err
				}
				fmt.Fprintf(f.Out, "token %s revoked\n", name)
			}
			return nil
		},
	}
}

// flagNames words a validation error of a user or token built from flags
// by the flag ("--role: must be one of ...").
func flagNames(err error) string {
	var fe *types.FieldError
	if !errors.As(err, &fe) {
		return err.Error()
	}
	switch {
	case fe.Field == "metadata.name":
		return "NAME: " + fe.Message
	case fe.Field == "spec.user":
		return "--user: " + fe.Message
	case strings.HasPrefix(fe.Field, "spec.role"):
		return "--role: " + fe.Message
	}
	return err.Error()
}
