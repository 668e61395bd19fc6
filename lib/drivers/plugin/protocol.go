// Package plugin runs a driver in a process of its own: hf-node keeps out of
// its own binary the drivers that bring large SDKs with them (the cloud
// drivers' aws-sdk-go-v2 and google.golang.org/api are two thirds of a
// binary that has them), and starts their process only when a driver of
// theirs is configured.
//
// The node side is Driver, a drivers.Driver (with ActivityMeter, LogReader
// and io.Closer) that starts the plugin's executable and forwards each call;
// the plugin side is Serve. They speak net/rpc with its JSON codec over two
// pipes the plugin finds as file descriptors 3 (the node's requests) and 4
// (its replies); the plugin logs JSON lines on stderr, which the node logs as
// its own. Each call carries an ID and the time its context has left: the
// plugin runs it under a context with that deadline, which a Cancel of the ID
// ends, so a caller's cancellation reaches the driver. A machine's logs come
// as a stream of chunks the node asks for one at a time (LogsOpen, LogsRead),
// so a slow reader holds the plugin back rather than filling its memory.
//
//	hf-node                                   plugin (hf-driver-cloud)
//	Driver.Allocate(ctx) ──fd 3: {ID, timeout, args}──▶ ctx(ID) ─▶ driver
//	         ◀──────────fd 4: {result | Error{kind}}───┘
//	ctx done ──fd 3: Cancel{ID}──▶ cancels ctx(ID)
//	                 ◀── stderr: JSON log lines
//
// The plugin exits when fd 3 closes: when the node closes the driver, and
// when the node dies, whatever killed it. A plugin that exits on its own is
// started again (and prepared with the same configuration) by the next call.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// protocol is the version of the calls below. The node sets cookieEnv to it,
// and the plugin refuses another: the node and its plugins come from one
// build.
const protocol = 1

// cookieEnv tells a plugin that a node started it, and which protocol the
// node speaks. Started by hand, a plugin says it is not run that way.
const cookieEnv = "HF_DRIVER_PLUGIN_PROTOCOL"

// service is the name the plugin's calls are registered under.
const service = "Driver"

// Call identifies one call and carries its context's deadline.
type Call struct {
	// ID is unique among the node's calls to this plugin process.
	ID uint64
	// Timeout is what the caller's context had left (0: no deadline).
	Timeout time.Duration
}

// Error is an error as it crosses the process boundary: its message and the
// sentinel it wraps, so errors.Is, and a field error's field, still work on
// the node's side.
type Error struct {
	Kind    string `json:",omitempty"`
	Field   string `json:",omitempty"`
	Message string
}

// The kinds of Error.
const (
	kindNotFound    = "not-found"
	kindNoCapacity  = "no-capacity"
	kindNotPrepared = "not-prepared"
	kindInvalid     = "invalid"
	kindCanceled    = "canceled"
	kindDeadline    = "deadline"
)

// sentinels maps each kind to the error it wraps on the node's side, in the
// order a plugin's error is matched against them.
var sentinels = []struct {
	kind string
	err  error
}{
	{kindNotFound, drivers.ErrNotFound},
	{kindNoCapacity, drivers.ErrNoCapacity},
	{kindNotPrepared, drivers.ErrNotPrepared},
	{kindCanceled, context.Canceled},
	{kindDeadline, context.DeadlineExceeded},
}

// wireError is err as it is sent (nil for nil).
func wireError(err error) *Error {
	if err == nil {
		return nil
	}
	e := &Error{Message: err.Error()}
	var fe *types.FieldError
	if errors.As(err, &fe) {
		e.Kind, e.Field, e.Message = kindInvalid, fe.Field, fe.Message
		return e
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			e.Kind = s.kind
			break
		}
	}
	return e
}

// remoteError is an Error on the node's side: its message as the plugin
// wrote it, wrapping the sentinel of its kind.
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// err is e as an error on the node's side.
func (e *Error) err() error {
	if e == nil {
		return nil
	}
	if e.Kind == kindInvalid {
		return &types.FieldError{Field: e.Field, Message: e.Message}
	}
	for _, s := range sentinels {
		if e.Kind == s.kind {
			return &remoteError{msg: e.Message, kind: s.err}
		}
	}
	return errors.New(e.Message)
}

// Result is the reply of a call that returns nothing but its error.
type Result struct{ Err *Error }

// failure is the call's error, nil when it succeeded.
func (r *Result) failure() *Error { return r.Err }

// InitArgs say which driver the plugin process runs, and as what.
type InitArgs struct {
	Protocol int
	Type     string
	Instance string
	DataDir  string
	NodeName string
	// LogLevel is the least level the node logs of its drivers: the plugin
	// writes nothing below it.
	LogLevel slog.Level
}

// InitReply says what the plugin's driver is.
type InitReply struct {
	Result
	Remote bool
}

// PrepareArgs carry the driver's configuration.
type PrepareArgs struct {
	Call   Call
	Config []byte
}

// TemplateArgs carry a template to validate.
type TemplateArgs struct {
	Call     Call
	Template types.MachineTemplate
}

// CapacityReply is HostCapacity's answer.
type CapacityReply struct {
	Result
	Capacity types.Capacity
}

// AllocateArgs are Allocate's arguments.
type AllocateArgs struct {
	Call     Call
	Template types.MachineTemplate
	Meta     map[string]string
}

// ResourceReply is Allocate's answer.
type ResourceReply struct {
	Result
	Resource *types.Resource
}

// ResourceArgs name the resource of Status, Deallocate, Activity.
type ResourceArgs struct {
	Call     Call
	Resource types.Resource
}

// PhaseReply is Status's answer.
type PhaseReply struct {
	Result
	Phase types.MachinePhase
}

// ListReply is List's answer.
type ListReply struct {
	Result
	Resources []types.Resource
}

// ActivityReply is Activity's answer.
type ActivityReply struct {
	Result
	Counter uint64
}

// LogsArgs open a stream of a machine's logs; the stream is named by the
// call's ID, and ends when the call is cancelled.
type LogsArgs struct {
	Call     Call
	Resource types.Resource
	Options  drivers.LogOptions
}

// ChunkReply is the next part of a log stream: Data, or Done with the
// stream's error (nil when the logs ended).
type ChunkReply struct {
	Result
	Data []byte
	Done bool
}

// replier is every reply.
type replier interface{ failure() *Error }

// errProtocol says the plugin answered in another protocol.
func errProtocol(got int) error {
	return fmt.Errorf("plugin speaks protocol %d, this node %d: install hf-node and its driver plugins from one build", got, protocol)
}

// Cloud is the plugin that runs the cloud drivers (cmd/hf-driver-cloud),
// and CloudTypes the driver types it runs.
var (
	Cloud      = Options{Executable: "hf-driver-cloud"}
	CloudTypes = []string{"aws", "gce"}
)
