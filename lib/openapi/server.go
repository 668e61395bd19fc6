package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultHeartbeat       = 15 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
	DefaultShellKeepalive  = 10 * time.Second
)

// Config configures the API server.
type Config struct {
	// AdminToken is the bearer token of the admin (see LoadOrCreateAdminToken).
	AdminToken string
	// Tokens are further accepted tokens, each with its role and user.
	Tokens []Token
	// NodeName is sent back in the X-Hf-Node header of every response.
	NodeName string
	// Ready reports why the node cannot serve yet (/readyz); nil is always ready.
	Ready func() error
	// Now is the wall clock (default time.Now).
	Now func() time.Time
	// Metrics is the registry the HTTP metrics are registered in and /metrics
	// serves; nil creates one with the Go and process collectors.
	Metrics *prometheus.Registry
	// Heartbeat is the interval of the comment lines that keep event streams open
	// through proxies (default 15s).
	Heartbeat time.Duration
	// ShutdownTimeout bounds how long Serve waits for requests in flight once its
	// ctx is done (default 10s); event streams end at once.
	ShutdownTimeout time.Duration
	// BodyTimeout is how long after its headers a request's body may take to
	// arrive, on every route (default 30s): a body sent a byte at a time,
	// or never, does not hold a connection for long (see bodyDeadline).
	BodyTimeout time.Duration
	// StreamWriteTimeout bounds each write to an event stream (default
	// 10s): a client that does not read is dropped, not buffered for.
	StreamWriteTimeout time.Duration
	// ResumeWindow is how far before its Last-Event-ID version a resumed
	// event stream replays (default DefaultResumeWindow; see stream).
	ResumeWindow time.Duration
	// CORSOrigins are the browser origins ("https://ui.example.com") that
	// may call the API from their pages; "*" allows any. Empty: none (the
	// dashboard every node serves is same-origin and needs none).
	CORSOrigins []string
	// MaxStreamsPerToken caps the event streams one token holds open (0:
	// 16); more get 429.
	MaxStreamsPerToken int
	// MaxClaimsPerUser caps the live claims of one user of role user (0:
	// no cap); more get 429.
	MaxClaimsPerUser int
	// UserWritesPerSecond is how fast one user of role user may write
	// through this node, with bursts of five seconds' worth (0: no limit);
	// faster writes get 429 with Retry-After.
	UserWritesPerSecond float64
	// MinMachine is the least a machine counts for in the event capacity
	// check (see cluster.Config.MinMachine).
	MinMachine types.Resources
	// ValidateTemplate, when set, checks a MachineTemplate's driver entries
	// when it is written (the node's drivers do); its *types.FieldError
	// becomes a 400 naming the field.
	ValidateTemplate func(types.MachineTemplate) error
	// AuditFile is where the record of API writes is kept (JSON lines,
	// rotated at AuditMaxBytes, default 64 MiB, keeping one file before);
	// empty keeps the last 10,000 in memory.
	AuditFile     string
	AuditMaxBytes int64
	// Joining lets other nodes join through this one (nil: no joins).
	Joining *Joining
	// Keyring is the node's gossip keyring, for key rotation (nil: gossip
	// is not encrypted).
	Keyring Keyring
	// ClaimsOf returns one user's claims from the node's index, holding
	// every write the store had when called (read only); nil, or an error,
	// reads every claim from the store instead.
	ClaimsOf func(ctx context.Context, user string) ([]*types.MachineClaim, error)
	// LiveClaimsOf counts one user's live (Requested or Bound) claims from
	// the node's indexes, as ClaimsOf holds them, without reading the
	// claims; nil, or an error, counts what userClaims returns.
	LiveClaimsOf func(ctx context.Context, user string) (int, error)
	// NodeView adds to a Node what this node's membership says of it and
	// no record holds (cluster.Node.NodeView: the Reachable condition);
	// the node list, a node's get and the Nodes of event streams carry
	// it. nil adds nothing.
	NodeView func(*types.Node)
	// NodeViewChanged returns a channel closed when what NodeView adds
	// may have moved with no record changing (cluster.Node.NodeViewChanged:
	// membership changed). An event stream that sends Nodes waits on it
	// and sends again each Node whose view moved. nil: a stream's Nodes
	// carry the view of when their records changed.
	NodeViewChanged func() <-chan struct{}
	// SessionsOf returns one user's sessions from the node's index, for the
	// claim quota (nil, or an error: the API lists every session).
	SessionsOf func(ctx context.Context, user string) ([]*types.Session, error)
	// MachineLogs writes the output of one of this node's machines
	// (ErrLogsNotHere, ErrNoLogs); nil serves none.
	MachineLogs func(ctx context.Context, machine string, opts drivers.LogOptions, w io.Writer) error
	// MachineShell runs a shell in one of this node's machines on the
	// stream open returns (which answers the upgrade; the server closes it
	// after MachineShell returned) and returns how the shell ended;
	// ErrLogsNotHere, ErrNoShell. ctx ends when the shell is to be hung
	// up: its client is gone, or Serve is stopping. Nil runs none.
	MachineShell func(ctx context.Context, machine string, opts drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error)
	// ShellKeepalive is how often a shell's connection is checked while
	// the shell is quiet (default DefaultShellKeepalive): under
	// hf-shell.v2 an empty output frame goes out, and on Linux the kernel
	// is asked whether the client is still there. A client gone is
	// noticed within about two of these, and its shell hung up.
	ShellKeepalive time.Duration
	// AtOwner has the node that decides key for the whole cluster run
	// body through the handler every node registers for key, and returns
	// its answer (cluster.Node.Ask). The API asks it for the changes of
	// users that may take an admin away (UsersKey, DecideUserChange); an
	// error is a 503 to retry. nil: this server decides them itself.
	AtOwner func(ctx context.Context, key string, body []byte) ([]byte, error)
	// PeerClient reaches the other nodes' APIs (trusting the cluster CA),
	// with PeerScheme ("https"), for what another node must answer.
	PeerClient *http.Client
	PeerScheme string
}

