package cmd

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// poolStatus is one machine set's line of `pool status`, counted from the
// machines the API lists rather than the set's own status, so it is as fresh
// as the machines are. A user's token lists only the user's own machines, so
// for a user the counts are the set's status (what its owner counted) and
// Claimed and Oldest, which only the machines tell, are left out. It is also
// the JSON shape of -o json|yaml.
type poolStatus struct {
	Set      string `json:"set"`
	Template string `json:"template"`
	Strategy string `json:"strategy"`
	Min      int    `json:"min"`
	Max      int    `json:"max"`
	// Provisioned counts the set's live machines.
	Provisioned int `json:"provisioned"`
	// Available counts live, unclaimed, Running machines: ready to bind now.
	Available int `json:"available"`
	// Claimed counts live machines given to a claim (a user's, not the
	// set's own provisioning claims, whose machines are still being made);
	// nil when the token may not see them all.
	Claimed *int `json:"claimed,omitempty"`
	// Oldest is the age of the oldest live machine, empty when there is none.
	Oldest string `json:"oldest,omitempty"`
	// OldestCreatedAt is when the oldest live machine was created.
	OldestCreatedAt time.Time `json:"oldestCreatedAt,omitzero"`
}

// cells is the table row of s.
func (s poolStatus) cells() []string {
	oldest := s.Oldest
	if oldest == "" {
		oldest = "-"
	}
	claimed := "-"
	if s.Claimed != nil {
		claimed = strconv.Itoa(*s.Claimed)
	}
	return []string{s.Set, s.Template, s.Strategy, strconv.Itoa(s.Min), maxCell(s.Max),
		strconv.Itoa(s.Provisioned), strconv.Itoa(s.Available), claimed, oldest}
}

// poolStatuses counts the machines of each set, in the order of sets.
// Machines of the set's provisioning claims (named in provisioning) are
// being made for the pool: they count as provisioned, not as claimed.
func poolStatuses(now time.Time, sets []*types.MachineSet, machines []*types.Machine, provisioning map[string]bool) []poolStatus {
	bySet := map[string][]*types.Machine{}
	for _, m := range machines {
		if m.Spec.MachineSet != "" && m.Live() {
			bySet[m.Spec.MachineSet] = append(bySet[m.Spec.MachineSet], m)
		}
	}
	out := make([]poolStatus, 0, len(sets))
	for _, set := range sets {
		st := setLine(set)
		st.Claimed = new(int)
		for _, m := range bySet[set.Metadata.Name] {
			st.Provisioned++
			switch {
			case m.Spec.Claim != "" && !provisioning[m.Spec.Claim]:
				*st.Claimed++
			case m.Status.Phase == types.MachineRunning:
				st.Available++
			}
			if t := machineCreatedAt(m); !t.IsZero() && (st.OldestCreatedAt.IsZero() || t.Before(st.OldestCreatedAt)) {
				st.OldestCreatedAt = t
			}
		}
		st.Oldest = age(now, st.OldestCreatedAt)
		out = append(out, st)
	}
	return out
}

// setLine is the line of set with what its spec says.
func setLine(set *types.MachineSet) poolStatus {
	st := poolStatus{
		Set:      set.Metadata.Name,
		Template: set.Spec.MachineTemplate,
		Strategy: string(set.Spec.ProvisioningStrategy),
		Min:      set.Spec.MinAvailable,
		Max:      set.Spec.MaxProvisioned,
	}
	// An empty strategy is AutoScale (the scheduler's default): show what
	// the set does, not what it spells.
	if st.Strategy == "" {
		st.Strategy = string(types.ProvisionAutoScale)
	}
	return st
}

// setStatuses are the lines of sets as their status counts them, for a
// token that sees only some of their machines.
func setStatuses(sets []*types.MachineSet) []poolStatus {
	out := make([]poolStatus, 0, len(sets))
	for _, set := range sets {
		st := setLine(set)
		st.Provisioned, st.Available = set.Status.Provisioned, set.Status.Available
		out = append(out, st)
	}
	return out
}

