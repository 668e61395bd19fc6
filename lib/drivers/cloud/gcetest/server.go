// Package gcetest is a TEST DOUBLE of the Compute Engine API: an HTTP server
// on 127.0.0.1 that speaks Compute's JSON REST (instances insert, get, list,
// delete, getSerialPortOutput; zone operations get and wait; images get and
// getFromFamily; regions get with quotas), keeps instances and their serial
// port output in memory with operations that take time, and injects faults: throttling (429 rateLimitExceeded), a zone
// without capacity, a create delay, a CPU quota, an instance that dies. The
// real google.golang.org/api client talks to it through option.WithEndpoint
// and option.WithoutAuthentication, or with the service account
// ServiceAccount makes, whose tokens it hands out. It is not a Compute emulator: it answers
// the calls hf makes, with the fields hf reads.
package gcetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/compute/v1"
)

// BasePath is where the API lives on the server: the client's endpoint is
// URL + BasePath.
const BasePath = "/compute/v1/"

// Faults are what the server does wrong on purpose.
type Faults struct {
	// CreateDelay keeps an insert operation running (and the instance
	// STAGING) this long.
	CreateDelay time.Duration
	// DeleteDelay keeps a delete operation running this long.
	DeleteDelay time.Duration
	// Throttle answers the next n calls 429 rateLimitExceeded.
	Throttle int
	// NoCapacity ends the next n inserts' operations with
	// ZONE_RESOURCE_POOL_EXHAUSTED.
	NoCapacity int
	// FailDelete answers deletes with 500.
	FailDelete bool
}

type image struct {
	project string
	img     compute.Image
}

type operation struct {
	op     compute.Operation
	doneAt time.Time
	finish func(*operation) // applied once, when the operation is done
}

// Server is the Compute test double. Its methods are safe for concurrent use.
type Server struct {
	URL string
	srv *httptest.Server

	mu         sync.Mutex
	faults     Faults
	cpuQuota   float64
	instQuota  float64
	images     []image
	instances  map[string]*compute.Instance // zone/name
	consoles   map[string]console           // zone/name -> serial port 1
	ops        map[string]*operation        // name
	requestIDs map[string]string            // request id -> operation name
	calls      map[string]int
	seq        int
	now        func() time.Time
}

// New starts a server on 127.0.0.1:0; Close stops it.
func New() *Server {
	s := &Server{instances: map[string]*compute.Instance{}, consoles: map[string]console{}, ops: map[string]*operation{}, requestIDs: map[string]string{},
		calls: map[string]int{}, cpuQuota: 1000, instQuota: 1000, now: time.Now}
	mux := http.NewServeMux()
	p := BasePath + "projects/{project}/"
	mux.HandleFunc("POST "+p+"zones/{zone}/instances", s.wrap("insert", s.insert))
	mux.HandleFunc("GET "+p+"zones/{zone}/instances", s.wrap("list", s.list))
	mux.HandleFunc("GET "+p+"zones/{zone}/instances/{name}", s.wrap("get", s.get))
	mux.HandleFunc("DELETE "+p+"zones/{zone}/instances/{name}", s.wrap("delete", s.delete))
	mux.HandleFunc("GET "+p+"zones/{zone}/instances/{name}/serialPort", s.wrap("getSerialPortOutput", s.serialPort))
	mux.HandleFunc("GET "+p+"zones/{zone}/operations/{op}", s.wrap("operations.get", s.opGet))
	mux.HandleFunc("POST "+p+"zones/{zone}/operations/{op}/wait", s.wrap("operations.wait", s.opWait))
	mux.HandleFunc("GET "+p+"global/images/family/{family}", s.wrap("images.getFromFamily", s.imageFamily))
	mux.HandleFunc("GET "+p+"global/images/{image}", s.wrap("images.get", s.imageGet))
	mux.HandleFunc("GET "+p+"regions/{region}", s.wrap("regions.get", s.region))
	mux.HandleFunc("POST "+tokenPath, s.token)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Endpoint is what the client's option.WithEndpoint takes.
func (s *Server) Endpoint() string { return s.URL + BasePath }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Update changes the faults under the server's lock.
func (s *Server) Update(fn func(f *Faults)) {
	s.mu.Lock()
	fn(&s.faults)
	s.mu.Unlock()
}

// SetQuota sets the region's CPUS and INSTANCES limits; inserts beyond them
// end with QUOTA_EXCEEDED.
func (s *Server) SetQuota(cpus, instances float64) {
	s.mu.Lock()
	s.cpuQuota, s.instQuota = cpus, instances
	s.mu.Unlock()
}

// AddImage makes an image known in project, optionally in a family.
func (s *Server) AddImage(project, name, family string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.images = append(s.images, image{project, compute.Image{
		Name: name, Family: family, Status: "READY", Kind: "compute#image",
		CreationTimestamp: time.Date(2025, 1, 1, 0, 0, s.seq, 0, time.UTC).Format(time.RFC3339),
		SelfLink:          s.URL + BasePath + "projects/" + project + "/global/images/" + name,
	}})
}

// Kill makes an instance die (TERMINATED, as after a host failure).
func (s *Server) Kill(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		if in.Name == name {
			in.Status = "TERMINATED"
			return true
		}
	}
	return false
}

