package cmd

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// resource describes how the CLI names and shows one kind. Tables get a NAME
// column first and an AGE column last around Columns.
type resource struct {
	Kind    string
	Use     string
	Aliases []string
	Columns []string
	// Row returns the cells under Columns.
	Row func(types.Object) []string
}

// allResources lists every kind the CLI manages, in help order.
func allResources() []*resource {
	return []*resource{
		{
			Kind: types.KindNode, Use: "node", Aliases: []string{"nodes"},
			Columns: []string{"PHASE", "API", "DRIVERS(FREE CPU/RAM)", "MACHINES", "MAINT"},
			Row: func(o types.Object) []string {
				n := o.(*types.Node)
				drivers := make([]string, 0, len(n.Spec.Drivers))
				for _, d := range n.Spec.Drivers {
					fake := ""
					if d.Driver == "test" {
						fake = ",test-only"
					}
					drivers = append(drivers, fmt.Sprintf("%s(%s/%sG%s)", d.Name, num(d.Capacity.Free.CPU), num(d.Capacity.Free.RAMGB), fake))
				}
				phase := string(n.Status.Phase)
				if n.Unreachable() {
					// The node answering cannot reach it, and no verdict
					// says Down (it may have no majority to pass one).
					phase += ",Unreachable"
				}
				return []string{phase, n.Spec.APIAddress, strings.Join(drivers, ","),
					strconv.Itoa(n.Status.Machines), yesNo(n.Spec.Maintenance)}
			},
		},
		{
			Kind: types.KindProvider, Use: "provider", Aliases: []string{"providers"},
			Columns: []string{"DRIVER", "CONFIG-ITEMS", "MACHINE-INFO"},
			Row: func(o types.Object) []string {
				p := o.(*types.Provider)
				return []string{p.Spec.Driver, strings.Join(p.Spec.ConfigurationItems.Names(), ","), strings.Join(p.Spec.MachineInformation.Names(), ",")}
			},
		},
		{
			Kind: types.KindEnvironment, Use: "environment", Aliases: []string{"environments", "env", "envs"},
			Columns: []string{"DISPLAY-NAME", "PROVIDER", "PLACEMENT", "NODE-SELECTOR"},
			Row: func(o types.Object) []string {
				e := o.(*types.Environment)
				return []string{e.Spec.DisplayName, e.Spec.Provider, string(e.Spec.Placement), labelsString(e.Spec.NodeSelector)}
			},
		},
		{
			Kind: types.KindMachineTemplate, Use: "template", Aliases: []string{"templates", "machinetemplate", "machinetemplates", "tpl"},
			Columns: []string{"DISPLAY-NAME", "TYPE", "CPU", "RAM", "PROVIDERS"},
			Row: func(o types.Object) []string {
				t := o.(*types.MachineTemplate)
				providers := make([]string, 0, len(t.Spec.ProviderConfiguration))
				for k := range t.Spec.ProviderConfiguration {
					providers = append(providers, k)
				}
				sort.Strings(providers)
				return []string{t.Spec.DisplayName, string(cmp.Or(t.Spec.MachineType, types.MachineTypeUser)), num(t.Spec.Resources.CPU), num(t.Spec.Resources.RAMGB) + "G", strings.Join(providers, ",")}
			},
		},
		{
			Kind: types.KindMachineSet, Use: "set", Aliases: []string{"sets", "machineset", "machinesets"},
			Columns: []string{"TEMPLATE", "AVAILABILITY", "STRATEGY", "MIN", "MAX", "PROVISIONED", "AVAILABLE"},
			Row: func(o types.Object) []string {
				s := o.(*types.MachineSet)
				avail := string(s.Spec.AvailabilityConfiguration.Availability)
				if v := s.Spec.AvailabilityConfiguration.Value; v != "" {
					avail += ":" + v
				}
				return []string{s.Spec.MachineTemplate, avail, string(s.Spec.ProvisioningStrategy),
					strconv.Itoa(s.Spec.MinAvailable), maxCell(s.Spec.MaxProvisioned),
					strconv.Itoa(s.Status.Provisioned), strconv.Itoa(s.Status.Available)}
			},
		},
		{
			Kind: types.KindMachine, Use: "machine", Aliases: []string{"machines"},
			Columns: []string{"CLAIM", "TEMPLATE", "TYPE", "NODE", "DRIVER", "PHASE"},
			Row: func(o types.Object) []string {
				m := o.(*types.Machine)
				phase := string(m.Status.Phase)
				if m.Status.Paused {
					// Its session paused it: the machine is there, frozen.
					phase += ",Paused"
				}
				return []string{m.Spec.Claim, m.Spec.MachineTemplate, string(m.Spec.MachineType), m.Spec.Node, m.Spec.Driver, phase}
			},
		},
		{
			Kind: types.KindMachineClaim, Use: "claim", Aliases: []string{"claims", "machineclaim", "machineclaims"},
			Columns: []string{"TEMPLATE", "USER", "PHASE", "NODE", "MACHINE"},
			Row: func(o types.Object) []string {
				c := o.(*types.MachineClaim)
				return []string{c.Spec.MachineTemplate, c.Spec.User, string(c.Status.Phase), c.Status.Node, c.Status.Machine}
			},
		},
		{
			Kind: types.KindScheduledEvent, Use: "event", Aliases: []string{"events", "scheduledevent", "scheduledevents"},
			Columns: []string{"DISPLAY-NAME", "PHASE", "START", "END", "MACHINES"},
			Row: func(o types.Object) []string {
				e := o.(*types.ScheduledEvent)
				total := 0
				for _, r := range e.Spec.RequiredMachines {
					total += r.Count
				}
				return []string{e.Spec.DisplayName, string(e.Status.Phase), timestamp(e.Spec.StartTime), timestamp(e.Spec.EndTime), strconv.Itoa(total)}
			},
		},
		{
			Kind: types.KindAccessCode, Use: "code", Aliases: []string{"codes", "accesscode", "accesscodes"},
			Columns: []string{"STATUS", "SETS", "EVENTS", "NOT-AFTER"},
			Row: func(o types.Object) []string {
				a := o.(*types.AccessCode)
				return []string{string(a.Status.Status), strings.Join(a.Spec.MachineSets, ","), strings.Join(a.Spec.ScheduledEvents, ","), timestamp(a.Spec.NotAfter)}
			},
		},
		{
			Kind: types.KindSession, Use: "session", Aliases: []string{"sessions"},
			Columns: []string{"USER", "PHASE", "CLAIM", "ON-END"},
			Row: func(o types.Object) []string {
				s := o.(*types.Session)
				return []string{s.Spec.User, s.Status.Phase, s.Status.MachineClaim, string(s.EffectiveOnEnd())}
			},
		},
		{
			Kind: types.KindUser, Use: "user", Aliases: []string{"users"},
			Columns: []string{"ROLES", "DISPLAY-NAME", "DISABLED"},
			Row: func(o types.Object) []string {
				u := o.(*types.User)
				return []string{strings.Join(u.Spec.Roles, ","), u.Spec.DisplayName, yesNo(u.Spec.Disabled)}
			},
		},
		{
			Kind: types.KindToken, Use: "token", Aliases: []string{"tokens"},
			Columns: []string{"USER", "ROLE", "EXPIRES"},
			Row: func(o types.Object) []string {
				t := o.(*types.Token)
				return []string{t.Spec.User, t.Spec.Role, timestamp(t.Spec.ExpiresAt)}
			},
		},
	}
}

// resourceFor finds the resource of a kind or of a CLI name ("claim", "claims",
// "MachineClaim").
func resourceFor(name string) (*resource, bool) {
	lower := strings.ToLower(name)
	for _, r := range allResources() {
		if lower == strings.ToLower(r.Kind) || lower == r.Use {
			return r, true
		}
		for _, a := range r.Aliases {
			if lower == a {
				return r, true
			}
		}
	}
	return nil, false
}

// ref names an object the way messages do: "machineclaim/c1".
func ref(kind, name string) string { return strings.ToLower(kind) + "/" + name }

// num renders a capacity number with at most two decimals and no trailing
// zeros ("2", "2.5", "0.25"), as the dashboard does: one decimal showed a
// template's 0.25 CPU as 0.2.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func labelsString(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// age renders how long ago t was, in the largest sensible unit.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < 2*time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// latency renders a short duration for progress lines: "12ms", "1.25s".
func latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}
