package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/rpc"
	"net/rpc/jsonrpc"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
)

// Serve is a plugin's main: it serves the node that started it, running the
// driver type the node asks for (one of factories), until the node closes
// the driver or dies. Started by hand, it returns an error saying so.
func Serve(name string, factories map[string]drivers.Factory) error {
	v := os.Getenv(cookieEnv)
	if v == "" {
		types := make([]string, 0, len(factories))
		for t := range factories {
			types = append(types, t)
		}
		sort.Strings(types)
		return fmt.Errorf("%s runs the %s drivers for hf-node, which starts it when its configuration has one; it is not run by hand", name, strings.Join(types, " and "))
	}
	if n, err := strconv.Atoi(v); err != nil || n != protocol {
		return errProtocol(n)
	}
	// The node stops the plugin by closing its requests; a terminal's
	// Ctrl-C, sent to the node's whole process group, must not kill it while
	// the node is still closing its machines, nor a hang-up the node ignores
	// (under nohup): the node gives what it starts SIGHUP at its default.
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	in, out := os.NewFile(3, "requests"), os.NewFile(4, "replies")
	if in == nil || out == nil {
		return errors.New("no requests on fd 3 and replies on fd 4: the node starts its plugins")
	}
	serveConn(pipes{in, out}, factories, os.Stderr)
	return nil
}

// serveConn serves the calls that arrive on conn until it closes, then ends
// every call still running and closes the driver. The driver logs JSON
// records to logs, at the level Init says.
func serveConn(conn io.ReadWriteCloser, factories map[string]drivers.Factory, logs io.Writer) {
	base, stop := context.WithCancel(context.Background())
	s := &Service{factories: factories, base: base,
		calls: map[uint64]context.CancelFunc{}, cancelled: map[uint64]time.Time{}, streams: map[uint64]*stream{}}
	s.log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: &s.level}))
	srv := rpc.NewServer()
	if err := srv.RegisterName(service, s); err != nil {
		panic(err) // the methods below are wrong: a bug, not an input
	}
	srv.ServeCodec(jsonrpc.NewServerCodec(conn))
	stop()
	s.closeDriver()
}

// Service is the plugin's side of the calls. Its exported methods are the
// calls; nothing else of it is exported.
type Service struct {
	factories map[string]drivers.Factory
	log       *slog.Logger
	level     slog.LevelVar // Init sets it
	base      context.Context

	mu        sync.Mutex
	d         drivers.Driver
	closed    bool
	calls     map[uint64]context.CancelFunc
	cancelled map[uint64]time.Time // Cancels that arrived before their call
	streams   map[uint64]*stream
}

// cancelledKeep bounds how long a Cancel that arrived before its call is
// kept: the call was sent first, so it is running or done by then.
const cancelledKeep = time.Minute

// begin is a call's context, and the function that ends it.
func (s *Service) begin(c Call) (context.Context, func()) {
	ctx, cancel := context.WithCancel(s.base)
	if c.Timeout > 0 {
		var cancelT context.CancelFunc
		ctx, cancelT = context.WithTimeout(ctx, c.Timeout)
		prev := cancel
		cancel = func() { cancelT(); prev() }
	}
	s.mu.Lock()
	if _, ok := s.cancelled[c.ID]; ok {
		delete(s.cancelled, c.ID)
		cancel()
	} else {
		s.calls[c.ID] = cancel
	}
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		delete(s.calls, c.ID)
		s.mu.Unlock()
		cancel()
	}
}

// driver is the driver Init made, or an error before Init.
func (s *Service) driver() (drivers.Driver, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d == nil {
		return nil, fmt.Errorf("plugin: no Init yet: %w", drivers.ErrNotPrepared)
	}
	return s.d, nil
}

// closeDriver closes the driver, if it is a closer, once.
func (s *Service) closeDriver() {
	s.mu.Lock()
	d := s.d
	if s.closed {
		d = nil
	}
	s.closed = true
	s.mu.Unlock()
	if c, ok := d.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.log.Warn("close driver", "err", err)
		}
	}
}

