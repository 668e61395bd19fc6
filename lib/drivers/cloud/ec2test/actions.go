package ec2test

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagsXML(m map[string]string) []tagXML {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]tagXML, 0, len(keys))
	for _, k := range keys {
		out = append(out, tagXML{k, m[k]})
	}
	return out
}

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

type instanceXML struct {
	InstanceID   string   `xml:"instanceId"`
	ImageID      string   `xml:"imageId"`
	State        stateXML `xml:"instanceState"`
	PrivateIP    string   `xml:"privateIpAddress,omitempty"`
	PublicIP     string   `xml:"ipAddress,omitempty"`
	KeyName      string   `xml:"keyName,omitempty"`
	InstanceType string   `xml:"instanceType"`
	LaunchTime   string   `xml:"launchTime"`
	Placement    struct {
		AZ string `xml:"availabilityZone"`
	} `xml:"placement"`
	SubnetID    string   `xml:"subnetId,omitempty"`
	ClientToken string   `xml:"clientToken,omitempty"`
	Tags        []tagXML `xml:"tagSet>item"`
	CPU         struct {
		CoreCount int `xml:"coreCount"`
		Threads   int `xml:"threadsPerCore"`
	} `xml:"cpuOptions"`
}

func (s *Server) toXML(in *Instance) instanceXML {
	x := instanceXML{InstanceID: in.ID, ImageID: in.ImageID, State: stateXML{stateCodes[in.State], in.State},
		KeyName: in.KeyName, InstanceType: in.Type, LaunchTime: in.Launched.UTC().Format(time.RFC3339),
		SubnetID: in.SubnetID, ClientToken: in.ClientToken, Tags: tagsXML(in.Tags)}
	if in.State == "pending" || in.State == "running" || in.State == "stopping" {
		x.PrivateIP, x.PublicIP = in.PrivateIP, in.PublicIP
		if in.State == "pending" {
			x.PublicIP = "" // a pending instance has its private address only
		}
	}
	x.Placement.AZ = "test-zone-1a"
	x.CPU.CoreCount, x.CPU.Threads = VCPUs(in.Type)/2, 2
	return x
}

type reservationXML struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

