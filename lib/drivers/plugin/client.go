package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/rpc"
	"net/rpc/jsonrpc"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Options say which executable a driver's plugin is.
type Options struct {
	// Executable is the plugin's file name ("hf-driver-cloud"): it is looked
	// for next to the running executable (hf-node), then on PATH.
	Executable string
	// Path, when set, is the executable to run, and Executable only names it.
	Path string
	// Args are its arguments and Env what it gets besides the node's
	// environment.
	Args []string
	Env  []string
}

// Factory builds drivers of driverType that run in the plugin opt says.
func Factory(opt Options, driverType string) drivers.Factory {
	return func(env drivers.Env) drivers.Driver { return New(opt, driverType, env) }
}

// restartGap is the least time between two starts of a plugin: one that
// exits at once is not started in a loop.
const restartGap = time.Second

// callTimeout bounds the calls that take no context (HostCapacity,
// ValidateTemplate), and a new process's Init: an executable that is not
// a plugin (another file of that name on PATH) must not hold the node's
// start for ever.
var callTimeout = 30 * time.Second

// closeTimeout is how long a closed plugin has to exit before it is
// killed.
var closeTimeout = 10 * time.Second

// errClosed is returned by every call after Close.
var errClosed = errors.New("driver plugin closed")

// Driver is a driver that runs in a plugin process. The process starts at
// Prepare, is started again by the next call if it exits, and stops at
// Close.
type Driver struct {
	opt Options
	typ string
	env drivers.Env
	log *slog.Logger
	ids atomic.Uint64

	remote atomic.Bool

	mu       sync.Mutex // guards below; held while a process starts
	p        *proc
	cfg      []byte // what Prepare gave, for a restarted process
	prepared bool
	started  time.Time
	closed   bool
	capacity types.Capacity // the last HostCapacity answered
	warned   time.Time      // when a failed HostCapacity was last logged
}

var (
	_ drivers.Driver        = (*Driver)(nil)
	_ drivers.ActivityMeter = (*Driver)(nil)
	_ drivers.LogReader     = (*Driver)(nil)
	_ io.Closer             = (*Driver)(nil)
)

// New returns an unprepared driver of driverType run by the plugin opt says.
func New(opt Options, driverType string, env drivers.Env) *Driver {
	env = env.Defaults(driverType)
	return &Driver{opt: opt, typ: driverType, env: env, log: env.Log.With("plugin", opt.Executable)}
}

// proc is one process of the plugin.
type proc struct {
	cmd    *exec.Cmd
	client *rpc.Client
	exited chan struct{}
	err    error // how it exited; set before exited closes
}

// Name is the driver type.
func (d *Driver) Name() string { return d.typ }

// IsRemote is what the plugin's driver says (false before Prepare).
func (d *Driver) IsRemote() bool { return d.remote.Load() }

// path finds the plugin's executable.
func (d *Driver) path() (string, error) {
	if d.opt.Path != "" {
		return d.opt.Path, nil
	}
	self, err := os.Executable()
	if err == nil {
		if s, err := filepath.EvalSymlinks(self); err == nil {
			self = s
		}
		p := filepath.Join(filepath.Dir(self), d.opt.Executable)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(d.opt.Executable); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the %s driver runs in %s, which is neither next to %s nor on PATH: install it beside hf-node (go build -o DIR ./cmd/... builds both)",
		d.typ, d.opt.Executable, self)
}

// pluginEnv is the environment a plugin gets: the node's, without its own
// settings (HF_*: the admin token, the gossip key may be among them). The
// SDKs' settings (AWS_*, GOOGLE_*, proxies, HOME for their files) stay.
func pluginEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HF_") {
			out = append(out, kv)
		}
	}
	return out
}

// start starts a process of the plugin and makes its driver (Init). The
// caller holds d.mu.
func (d *Driver) start(ctx context.Context) (*proc, error) {
	path, err := d.path()
	if err != nil {
		return nil, err
	}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		_, _ = reqR.Close(), reqW.Close()
		return nil, err
	}
	cmd := exec.Command(path, d.opt.Args...)
	cmd.Env = append(append(pluginEnv(os.Environ()), cookieEnv+"="+strconv.Itoa(protocol)), d.opt.Env...)
	cmd.ExtraFiles = []*os.File{reqR, repW} // fd 3 and 4
	out := &logLines{log: d.log}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Start()
	_, _ = reqR.Close(), repW.Close() // the plugin's ends
	if err != nil {
		_, _ = reqW.Close(), repR.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	// A start counts for restartGap whether or not Init then succeeds: a
	// plugin that cannot answer is not started again at every call.
	d.started = time.Now()
	p := &proc{cmd: cmd, client: rpc.NewClientWithCodec(jsonrpc.NewClientCodec(pipes{repR, reqW})), exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.flush()
		_ = p.client.Close()
		close(p.exited)
	}()
	var ir InitReply
	ictx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err = d.invoke(ictx, p, 0, "Init", InitArgs{Protocol: protocol, Type: d.typ, Instance: d.env.Instance, DataDir: d.env.DataDir, NodeName: d.env.NodeName,
		LogLevel: leastLevel(d.log)}, &ir)
	if err != nil {
		d.stop(p)
		return nil, fmt.Errorf("%s: %w", d.opt.Executable, err)
	}
	d.remote.Store(ir.Remote)
	return p, nil
}

