package gcetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/api/compute/v1"
)

// pageSize is how many instances one list answer holds, small so that
// callers' paging is tested.
const pageSize = 5

func (s *Server) zoneLink(r *http.Request) string {
	return s.URL + BasePath + "projects/" + r.PathValue("project") + "/zones/" + r.PathValue("zone")
}

// newOp records an operation that is done after delay (mu held) and
// settles it at once when that is now; finish must not need the answer.
func (s *Server) newOp(r *http.Request, kind, target string, delay time.Duration, finish func(*operation)) *compute.Operation {
	now := s.now()
	name := "operation-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + newID()
	o := &operation{op: compute.Operation{
		Kind: "compute#operation", Name: name, OperationType: kind, Status: "RUNNING", Progress: 0,
		TargetLink: target, Zone: s.zoneLink(r), InsertTime: now.UTC().Format(time.RFC3339),
		SelfLink: s.zoneLink(r) + "/operations/" + name,
	}, doneAt: now.Add(delay), finish: finish}
	s.ops[name] = o
	if id := r.URL.Query().Get("requestId"); id != "" {
		s.requestIDs[id] = name
	}
	s.settle()
	cp := s.ops[name].op
	return &cp
}

// failOp ends an operation with an error (mu held, from its finish).
func failOp(o *operation, code, msg string) {
	o.op.Error = &compute.OperationError{Errors: []*compute.OperationErrorErrors{{Code: code, Message: msg}}}
	o.op.HttpErrorStatusCode = http.StatusForbidden
}