// Init builds the driver. It is the first call, and the only one that may
// come before the driver exists.
func (s *Service) Init(a InitArgs, r *InitReply) error {
	if a.Protocol != protocol {
		r.Err = wireError(errProtocol(a.Protocol))
		return nil
	}
	f, ok := s.factories[a.Type]
	if !ok {
		r.Err = wireError(fmt.Errorf("%w %q", drivers.ErrUnknownType, a.Type))
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d != nil {
		r.Err = wireError(errors.New("plugin: Init called twice"))
		return nil
	}
	s.level.Set(a.LogLevel)
	s.d = f(drivers.Env{Instance: a.Instance, DataDir: a.DataDir, NodeName: a.NodeName, Log: s.log}.Defaults(a.Type))
	r.Remote = s.d.IsRemote()
	return nil
}

// Prepare is drivers.Driver's.
func (s *Service) Prepare(a PrepareArgs, r *Result) error {
	r.Err = s.run(a.Call, func(ctx context.Context, d drivers.Driver) error { return d.Prepare(ctx, a.Config) })
	return nil
}

// ValidateTemplate is drivers.Driver's.
func (s *Service) ValidateTemplate(a TemplateArgs, r *Result) error {
	r.Err = s.run(a.Call, func(_ context.Context, d drivers.Driver) error { return d.ValidateTemplate(a.Template) })
	return nil
}

// HostCapacity is drivers.Driver's.
func (s *Service) HostCapacity(a Call, r *CapacityReply) error {
	r.Err = s.run(a, func(_ context.Context, d drivers.Driver) error {
		r.Capacity = d.HostCapacity()
		return nil
	})
	return nil
}

// Allocate is drivers.Driver's.
func (s *Service) Allocate(a AllocateArgs, r *ResourceReply) error {
	r.Err = s.run(a.Call, func(ctx context.Context, d drivers.Driver) (err error) {
		r.Resource, err = d.Allocate(ctx, a.Template, a.Meta)
		return err
	})
	return nil
}

// Status is drivers.Driver's.
func (s *Service) Status(a ResourceArgs, r *PhaseReply) error {
	r.Err = s.run(a.Call, func(ctx context.Context, d drivers.Driver) (err error) {
		r.Phase, err = d.Status(ctx, &a.Resource)
		return err
	})
	return nil
}

// Deallocate is drivers.Driver's.
func (s *Service) Deallocate(a ResourceArgs, r *Result) error {
	r.Err = s.run(a.Call, func(ctx context.Context, d drivers.Driver) error { return d.Deallocate(ctx, &a.Resource) })
	return nil
}

// List is drivers.Driver's.
func (s *Service) List(a Call, r *ListReply) error {
	r.Err = s.run(a, func(ctx context.Context, d drivers.Driver) (err error) {
		r.Resources, err = d.List(ctx)
		return err
	})
	return nil
}

// Activity is drivers.ActivityMeter's.
func (s *Service) Activity(a ResourceArgs, r *ActivityReply) error {
	r.Err = s.run(a.Call, func(ctx context.Context, d drivers.Driver) (err error) {
		m, ok := d.(drivers.ActivityMeter)
		if !ok {
			return fmt.Errorf("driver %s does not measure activity", d.Name())
		}
		r.Counter, err = m.Activity(ctx, &a.Resource)
		return err
	})
	return nil
}

// Cancel ends the context of call a.ID (a stream's, for LogsOpen's ID).
func (s *Service) Cancel(a Call, r *Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.calls[a.ID]; ok {
		cancel()
		return nil
	}
	now := time.Now()
	for id, at := range s.cancelled {
		if now.Sub(at) > cancelledKeep {
			delete(s.cancelled, id)
		}
	}
	s.cancelled[a.ID] = now
	return nil
}

// Close closes the driver; the node closes the pipes next.
func (s *Service) Close(_ Call, r *Result) error {
	s.closeDriver()
	return nil
}

// run runs fn under the call's context, as the call's error.
func (s *Service) run(c Call, fn func(context.Context, drivers.Driver) error) *Error {
	d, err := s.driver()
	if err != nil {
		return wireError(err)
	}
	ctx, end := s.begin(c)
	defer end()
	return wireError(fn(ctx, d))
}

// stream is one machine's logs on their way to the node.
type stream struct {
	chunks chan []byte
	done   chan struct{}
	err    error // set before done closes
}

// chunkMax bounds what one LogsRead returns.
const chunkMax = 64 << 10

// LogsOpen starts writing a machine's logs into a stream named a.Call.ID,
// which LogsRead reads and Cancel of that ID ends.
func (s *Service) LogsOpen(a LogsArgs, r *Result) error {
	d, err := s.driver()
	if err != nil {
		r.Err = wireError(err)
		return nil
	}
	lr, ok := d.(drivers.LogReader)
	if !ok {
		r.Err = wireError(fmt.Errorf("driver %s keeps no logs", d.Name()))
		return nil
	}
	ctx, end := s.begin(a.Call)
	st := &stream{chunks: make(chan []byte, 16), done: make(chan struct{})}
	s.mu.Lock()
	s.streams[a.Call.ID] = st
	s.mu.Unlock()
	go func() {
		defer end()
		st.err = lr.Logs(ctx, &a.Resource, a.Options, chunkWriter{ctx, st.chunks})
		close(st.done)
		if ctx.Err() != nil {
			// Cancelled: the node reads no more of it (a LogsRead waiting
			// now still gets its end).
			s.mu.Lock()
			delete(s.streams, a.Call.ID)
			s.mu.Unlock()
		}
	}()
	return nil
}

// LogsRead returns the next part of stream a.ID, waiting for one; the last
// says Done, with the stream's error.
func (s *Service) LogsRead(a Call, r *ChunkReply) error {
	s.mu.Lock()
	st := s.streams[a.ID]
	s.mu.Unlock()
	if st == nil {
		r.Done, r.Err = true, wireError(fmt.Errorf("no log stream %d", a.ID))
		return nil
	}
	select {
	case b := <-st.chunks:
		r.Data = more(b, st.chunks)
		return nil
	case <-st.done:
	}
	select { // the writer is done: what it wrote before comes first
	case b := <-st.chunks:
		r.Data = more(b, st.chunks)
		return nil
	default:
	}
	s.mu.Lock()
	delete(s.streams, a.ID)
	s.mu.Unlock()
	r.Done, r.Err = true, wireError(st.err)
	return nil
}

// more appends to b what chunks holds already, up to chunkMax.
func more(b []byte, chunks chan []byte) []byte {
	for len(b) < chunkMax {
		select {
		case c := <-chunks:
			b = append(b, c...)
		default:
			return b
		}
	}
	return b
}

// chunkWriter hands what a driver writes to its stream, waiting while the
// stream is full: a slow reader slows the driver, it does not grow a buffer.
type chunkWriter struct {
	ctx    context.Context
	chunks chan []byte
}

func (w chunkWriter) Write(p []byte) (int, error) {
	select {
	case w.chunks <- append([]byte(nil), p...):
		return len(p), nil
	case <-w.ctx.Done():
		return 0, w.ctx.Err()
	}
}

// pipes is a connection made of a read and a write end.
type pipes struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipes) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipes) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }

// StartedByNode reports whether this process is a plugin a node started
// (a test binary that is its own plugin asks it in TestMain).
func StartedByNode() bool { return os.Getenv(cookieEnv) != "" }