// machineCreatedAt is when m was created: its metadata, else when it entered
// Pending.
func machineCreatedAt(m *types.Machine) time.Time {
	if !m.Metadata.CreatedAt.IsZero() {
		return m.Metadata.CreatedAt.UTC()
	}
	return m.Status.PhaseTimes.At(string(types.MachinePending)).UTC()
}

// poolStatusOptions are the options of `pool status` (and `set status`).
type poolStatusOptions struct {
	f    *Factory
	sets []string
}

// newPoolCmd builds the `pool` group.
func newPoolCmd(f *Factory) *cobra.Command {
	c := groupCmd(&cobra.Command{Use: "pool", Short: "Look at machine sets as warm pools"})
	c.AddCommand(newPoolStatusCmd(f))
	return c
}

// newPoolStatusCmd builds `status [SET...]`, under `pool` and under `set`.
func newPoolStatusCmd(f *Factory) *cobra.Command {
	opts := &poolStatusOptions{f: f}
	return &cobra.Command{
		Use:   "status [SET...]",
		Short: "Show each machine set's warm, claimed and provisioned machines",
		Long: "For each machine set (or the named ones), count its live machines from the\n" +
			"API: PROVISIONED all live ones, AVAILABLE the unclaimed Running ones,\n" +
			"CLAIMED those given to a user's claim (not those the set is still making\n" +
			"for itself), OLDEST the age of the oldest. With a user's token, which sees\n" +
			"only the user's own machines, PROVISIONED and AVAILABLE are the set's own\n" +
			"counts and CLAIMED and OLDEST are not shown.",
		Example: "  hf-cli pool status\n" +
			"  hf-cli set status pool -o json",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			opts.sets = args
			return runPoolStatus(c.Context(), opts)
		},
	}
}

// runPoolStatus prints the sets found and returns an error for each named one
// missing.
func runPoolStatus(ctx context.Context, opts *poolStatusOptions) error {
	f := opts.f
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	var (
		objs []types.Object
		errs []error
	)
	if len(opts.sets) == 0 {
		if objs, err = c.List(ctx, types.KindMachineSet, nil); err != nil {
			return err
		}
	}
	for _, name := range opts.sets {
		o, err := c.Get(ctx, types.KindMachineSet, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, o)
	}
	if len(opts.sets) > 0 && len(objs) == 0 {
		return errors.Join(errs...)
	}
	sets := types.Cast[*types.MachineSet](objs)
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var lines []poolStatus
	if who["role"] == types.RoleUser {
		// The API lists a user's own machines only: the sets' own counts
		// are the whole truth a user may have.
		lines = setStatuses(sets)
	} else if lines, err = machineStatuses(ctx, f, c, sets); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := f.printer().poolStatuses(lines); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// machineStatuses are the lines of sets counted from the machines the API
// lists.
func machineStatuses(ctx context.Context, f *Factory, c *client.Client, sets []*types.MachineSet) ([]poolStatus, error) {
	machines, err := c.List(ctx, types.KindMachine, nil)
	if err != nil {
		return nil, err
	}
	// The set's own provisioning claims name the machines being made for it.
	claims, err := c.ListSelected(ctx, types.KindMachineClaim, types.LabelProvisionFor)
	if err != nil {
		return nil, err
	}
	provisioning := make(map[string]bool, len(claims))
	for _, o := range claims {
		provisioning[o.Meta().Name] = true
	}
	return poolStatuses(f.Now(), sets, types.Cast[*types.Machine](machines), provisioning), nil
}

// poolStatuses prints the lines as a table or, in json/yaml, as a list.
func (p *printer) poolStatuses(sts []poolStatus) error {
	if p.structured() {
		return p.encode(sts)
	}
	rows := make([][]string, 0, len(sts))
	for _, s := range sts {
		rows = append(rows, s.cells())
	}
	header := []string{"SET", "TEMPLATE", "STRATEGY", "MIN", "MAX", "PROVISIONED", "AVAILABLE", "CLAIMED", "OLDEST"}
	return p.table(header, rows)
}

// maxCell is a set's maxProvisioned in a table: 0 is no maximum.
func maxCell(max int) string {
	if max == 0 {
		return "none"
	}
	return strconv.Itoa(max)
}