func (s *Server) insert(r *http.Request) (any, error) {
	var in compute.Instance
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return nil, &apiError{http.StatusBadRequest, "parseError", "Parse Error: " + err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	if name, ok := s.requestIDs[r.URL.Query().Get("requestId")]; ok {
		op := s.ops[name].op
		return &op, nil // a retried request: the same operation
	}
	key := r.PathValue("zone") + "/" + in.Name
	if _, ok := s.instances[key]; ok {
		return nil, &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource '%s' already exists", in.Name)}
	}
	if len(in.Disks) == 0 || in.Disks[0].InitializeParams == nil || !s.imageExists(in.Disks[0].InitializeParams.SourceImage) {
		return nil, &apiError{http.StatusBadRequest, "invalid", "Invalid value for field 'resource.disks[0].initializeParams.sourceImage'"}
	}
	zone := s.zoneLink(r)
	in.Kind, in.Id, in.Zone, in.Status = "compute#instance", uint64(len(s.instances)+1000), zone, "STAGING"
	in.SelfLink = zone + "/instances/" + in.Name
	in.CreationTimestamp = s.now().UTC().Format(time.RFC3339)
	s.seq++
	for i, nic := range in.NetworkInterfaces {
		nic.Name = "nic" + strconv.Itoa(i)
		nic.NetworkIP = fmt.Sprintf("10.128.%d.%d", s.seq/250, s.seq%250+1)
		for _, ac := range nic.AccessConfigs {
			ac.NatIP = fmt.Sprintf("198.51.%d.%d", s.seq/250, s.seq%250+1)
		}
	}
	for _, d := range in.Disks {
		d.Source = zone + "/disks/" + in.Name
	}
	var fail [2]string
	switch {
	case s.faults.NoCapacity > 0:
		s.faults.NoCapacity--
		fail = [2]string{"ZONE_RESOURCE_POOL_EXHAUSTED", fmt.Sprintf("The zone '%s' does not have enough resources available to fulfill the request.", zone)}
	case s.usedCPUs()+vcpus(in.MachineType) > s.cpuQuota:
		fail = [2]string{"QUOTA_EXCEEDED", fmt.Sprintf("Quota 'CPUS' exceeded. Limit: %g in region.", s.cpuQuota)}
	case float64(len(s.instances)+1) > s.instQuota:
		fail = [2]string{"QUOTA_EXCEEDED", fmt.Sprintf("Quota 'INSTANCES' exceeded. Limit: %g in region.", s.instQuota)}
	}
	inst := in
	if fail[0] == "" {
		s.instances[key] = &inst
		s.consoles[key] = console{text: bootLine(in.Name)}
	}
	finish := func(o *operation) {
		if fail[0] != "" {
			failOp(o, fail[0], fail[1])
			return
		}
		if p := s.instances[key]; p != nil && p.Status == "STAGING" {
			p.Status = "RUNNING"
		}
	}
	op := s.newOp(r, "insert", in.SelfLink, s.faults.CreateDelay, finish)
	return op, nil
}

func (s *Server) usedCPUs() float64 {
	sum := 0.0
	for _, in := range s.instances {
		if in.Status != "TERMINATED" {
			sum += vcpus(in.MachineType)
		}
	}
	return sum
}

func (s *Server) imageExists(link string) bool {
	for _, img := range s.images {
		if img.img.SelfLink == link {
			return true
		}
	}
	return false
}

func (s *Server) get(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	in, ok := s.instances[r.PathValue("zone")+"/"+r.PathValue("name")]
	if !ok {
		return nil, notFound("projects/" + r.PathValue("project") + "/zones/" + r.PathValue("zone") + "/instances/" + r.PathValue("name"))
	}
	cp := *in
	return &cp, nil
}

func (s *Server) list(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	filter := r.URL.Query().Get("filter")
	var items []*compute.Instance
	for _, k := range sortedKeys(s.instances) {
		in := s.instances[k]
		if in.Zone == s.zoneLink(r) && matchFilter(filter, in) {
			cp := *in
			items = append(items, &cp)
		}
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
	start = min(start, len(items))
	end := min(start+pageSize, len(items))
	out := &compute.InstanceList{Kind: "compute#instanceList", Items: items[start:end]}
	if end < len(items) {
		out.NextPageToken = strconv.Itoa(end)
	}
	return out, nil
}

func (s *Server) delete(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	if name, ok := s.requestIDs[r.URL.Query().Get("requestId")]; ok {
		op := s.ops[name].op
		return &op, nil
	}
	if s.faults.FailDelete {
		return nil, &apiError{http.StatusInternalServerError, "backendError", "Internal error (injected)."}
	}
	key := r.PathValue("zone") + "/" + r.PathValue("name")
	in, ok := s.instances[key]
	if !ok {
		return nil, notFound("projects/" + r.PathValue("project") + "/zones/" + key)
	}
	in.Status = "STOPPING"
	return s.newOp(r, "delete", in.SelfLink, s.faults.DeleteDelay, func(*operation) {
		delete(s.instances, key)
		delete(s.consoles, key)
	}), nil
}

func (s *Server) opGet(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	o, ok := s.ops[r.PathValue("op")]
	if !ok {
		return nil, notFound(r.PathValue("op"))
	}
	op := o.op
	return &op, nil
}

// maxWait is how long a wait call blocks at most before it answers with the
// operation still running (Compute's is two minutes).
const maxWait = 2 * time.Second

func (s *Server) opWait(r *http.Request) (any, error) {
	deadline := time.Now().Add(maxWait)
	for {
		s.mu.Lock()
		s.settle()
		o, ok := s.ops[r.PathValue("op")]
		var op compute.Operation
		var doneAt time.Time
		if ok {
			op, doneAt = o.op, o.doneAt
		}
		s.mu.Unlock()
		if !ok {
			return nil, notFound(r.PathValue("op"))
		}
		if op.Status == "DONE" || !time.Now().Before(deadline) {
			return &op, nil
		}
		wait := min(time.Until(doneAt), time.Until(deadline))
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

func (s *Server) imageFamily(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *compute.Image
	for i := range s.images {
		img := &s.images[i]
		if img.project == r.PathValue("project") && img.img.Family == r.PathValue("family") &&
			(best == nil || img.img.CreationTimestamp > best.CreationTimestamp) {
			best = &img.img
		}
	}
	if best == nil {
		return nil, notFound("projects/" + r.PathValue("project") + "/global/images/family/" + r.PathValue("family"))
	}
	cp := *best
	return &cp, nil
}

func (s *Server) imageGet(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, img := range s.images {
		if img.project == r.PathValue("project") && img.img.Name == r.PathValue("image") {
			cp := img.img
			return &cp, nil
		}
	}
	return nil, notFound("projects/" + r.PathValue("project") + "/global/images/" + r.PathValue("image"))
}

func (s *Server) region(r *http.Request) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	return &compute.Region{Kind: "compute#region", Name: r.PathValue("region"), Status: "UP", Quotas: []*compute.Quota{
		{Metric: "CPUS", Limit: s.cpuQuota, Usage: s.usedCPUs()},
		{Metric: "INSTANCES", Limit: s.instQuota, Usage: float64(len(s.instances))},
	}}, nil
}
