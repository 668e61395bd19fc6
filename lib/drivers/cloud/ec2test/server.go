// Package ec2test is a TEST DOUBLE of Amazon EC2 (and of the one Service
// Quotas call and the one CloudWatch call the aws driver makes): an HTTP server on 127.0.0.1 that speaks
// EC2's Query API (form-encoded Action=RunInstances&..., XML answers in the
// EC2 namespace, errors as <Response><Errors><Error>), keeps instances, their
// console output and key pairs in memory and injects faults: throttling (RequestLimitExceeded), insufficient
// capacity, a create delay, a vCPU quota, an instance that dies, terminate
// calls that fail. The real aws-sdk-go-v2 client talks to it through its
// endpoint override with static fake credentials; it does not check
// signatures. It is not an EC2 emulator: it answers the calls hf makes, with
// the fields hf reads.
package ec2test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Namespace is the XML namespace of EC2's answers.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Image is an AMI the server knows.
type Image struct {
	ID, Name, Owner string
	// CreationDate is ISO 8601 ("2025-01-02T03:04:05.000Z").
	CreationDate string
	RootDevice   string
}

// Instance is the server's record of one instance.
type Instance struct {
	ID, ImageID, Type, SubnetID, KeyName, ClientToken string
	SecurityGroups                                    []string
	Tags                                              map[string]string
	VolumeTags                                        map[string]string
	UserData                                          string // base64, as sent
	VolumeSizeGB                                      int
	VolumeType                                        string
	PrivateIP, PublicIP                               string
	Launched                                          time.Time
	// State is pending, running, shutting-down, terminated, stopping, stopped.
	State string
	// Console is everything the instance printed on its serial console.
	Console    string
	consoleAt  time.Time
	runningAt  time.Time
	terminated time.Time
}

// Faults are what the server does wrong on purpose.
type Faults struct {
	// CreateDelay keeps a new instance pending this long.
	CreateDelay time.Duration
	// TerminateDelay keeps a terminating instance shutting-down this long.
	TerminateDelay time.Duration
	// Throttle answers the next n calls (any action) RequestLimitExceeded.
	Throttle int
	// NoCapacity answers the next n RunInstances InsufficientInstanceCapacity.
	NoCapacity int
	// FailTerminate answers TerminateInstances with an internal error.
	FailTerminate bool
	// FailDeleteKeyPair answers DeleteKeyPair with an internal error.
	FailDeleteKeyPair bool
	// MetricsDenied answers CloudWatch's GetMetricData AccessDeniedException.
	MetricsDenied bool
	// QuotaDenied answers GetServiceQuota AccessDeniedException.
	QuotaDenied bool
}

// Server is the EC2 test double. Its methods are safe for concurrent use.
type Server struct {
	URL string
	srv *httptest.Server

	mu        sync.Mutex
	faults    Faults
	vcpuQuota float64 // 0: none
	images    []Image
	subnets   map[string]map[string]string // id -> tags
	instances map[string]*Instance
	keyPairs  map[string]*KeyPair // by name
	cpu       map[string][]cpuPoint
	order     []string
	calls     map[string]int
	created   func(id string)
	now       func() time.Time
}

// New starts a server on 127.0.0.1:0; Close stops it.
func New() *Server {
	s := &Server{subnets: map[string]map[string]string{}, instances: map[string]*Instance{}, keyPairs: map[string]*KeyPair{}, cpu: map[string][]cpuPoint{}, calls: map[string]int{}, now: time.Now}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetFaults replaces the faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// Update changes the faults under the server's lock.
func (s *Server) Update(fn func(f *Faults)) {
	s.mu.Lock()
	fn(&s.faults)
	s.mu.Unlock()
}

// SetVCPUQuota sets the account's vCPU quota: Service Quotas reports it and
// RunInstances beyond it answers VcpuLimitExceeded. 0 means none.
func (s *Server) SetVCPUQuota(v float64) {
	s.mu.Lock()
	s.vcpuQuota = v
	s.mu.Unlock()
}

// AddImage makes an AMI known.
func (s *Server) AddImage(img Image) {
	s.mu.Lock()
	s.images = append(s.images, img)
	s.mu.Unlock()
}

// AddSubnet makes a subnet known with its tags.
func (s *Server) AddSubnet(id string, tags map[string]string) {
	s.mu.Lock()
	s.subnets[id] = tags
	s.mu.Unlock()
}

// OnCreate calls fn (outside the lock) with every instance RunInstances made.
func (s *Server) OnCreate(fn func(id string)) {
	s.mu.Lock()
	s.created = fn
	s.mu.Unlock()
}

// Kill makes an instance die: it is stopped, as after a host failure.
func (s *Server) Kill(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if ok {
		in.State = "stopped"
	}
	return ok
}

// Instances returns copies of the instances (terminated ones included), in
// creation order, with their states as of now.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.order))
	for _, id := range s.order {
		in := s.instances[id]
		s.advance(in)
		c := *in
		c.Tags = cloneMap(in.Tags)
		out = append(out, c)
	}
	return out
}

// Live returns the instances that are not terminated.
func (s *Server) Live() []Instance {
	var out []Instance
	for _, in := range s.Instances() {
		if in.State != "terminated" {
			out = append(out, in)
		}
	}
	return out
}

