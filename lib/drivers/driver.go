// Package drivers holds the Driver contract, the registry of driver types and the
// helpers drivers share. Drivers never import each other or lib/cluster.
package drivers

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/types"
)

// ErrNotFound is returned by Status when the driver does not hold the resource
// (any more). Deallocate treats a missing resource as success instead.
var ErrNotFound = errors.New("resource not found")

// ErrNotPrepared is returned by a driver used before a successful Prepare.
var ErrNotPrepared = errors.New("driver not prepared")

// ErrNoCapacity is wrapped by an Allocate error when the provider has no room
// for the machine right now (a cloud's insufficient capacity, a quota
// exceeded): the claim is declined here and waits for capacity, it has not
// failed. The node gives the round back and the claim is offered again once
// capacity is reported free.
var ErrNoCapacity = errors.New("no capacity")

// ErrUnknownType is returned by Registry.New for a driver type nobody registered.
var ErrUnknownType = errors.New("unknown driver type")

// Driver allocates machines of one kind (native environment, container, VM).
// Every method is safe for concurrent use.
type Driver interface {
	// Name is the driver type ("test", "native", "docker", "aws").
	Name() string
	// Prepare parses and validates the driver's own configuration (JSON) and
	// readies the driver. It is called once, before anything else.
	Prepare(ctx context.Context, cfg []byte) error
	// ValidateTemplate checks the template's providerConfiguration for this driver.
	ValidateTemplate(t types.MachineTemplate) error
	// HostCapacity reports total, usable (total + alter) and overbook resources.
	// Used and Reserved are filled in by the caller.
	HostCapacity() types.Capacity
	// Allocate creates one machine for t; meta is the claim's metadata.
	Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error)
	// Status reports the phase of a resource; ErrNotFound when it is gone.
	// r may come without its Info (see Bare): a node keeps the Info of its
	// idle machines apart and asks every running machine's status each
	// pass. What a driver needs to find a resource belongs in ID and Data.
	Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error)
	// Deallocate releases a resource and everything it left behind. Releasing a
	// resource that is already gone is not an error.
	Deallocate(ctx context.Context, r *types.Resource) error
	// List returns every resource the driver holds, for reconciliation on start.
	List(ctx context.Context) ([]types.Resource, error)
	// IsRemote is true for drivers whose capacity is not this host's (cloud).
	IsRemote() bool
}

// ActivityMeter is implemented by drivers that can tell whether a machine is in
// use. Activity returns a counter that only grows with use (CPU time in
// nanoseconds for the local drivers); the node compares successive readings
// and records the machine as active when it grew, which idle reaping of
// machine sets counts as activity. ErrNotFound when the resource is gone.
// r may come without its Info, as for Status.
type ActivityMeter interface {
	Activity(ctx context.Context, r *types.Resource) (uint64, error)
}

// Bare is r without its Info, as Status, Activity, Pause and Resume may be
// given it (the conformance checks call them so).
func Bare(r types.Resource) *types.Resource {
	r.Info = nil
	return &r
}

// Cooler is implemented by drivers that keep something in memory for each
// resource. The node calls Cool once it goes idle after a burst: the driver
// copies what it keeps afresh, so that it no longer holds the half-empty
// spans of the burst's heap (see package lib/internal/intern), its strings
// and data from tab, the node's table for this pass (a resource's id and
// data the node's ledger keeps too are then kept once). It must not block
// for long: it runs on the node's memory trimmer.
type Cooler interface {
	Cool(tab *intern.Table)
}

// Pauser is implemented by drivers that can pause a machine and resume it
// (freeze its processes, pause its container) without losing its state. Both
// are idempotent; ErrNotFound when the resource is gone. r may come without
// its Info, as for Status.
type Pauser interface {
	Pause(ctx context.Context, r *types.Resource) error
	Resume(ctx context.Context, r *types.Resource) error
}

// HostSharer is implemented by local drivers whose machines run on this
// host's own CPUs and RAM (native, docker): the node keeps all such driver
// instances within one host budget, so together they never promise more
// than the host has.
type HostSharer interface {
	SharesHost() bool
}

// GroupLimiter is implemented by drivers that put a machine in host groups
// only from a list the node's config allows (native: allowed_groups). The
// node reports the list (never nil: empty when none) in its Node object, so
// that the API can refuse, when an Environment or a MachineSet is written,
// groups that no node allows, instead of a claim failing at allocation.
type GroupLimiter interface {
	AllowedGroups() []string
}

// Explainer is implemented by drivers that can say why a machine ended or
// failed on its own (its entry's exit status and last output), for the
// claim's reason. Explain returns "" when it knows nothing more.
type Explainer interface {
	Explain(ctx context.Context, r *types.Resource) string
}

// LogOptions say which part of a machine's output Logs writes.
type LogOptions struct {
	// Tail is how many of the last lines to start with (0: all).
	Tail int
	// Follow keeps writing new output until ctx ends or the machine ends.
	Follow bool
}

// LogReader is implemented by drivers that keep a machine's output (the
// native entry's, a container's, a cloud VM's console): Logs writes it to
// w. ErrNotFound when the resource is gone.
type LogReader interface {
	Logs(ctx context.Context, r *types.Resource, opts LogOptions, w io.Writer) error
}

// ShellOptions are the terminal a shell gets.
type ShellOptions struct {
	// TTY gives the shell a terminal of Rows x Cols; without it the shell
	// reads its input and writes its output as plain streams.
	TTY        bool
	Rows, Cols uint16
}

// ShellExit is how a shell ended.
type ShellExit = shellframe.Exit

// Sheller is implemented by drivers that can run an interactive shell in
// a machine, as the machine's own user (never root on the host): its input
// is read from stream and its output written to it until it exits or ctx
// ends. ctx ends when the shell's client is gone or its node stops: the
// driver then hangs the shell up (SIGHUP to it and what it runs, SIGKILL
// after a grace of seconds), so that nothing it started runs on, and the
// shell's exit is the hang-up's. Shell returns how the shell ended once
// its output is written (a process the shell left holding its terminal
// may write on for a while: the caller refuses what comes after), or an
// error when the shell has no exit status (it could not start, or could
// not be hung up). Shell does not close stream.
type Sheller interface {
	Shell(ctx context.Context, r *types.Resource, opts ShellOptions, stream io.ReadWriter) (ShellExit, error)
}

// Env is what a driver instance gets from the node that runs it.
type Env struct {
	// Instance is the instance name, unique on the node ("test", "test/big").
	// Registry.New defaults it to the driver type.
	Instance string
	// DataDir is a directory private to this instance, kept across restarts; a
	// driver keeps there whatever it needs to find its resources again. Empty
	// means the driver may keep nothing on disk.
	DataDir string
	// NodeName is the name of the node that runs the driver.
	NodeName string
	// Log is the driver's logger; Registry.New replaces nil with a discarding one.
	Log *slog.Logger
}

// Defaults fills what e leaves empty: the instance name (the driver type) and
// the logger (a discarding one). Registry.New applies it; a driver's own
// constructor does too, for tests that build drivers directly.
func (e Env) Defaults(driverType string) Env {
	if e.Instance == "" {
		e.Instance = driverType
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	return e
}

// Factory builds an unprepared driver instance. It must not block or fail:
// anything that can goes into Prepare.
type Factory func(env Env) Driver