// Instances returns copies of the instances that exist, sorted by name.
func (s *Server) Instances() []compute.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	var out []compute.Instance
	for _, k := range sortedKeys(s.instances) {
		out = append(out, *s.instances[k])
	}
	return out
}

// Calls returns how many times a method ("insert", "operations.wait", ...)
// was called, throttled calls included.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// settle finishes the operations whose time has come (mu held).
func (s *Server) settle() {
	now := s.now()
	for _, name := range sortedKeys(s.ops) {
		o := s.ops[name]
		if o.op.Status != "DONE" && !now.Before(o.doneAt) {
			o.op.Status, o.op.Progress = "DONE", 100
			o.op.EndTime = now.UTC().Format(time.RFC3339)
			if o.finish != nil {
				o.finish(o)
			}
		}
	}
}

// apiError is a Compute error answer.
type apiError struct {
	code            int
	reason, message string
}

func (e *apiError) Error() string { return e.message }

func (s *Server) wrap(method string, h func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[method]++
		throttled := s.faults.Throttle > 0
		if throttled {
			s.faults.Throttle--
		}
		s.mu.Unlock()
		var body any
		var err error
		if throttled {
			err = &apiError{http.StatusTooManyRequests, "rateLimitExceeded", "Rate Limit Exceeded"}
		} else {
			body, err = h(r)
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		if e, ok := err.(*apiError); ok {
			w.WriteHeader(e.code)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"code": e.code, "message": e.message,
				"errors": []map[string]string{{"domain": "global", "reason": e.reason, "message": e.message}},
			}})
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}
}

func notFound(what string) error {
	return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("The resource '%s' was not found", what)}
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// vcpus is the vCPU count of a machine type: its last number ("n2-standard-4"
// has 4), else 2 ("e2-small").
func vcpus(machineType string) float64 {
	mt := machineType[strings.LastIndex(machineType, "/")+1:]
	if n, err := strconv.Atoi(mt[strings.LastIndex(mt, "-")+1:]); err == nil && n > 0 {
		return float64(n)
	}
	return 2
}

var labelFilter = regexp.MustCompile(`labels\.([-_a-z0-9]+)\s*=\s*"([^"]*)"`)

// matchFilter reads the filters hf sends: label equalities joined by AND.
func matchFilter(filter string, in *compute.Instance) bool {
	for _, m := range labelFilter.FindAllStringSubmatch(filter, -1) {
		if in.Labels[m[1]] != m[2] {
			return false
		}
	}
	return true
}