// Calls returns how many times action was called (throttled calls
// included); "GetConsoleOutput/Latest" counts the GetConsoleOutput calls
// that asked for the latest output.
func (s *Server) Calls(action string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[action]
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// advance moves an instance along its timed states (called with mu held).
func (s *Server) advance(in *Instance) {
	now := s.now()
	if in.State == "pending" && !now.Before(in.runningAt) {
		in.State = "running"
	}
	if in.State == "shutting-down" && !now.Before(in.terminated) {
		in.State = "terminated"
	}
}

// apiError is an EC2 error answer.
type apiError struct {
	status        int
	code, message string
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, cloudWatchPath) {
		s.serveCloudWatch(w, r)
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveQuotas(w, r, target)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, apiError{http.StatusBadRequest, "MalformedQueryString", err.Error()})
		return
	}
	action := r.Form.Get("Action")
	s.mu.Lock()
	s.calls[action]++
	throttled := s.faults.Throttle > 0
	if throttled {
		s.faults.Throttle--
	}
	s.mu.Unlock()
	if throttled {
		writeError(w, apiError{http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded."})
		return
	}
	var body any
	var aerr *apiError
	switch action {
	case "RunInstances":
		body, aerr = s.runInstances(r.Form)
	case "DescribeInstances":
		body, aerr = s.describeInstances(r.Form)
	case "TerminateInstances":
		body, aerr = s.terminateInstances(r.Form)
	case "DescribeImages":
		body, aerr = s.describeImages(r.Form)
	case "DescribeSubnets":
		body, aerr = s.describeSubnets(r.Form)
	case "CreateKeyPair":
		body, aerr = s.createKeyPair(r.Form)
	case "DeleteKeyPair":
		body, aerr = s.deleteKeyPair(r.Form)
	case "DescribeKeyPairs":
		body, aerr = s.describeKeyPairs(r.Form)
	case "GetConsoleOutput":
		body, aerr = s.getConsoleOutput(r.Form)
	default:
		aerr = &apiError{http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)}
	}
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(body)
}

func writeError(w http.ResponseWriter, e apiError) {
	type xmlError struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type response struct {
		XMLName   xml.Name   `xml:"Response"`
		Errors    []xmlError `xml:"Errors>Error"`
		RequestID string     `xml:"RequestID"`
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(response{Errors: []xmlError{{e.code, e.message}}, RequestID: newID("")})
}

// serveQuotas answers Service Quotas' GetServiceQuota (JSON 1.1 protocol).
func (s *Server) serveQuotas(w http.ResponseWriter, r *http.Request, target string) {
	s.mu.Lock()
	s.calls[target]++
	quota, denied := s.vcpuQuota, s.faults.QuotaDenied
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fail := func(status int, typ, msg string) {
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	var in struct{ ServiceCode, QuotaCode string }
	switch {
	case target != "ServiceQuotasV20190624.GetServiceQuota":
		fail(http.StatusBadRequest, "UnknownOperationException", target)
	case json.NewDecoder(r.Body).Decode(&in) != nil:
		fail(http.StatusBadRequest, "SerializationException", "bad body")
	case denied:
		fail(http.StatusBadRequest, "AccessDeniedException", "not authorized to perform servicequotas:GetServiceQuota")
	case quota <= 0:
		fail(http.StatusBadRequest, "NoSuchResourceException", "no quota "+in.QuotaCode)
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"Quota": map[string]any{
			"ServiceCode": in.ServiceCode, "QuotaCode": in.QuotaCode, "Value": quota, "Unit": "None",
		}})
	}
}

// list reads a Query API list: prefix.1, prefix.2, ...
func list(f map[string][]string, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := f[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// filters reads Filter.N.Name / Filter.N.Value.M.
func filters(f map[string][]string) map[string][]string {
	out := map[string][]string{}
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name, ok := f[p+".Name"]
		if !ok {
			return out
		}
		out[name[0]] = list(f, p+".Value")
	}
}

// tagSpecs reads TagSpecification.N.{ResourceType,Tag.M.Key,Tag.M.Value}.
func tagSpecs(f map[string][]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i := 1; ; i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		rt, ok := f[p+".ResourceType"]
		if !ok {
			return out
		}
		tags := map[string]string{}
		for j := 1; ; j++ {
			q := p + ".Tag." + strconv.Itoa(j)
			k, ok := f[q+".Key"]
			if !ok {
				break
			}
			tags[k[0]] = first(f[q+".Value"])
		}
		out[rt[0]] = tags
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// matches is EC2's filter match: every filter has a value that matches
// (wildcards * and ? as in a shell glob).
func matches(fs map[string][]string, get func(name string) (string, bool)) bool {
	for name, values := range fs {
		got, ok := get(name)
		if !ok {
			return false
		}
		if !slices.ContainsFunc(values, func(v string) bool { m, _ := path.Match(v, got); return m }) {
			return false
		}
	}
	return true
}

// tagFilter is the value a filter "tag:<key>" reads of tags.
func tagFilter(name string, tags map[string]string) (string, bool) {
	key, ok := strings.CutPrefix(name, "tag:")
	if !ok {
		return "", false
	}
	v, ok := tags[key]
	return v, ok
}

func newID(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)[:17]
}

// VCPUs is the vCPU count the server gives an instance type.
func VCPUs(instanceType string) int {
	switch {
	case strings.HasSuffix(instanceType, ".xlarge"):
		return 4
	case strings.HasSuffix(instanceType, ".2xlarge"):
		return 8
	case strings.HasSuffix(instanceType, ".4xlarge"):
		return 16
	}
	return 2
}

func (s *Server) sortedIDs() []string {
	ids := slices.Clone(s.order)
	sort.Strings(ids)
	return ids
}