type runInstancesResponse struct {
	XMLName   xml.Name `xml:"RunInstancesResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	reservationXML
}

const ownerID = "123456789012"

func (s *Server) runInstances(f map[string][]string) (any, *apiError) {
	imageID, typ, token := first(f["ImageId"]), first(f["InstanceType"]), first(f["ClientToken"])
	if first(f["MinCount"]) != "1" || first(f["MaxCount"]) != "1" {
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", "this test double makes one instance per call"}
	}
	if typ == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter InstanceType"}
	}
	s.mu.Lock()
	// The client token makes a repeated call answer with the first one's instance.
	if token != "" {
		for _, id := range s.order {
			if in := s.instances[id]; in.ClientToken == token {
				s.advance(in)
				x := s.toXML(in)
				s.mu.Unlock()
				return s.reservation(x), nil
			}
		}
	}
	if !slices.ContainsFunc(s.images, func(i Image) bool { return i.ID == imageID }) {
		s.mu.Unlock()
		return nil, &apiError{http.StatusBadRequest, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", imageID)}
	}
	if subnet := first(f["SubnetId"]); subnet != "" {
		if _, ok := s.subnets[subnet]; !ok {
			s.mu.Unlock()
			return nil, &apiError{http.StatusBadRequest, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", subnet)}
		}
	}
	if key := first(f["KeyName"]); key != "" && s.keyPairs[key] == nil {
		s.mu.Unlock()
		return nil, &apiError{http.StatusBadRequest, "InvalidKeyPair.NotFound", fmt.Sprintf("The key pair '%s' does not exist", key)}
	}
	if s.faults.NoCapacity > 0 {
		s.faults.NoCapacity--
		s.mu.Unlock()
		return nil, &apiError{http.StatusInternalServerError, "InsufficientInstanceCapacity",
			fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested.", typ)}
	}
	if s.vcpuQuota > 0 {
		used := 0
		for _, in := range s.instances {
			s.advance(in)
			if in.State == "pending" || in.State == "running" {
				used += VCPUs(in.Type)
			}
		}
		if float64(used+VCPUs(typ)) > s.vcpuQuota {
			s.mu.Unlock()
			return nil, &apiError{http.StatusBadRequest, "VcpuLimitExceeded",
				fmt.Sprintf("You have requested more vCPU capacity than your current vCPU limit of %g allows.", s.vcpuQuota)}
		}
	}
	now := s.now()
	n := len(s.order) + 1
	in := &Instance{
		ID: newID("i-"), ImageID: imageID, Type: typ, SubnetID: first(f["SubnetId"]), KeyName: first(f["KeyName"]),
		ClientToken: token, SecurityGroups: list(f, "SecurityGroupId"), UserData: first(f["UserData"]),
		PrivateIP: fmt.Sprintf("10.0.%d.%d", n/250, n%250+1), PublicIP: fmt.Sprintf("203.0.%d.%d", n/250, n%250+1),
		Launched: now, State: "pending", runningAt: now.Add(s.faults.CreateDelay),
	}
	in.Console, in.consoleAt = bootLine(in.ID), now
	specs := tagSpecs(f)
	in.Tags, in.VolumeTags = specs["instance"], specs["volume"]
	if in.Tags == nil {
		in.Tags = map[string]string{}
	}
	if v := first(f["BlockDeviceMapping.1.Ebs.VolumeSize"]); v != "" {
		in.VolumeSizeGB, _ = strconv.Atoi(v)
		in.VolumeType = first(f["BlockDeviceMapping.1.Ebs.VolumeType"])
	}
	s.instances[in.ID] = in
	s.order = append(s.order, in.ID)
	x := s.toXML(in)
	created := s.created
	s.mu.Unlock()
	if created != nil {
		created(in.ID)
	}
	return s.reservation(x), nil
}

func (s *Server) reservation(x instanceXML) runInstancesResponse {
	return runInstancesResponse{Xmlns: Namespace, RequestID: newID(""),
		reservationXML: reservationXML{ReservationID: newID("r-"), OwnerID: ownerID, Instances: []instanceXML{x}}}
}

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
	Xmlns        string           `xml:"xmlns,attr"`
	RequestID    string           `xml:"requestId"`
	Reservations []reservationXML `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

// pageSize is how many instances one DescribeInstances answer holds, small
// so that callers' paging is tested.
const pageSize = 5

func (s *Server) describeInstances(f map[string][]string) (any, *apiError) {
	ids := list(f, "InstanceId")
	fs := filters(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	var picked []*Instance
	for _, id := range ids {
		in, ok := s.instances[id]
		if !ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		picked = append(picked, in)
	}
	if len(ids) == 0 {
		for _, id := range s.sortedIDs() {
			picked = append(picked, s.instances[id])
		}
	}
	var xs []instanceXML
	for _, in := range picked {
		s.advance(in)
		ok := matches(fs, func(name string) (string, bool) {
			if name == "instance-state-name" {
				return in.State, true
			}
			return tagFilter(name, in.Tags)
		})
		if ok {
			xs = append(xs, s.toXML(in))
		}
	}
	start, _ := strconv.Atoi(first(f["NextToken"]))
	start = min(start, len(xs))
	end := min(start+pageSize, len(xs))
	resp := describeInstancesResponse{Xmlns: Namespace, RequestID: newID("")}
	for _, x := range xs[start:end] {
		resp.Reservations = append(resp.Reservations, reservationXML{ReservationID: "r-" + x.InstanceID[2:], OwnerID: ownerID, Instances: []instanceXML{x}})
	}
	if end < len(xs) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

type stateChangeXML struct {
	InstanceID string   `xml:"instanceId"`
	Current    stateXML `xml:"currentState"`
	Previous   stateXML `xml:"previousState"`
}

type terminateInstancesResponse struct {
	XMLName   xml.Name         `xml:"TerminateInstancesResponse"`
	Xmlns     string           `xml:"xmlns,attr"`
	RequestID string           `xml:"requestId"`
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

func (s *Server) terminateInstances(f map[string][]string) (any, *apiError) {
	ids := list(f, "InstanceId")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.FailTerminate {
		return nil, &apiError{http.StatusInternalServerError, "InternalError", "An internal error has occurred (injected)."}
	}
	resp := terminateInstancesResponse{Xmlns: Namespace, RequestID: newID("")}
	for _, id := range ids {
		in, ok := s.instances[id]
		if !ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
		}
		s.advance(in)
		prev := stateXML{stateCodes[in.State], in.State}
		if in.State != "terminated" && in.State != "shutting-down" {
			in.State, in.terminated = "shutting-down", s.now().Add(s.faults.TerminateDelay)
			s.advance(in)
		}
		resp.Instances = append(resp.Instances, stateChangeXML{InstanceID: id, Current: stateXML{stateCodes[in.State], in.State}, Previous: prev})
	}
	return resp, nil
}

type imageXML struct {
	ImageID      string `xml:"imageId"`
	Name         string `xml:"name"`
	State        string `xml:"imageState"`
	OwnerID      string `xml:"imageOwnerId"`
	CreationDate string `xml:"creationDate"`
	RootDevice   string `xml:"rootDeviceName"`
}

type describeImagesResponse struct {
	XMLName   xml.Name   `xml:"DescribeImagesResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	RequestID string     `xml:"requestId"`
	Images    []imageXML `xml:"imagesSet>item"`
}

func (s *Server) describeImages(f map[string][]string) (any, *apiError) {
	ids, owners, fs := list(f, "ImageId"), list(f, "Owner"), filters(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := describeImagesResponse{Xmlns: Namespace, RequestID: newID("")}
	for _, id := range ids {
		if !slices.ContainsFunc(s.images, func(i Image) bool { return i.ID == id }) {
			return nil, &apiError{http.StatusBadRequest, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", id)}
		}
	}
	for _, img := range s.images {
		if len(ids) > 0 && !slices.Contains(ids, img.ID) || len(owners) > 0 && !slices.Contains(owners, img.Owner) {
			continue
		}
		ok := matches(fs, func(name string) (string, bool) {
			switch name {
			case "name":
				return img.Name, true
			case "state":
				return "available", true
			}
			return "", false
		})
		if ok {
			resp.Images = append(resp.Images, imageXML{img.ID, img.Name, "available", img.Owner, img.CreationDate, img.RootDevice})
		}
	}
	return resp, nil
}

type subnetXML struct {
	SubnetID string   `xml:"subnetId"`
	State    string   `xml:"state"`
	Tags     []tagXML `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
	Xmlns     string      `xml:"xmlns,attr"`
	RequestID string      `xml:"requestId"`
	Subnets   []subnetXML `xml:"subnetSet>item"`
}

func (s *Server) describeSubnets(f map[string][]string) (any, *apiError) {
	fs := filters(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := describeSubnetsResponse{Xmlns: Namespace, RequestID: newID("")}
	ids := make([]string, 0, len(s.subnets))
	for id := range s.subnets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tags := s.subnets[id]
		ok := matches(fs, func(name string) (string, bool) {
			return tagFilter(name, tags)
		})
		if ok {
			resp.Subnets = append(resp.Subnets, subnetXML{SubnetID: id, State: "available", Tags: tagsXML(tags)})
		}
	}
	return resp, nil
}