// Server serves the REST API. Its handler is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	st       *store.Store
	auth     *authenticator
	engine   *gin.Engine
	metrics  *httpMetrics
	auditLog *auditLog

	// stop is closed when Serve shuts down, ending every event stream.
	stop     chan struct{}
	stopOnce sync.Once
	// life ends then too, its cause saying so: every shell is hung up.
	life    context.Context
	endLife context.CancelCauseFunc
	// shells are the shells this server runs or splices through, which
	// Serve waits for once it hung them up.
	shells  *shellSet
	streams atomic.Int64
	// tokenStreams counts the open streams of each token.
	streamsMu    sync.Mutex
	tokenStreams map[string]int
	// quotaLocks holds a *sync.Mutex per user (lockUserQuota).
	quotaLocks sync.Map
	// writeLimits paces users' writes (nil: no limit).
	writeLimits *userBuckets
	// guesses paces users' access codes that match none.
	guesses *userBuckets
	// tickets are the stream tickets this node issued (tickets.go).
	tickets *ticketBook
	// adminMu makes the check and the write of a user change that may
	// take an admin away one step (decideUserChange).
	adminMu sync.Mutex
	// adminLeft, for tests, is called when a change that takes user's
	// admin role away passed the check, before it is written.
	adminLeft func(user string)
}

// New builds the server and its routes. It fails when the tokens are unusable
// (none, empty, duplicated, bad role) or the metrics cannot be registered.
func New(cfg Config, log *slog.Logger, st *store.Store) (*Server, error) {
	if st == nil {
		return nil, errors.New("new api server: store is required")
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = st.Now
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = 10 * time.Second
	}
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = DefaultResumeWindow
	}
	if cfg.MaxStreamsPerToken <= 0 {
		cfg.MaxStreamsPerToken = 16
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.ShellKeepalive <= 0 {
		cfg.ShellKeepalive = DefaultShellKeepalive
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
		cfg.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	auth, err := newAuthenticator(cfg.AdminToken, cfg.Tokens, st, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	m, err := newHTTPMetrics(cfg.Metrics)
	if err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	audit, err := openAuditLog(cfg.AuditFile, cfg.AuditMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("new api server: %w", err)
	}
	s := &Server{
		cfg:         cfg,
		log:         log,
		st:          st,
		auth:        auth,
		metrics:     m,
		auditLog:    audit,
		stop:        make(chan struct{}),
		shells:      newShellSet(),
		tickets:     newTicketBook(cfg.Now),
		writeLimits: newWriteLimits(cfg.UserWritesPerSecond),
		guesses:     newGuessLimits(),
	}
	s.life, s.endLife = context.WithCancelCause(context.Background())
	s.engine = s.newEngine()
	return s, nil
}

// newEngine builds the gin engine. gin's mode is process-wide: release mode only
// silences gin's own debug printing, which would go to stdout, not to slog.
func (s *Server) newEngine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.HandleMethodNotAllowed = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.ContextWithFallback = true
	// The body deadline comes first, so no route answers before it is set.
	// Metrics wrap recovery, so a recovered panic is counted as the 500 it became.
	e.Use(s.bodyDeadline, s.observe, gin.CustomRecoveryWithWriter(nil, s.recovered), s.cors)
	if s.cfg.NodeName != "" {
		e.Use(func(c *gin.Context) { c.Header("X-Hf-Node", s.cfg.NodeName) })
	}
	e.NoRoute(s.noRoute)
	e.NoMethod(s.noMethod)
	s.routes(e)
	return e
}

// Handler returns the HTTP handler of the whole API.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.engine.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), connKey{}, w)))
	})
}

// connKey holds, in a request's context, the server's own ResponseWriter
// (gin's wrapper cannot set deadlines on the connection).
type connKey struct{}

// conn returns the ResponseController of the request's connection.
func conn(r *http.Request, fallback http.ResponseWriter) *http.ResponseController {
	if w, ok := r.Context().Value(connKey{}).(http.ResponseWriter); ok {
		return http.NewResponseController(w)
	}
	return http.NewResponseController(fallback)
}

// Routes lists the registered routes (method and gin path).
func (s *Server) Routes() gin.RoutesInfo { return s.engine.Routes() }

// Serve serves the API on ln until ctx is done, then ends every event stream,
// hangs up every shell, waits up to ShutdownTimeout for the other requests
// and the shells and returns nil. It returns the listener's error when
// serving fails. Serve closes ln. A Server serves once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.stopping()
		_ = s.Close()
		return fmt.Errorf("serve api: %w", err)
	case <-ctx.Done():
	}
	s.stopping()
	// Hijacked connections are the handlers' own: Shutdown does not wait
	// for the shells on them, which end once hung up.
	shellsDone := s.shells.stop()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		s.log.Warn("api shutdown timed out", "err", err)
		_ = srv.Close()
	}
	select {
	case <-shellsDone:
	case <-sctx.Done():
		s.log.Warn("shells still ending at api shutdown", "shells", s.shells.count())
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("serve api: %w", serr)
	}
	return s.Close()
}

// Close releases the audit file; Serve calls it when it ends.
func (s *Server) Close() error { return s.auditLog.close() }

// stopping ends every event stream and hangs up every shell, now and in
// the future.
func (s *Server) stopping() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.endLife(fmt.Errorf("node %s is stopping", s.cfg.NodeName))
	})
}

// ActiveStreams is the number of event streams being served.
func (s *Server) ActiveStreams() int64 { return s.streams.Load() }