// conn is the running process, started (and prepared, when Prepare was
// called before) if there is none.
func (d *Driver) conn(ctx context.Context) (*proc, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	if p := d.p; p != nil {
		select {
		case <-p.exited:
			d.log.Warn("driver plugin exited; starting it again", "driver", d.env.Instance, "err", p.err)
			d.p = nil
		default:
			return p, nil
		}
	}
	if wait := restartGap - time.Since(d.started); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	p, err := d.start(ctx)
	if err != nil {
		return nil, err
	}
	if d.prepared {
		c := d.callOf(ctx)
		if err := d.invoke(ctx, p, c.ID, "Prepare", PrepareArgs{Call: c, Config: d.cfg}, &Result{}); err != nil {
			d.stop(p)
			return nil, fmt.Errorf("prepare the restarted %s: %w", d.opt.Executable, err)
		}
	}
	d.p = p
	return p, nil
}

// callOf is a new call under ctx.
func (d *Driver) callOf(ctx context.Context) Call {
	c := Call{ID: d.ids.Add(1)}
	if dl, ok := ctx.Deadline(); ok {
		c.Timeout = max(time.Until(dl), time.Nanosecond)
	}
	return c
}

// invoke makes one call to p and waits for its answer or ctx; id (when not
// 0) is cancelled in the plugin when ctx ends first.
func (d *Driver) invoke(ctx context.Context, p *proc, id uint64, method string, args any, reply replier) error {
	call := p.client.Go(service+"."+method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		if call.Error != nil {
			return d.lost(p, call.Error)
		}
		return reply.failure().err()
	case <-ctx.Done():
		if id != 0 {
			p.client.Go(service+".Cancel", Call{ID: id}, new(Result), make(chan *rpc.Call, 1))
		}
		return ctx.Err()
	}
}

// lost is the error of a call the plugin did not answer: it exited, or
// broke the protocol.
func (d *Driver) lost(p *proc, err error) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
		return fmt.Errorf("driver plugin %s exited (%v) during the call", d.opt.Executable, p.err)
	case <-t.C:
		return fmt.Errorf("driver plugin %s: %w", d.opt.Executable, err)
	}
}

// stop ends p: its requests close, so it exits; it is killed if it has not
// within closeTimeout.
func (d *Driver) stop(p *proc) {
	_ = p.client.Close()
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return
	case <-t.C:
	}
	d.log.Warn("driver plugin did not exit; killing it", "driver", d.env.Instance)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// call makes one call with the arguments args builds for it.
func (d *Driver) call(ctx context.Context, method string, args func(Call) any, reply replier) error {
	p, err := d.conn(ctx)
	if err != nil {
		return err
	}
	c := d.callOf(ctx)
	return d.invoke(ctx, p, c.ID, method, args(c), reply)
}

// Prepare starts the plugin and prepares its driver with cfg. When it
// fails the plugin is stopped.
func (d *Driver) Prepare(ctx context.Context, cfg []byte) error {
	err := d.call(ctx, "Prepare", func(c Call) any { return PrepareArgs{Call: c, Config: cfg} }, &Result{})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if p := d.p; p != nil {
			d.p = nil
			d.stop(p)
		}
		return err
	}
	d.cfg, d.prepared = append([]byte(nil), cfg...), true
	return nil
}

// ValidateTemplate is the plugin driver's.
func (d *Driver) ValidateTemplate(t types.MachineTemplate) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return d.call(ctx, "ValidateTemplate", func(c Call) any { return TemplateArgs{Call: c, Template: t} }, &Result{})
}

// HostCapacity is the plugin driver's; while the plugin does not answer,
// the last answer it gave (logged).
func (d *Driver) HostCapacity() types.Capacity {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var r CapacityReply
	err := d.call(ctx, "HostCapacity", func(c Call) any { return c }, &r)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		// The node asks every report: say it once a minute.
		if !errors.Is(err, errClosed) && time.Since(d.warned) >= time.Minute {
			d.warned = time.Now()
			d.log.Warn("driver plugin does not answer; its last capacity stands", "driver", d.env.Instance, "err", err)
		}
		return d.capacity
	}
	d.capacity = r.Capacity
	return r.Capacity
}

