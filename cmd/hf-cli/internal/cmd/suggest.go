package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
)

// maxSuggestDistance is how many edits away a name may be to be suggested.
const maxSuggestDistance = 2

// closest returns the candidates within maxSuggestDistance edits of s (or
// starting with it), nearest first, at most three.
func closest(s string, candidates []string) []string {
	type cand struct {
		name string
		d    int
	}
	var found []cand
	for _, c := range candidates {
		if c == s {
			continue
		}
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d <= maxSuggestDistance || (len(s) >= 2 && strings.HasPrefix(c, s)) {
			found = append(found, cand{c, d})
		}
	}
	slices.SortStableFunc(found, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, f := range found[:min(len(found), 3)] {
		out = append(out, f.name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// suggestKind is "; did you mean ...?" for an unknown kind, or "".
func suggestKind(s string) string {
	var names []string
	for _, r := range allResources() {
		names = append(names, r.Use)
		names = append(names, r.Aliases...)
	}
	if c := closest(s, names); len(c) > 0 {
		return fmt.Sprintf("; did you mean %q?", c[0])
	}
	return ""
}

// withNameSuggestion adds to a not-found error for kind/name the names of
// that kind closest to it, when there are any the caller may see.
func withNameSuggestion(ctx context.Context, cl *client.Client, kind, name string, err error) error {
	if !client.IsNotFound(err) {
		return err
	}
	objs, lerr := cl.List(ctx, kind, nil)
	if lerr != nil {
		return err
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		names = append(names, o.Meta().Name)
	}
	if c := closest(name, names); len(c) > 0 {
		return fmt.Errorf("%w (did you mean %s?)", err, strings.Join(c, ", "))
	}
	return err
}

// completeNames completes object names of kind from the API (shell
// completion: hf-cli completion bash|zsh|fish).
func completeNames(f *Factory, kind string, toComplete string) ([]string, cobra.ShellCompDirective) {
	cl, err := f.Client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := f.requestContext(context.Background())
	defer cancel()
	objs, err := cl.List(ctx, kind, nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, o := range objs {
		if n := o.Meta().Name; strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeNamesOf completes the NAME arguments of a command of res.
func completeNamesOf(f *Factory, res *resource) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completeNames(f, res.Kind, toComplete)
	}
}

// completeKindAndName completes KIND then NAME.
func completeKindAndName(f *Factory) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			var out []string
			for _, r := range allResources() {
				if strings.HasPrefix(r.Use, toComplete) {
					out = append(out, r.Use)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			if r, ok := resourceFor(args[0]); ok {
				return completeNames(f, r.Kind, toComplete)
			}
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}