// Allocate is the plugin driver's.
func (d *Driver) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	var r ResourceReply
	if err := d.call(ctx, "Allocate", func(c Call) any { return AllocateArgs{Call: c, Template: t, Meta: meta} }, &r); err != nil {
		return nil, err
	}
	if r.Resource == nil {
		return nil, fmt.Errorf("driver plugin %s allocated no resource", d.opt.Executable)
	}
	return r.Resource, nil
}

// Status is the plugin driver's.
func (d *Driver) Status(ctx context.Context, res *types.Resource) (types.MachinePhase, error) {
	var r PhaseReply
	err := d.call(ctx, "Status", func(c Call) any { return ResourceArgs{Call: c, Resource: *res} }, &r)
	return r.Phase, err
}

// Deallocate is the plugin driver's.
func (d *Driver) Deallocate(ctx context.Context, res *types.Resource) error {
	return d.call(ctx, "Deallocate", func(c Call) any { return ResourceArgs{Call: c, Resource: *res} }, &Result{})
}

// List is the plugin driver's.
func (d *Driver) List(ctx context.Context) ([]types.Resource, error) {
	var r ListReply
	err := d.call(ctx, "List", func(c Call) any { return c }, &r)
	return r.Resources, err
}

// Activity is the plugin driver's (an error if it measures none).
func (d *Driver) Activity(ctx context.Context, res *types.Resource) (uint64, error) {
	var r ActivityReply
	err := d.call(ctx, "Activity", func(c Call) any { return ResourceArgs{Call: c, Resource: *res} }, &r)
	return r.Counter, err
}

// Logs writes the plugin driver's logs of res to w, a part at a time.
func (d *Driver) Logs(ctx context.Context, res *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	p, err := d.conn(ctx)
	if err != nil {
		return err
	}
	open := d.callOf(ctx)
	if err := d.invoke(ctx, p, open.ID, "LogsOpen", LogsArgs{Call: open, Resource: *res, Options: opts}, &Result{}); err != nil {
		return err
	}
	cancel := func() { p.client.Go(service+".Cancel", Call{ID: open.ID}, new(Result), make(chan *rpc.Call, 1)) }
	for {
		var ch ChunkReply
		call := p.client.Go(service+".LogsRead", Call{ID: open.ID}, &ch, make(chan *rpc.Call, 1))
		select {
		case <-call.Done:
		case <-ctx.Done():
			cancel()
			return ctx.Err()
		}
		if call.Error != nil {
			return d.lost(p, call.Error)
		}
		if len(ch.Data) > 0 {
			if _, err := w.Write(ch.Data); err != nil {
				cancel()
				return err
			}
		}
		if ch.Done {
			return ch.Err.err()
		}
	}
}

// Close closes the plugin's driver and stops the plugin. Calls after it
// fail.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	p := d.p
	d.p = nil
	d.mu.Unlock()
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := d.invoke(ctx, p, 0, "Close", Call{}, &Result{})
	d.stop(p)
	return err
}

// leastLevel is the least of the levels log writes (Error when it writes
// none of them).
func leastLevel(log *slog.Logger) slog.Level {
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if log.Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.LevelError
}

// lineMax bounds one line of the plugin's output.
const lineMax = 64 << 10

// logLines logs what a plugin writes: its JSON log records as records of
// the node's log (their level, message and attributes), anything else (a
// panic's trace) line by line as warnings.
type logLines struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > lineMax {
		l.emit(l.buf)
		l.buf = nil
	}
	l.buf = append([]byte(nil), l.buf...)
	return len(p), nil
}

// flush logs what is left after the plugin's last newline.
func (l *logLines) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit(l.buf)
	l.buf = nil
}

func (l *logLines) emit(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	ctx := context.Background()
	var rec map[string]any
	if json.Unmarshal(line, &rec) == nil {
		if msg, ok := rec["msg"].(string); ok {
			level := slog.LevelInfo
			if s, ok := rec["level"].(string); ok {
				_ = level.UnmarshalText([]byte(s))
			}
			if !l.log.Enabled(ctx, level) {
				return
			}
			delete(rec, "msg")
			delete(rec, "level")
			delete(rec, "time")
			keys := make([]string, 0, len(rec))
			for k := range rec {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			attrs := make([]any, 0, 2*len(keys))
			for _, k := range keys {
				attrs = append(attrs, k, rec[k])
			}
			l.log.Log(ctx, level, msg, attrs...)
			return
		}
	}
	l.log.Warn("driver plugin output", "line", string(line))
}
