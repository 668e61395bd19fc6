package cloud

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// gceLabelPrefix starts hf's label keys ("hf-node", ...). Label values are
// lower case, so the exact keys also go into the "hf-keys" metadata item.
const gceLabelPrefix = "hf-"

// Metadata items the driver sets besides the claim's keys.
const (
	gceItemKeys      = "hf-keys"      // hf's ownership keys, JSON
	gceItemResources = "hf-resources" // the template's resources, JSON
	gceItemMetadata  = "hf-metadata"  // the claim's declared metadata, JSON
	gceItemStartup   = "startup-script"
)

// NewGCE builds an unprepared gce driver; it is a drivers.Factory.
func NewGCE(env drivers.Env) drivers.Driver { return newGCE(env, nil) }

// newGCE builds a gce driver whose client gets extra options (the tests'
// WithoutAuthentication).
func newGCE(env drivers.Env, extra []option.ClientOption) *Driver {
	return newDriver(env, TypeGCE, func(ctx context.Context, raw []byte) (provider, Common, error) {
		c, err := ParseGCEConfig(raw)
		if err != nil {
			return nil, Common{}, fmt.Errorf("config: %w", err)
		}
		opts := slices.Clone(extra)
		if c.Endpoint != "" {
			opts = append(opts, option.WithEndpoint(c.Endpoint))
		}
		svc, err := compute.NewService(ctx, opts...)
		if err != nil {
			return nil, Common{}, fmt.Errorf("compute client (project %s): %w", c.Project, err)
		}
		return &gceProvider{cfg: c, svc: svc}, c.Common, nil
	})
}

// gceProvider is Compute Engine through google.golang.org/api/compute/v1.
type gceProvider struct {
	cfg GCEConfig
	svc *compute.Service
}

// gceEntry is a template entry with its image resolved.
type gceEntry struct {
	GCETemplate
	imageLink string
}

func (e gceEntry) portMap() map[string]int { return e.Ports }

func (p *gceProvider) parseTemplate(raw []byte) (any, error) {
	return parseGCETemplate(raw, p.cfg.Defaults)
}

var imagePath = regexp.MustCompile(`projects/([^/]+)/global/images/([^/]+)$`)

// checkTemplate resolves the image (by name, URL or family); one that does
// not exist is an error naming its key.
func (p *gceProvider) checkTemplate(ctx context.Context, raw any) (any, error) {
	tc := raw.(GCETemplate)
	project := tc.ImageProject
	if project == "" {
		project = p.cfg.Project
	}
	var img *compute.Image
	var err error
	field, what := "image", tc.Image
	if tc.ImageFamily != "" {
		field, what = "image_family", tc.ImageFamily
		img, err = retryGCE(ctx, p.cfg, func() (*compute.Image, error) {
			return p.svc.Images.GetFromFamily(project, tc.ImageFamily).Context(ctx).Do()
		})
	} else {
		name := tc.Image
		if m := imagePath.FindStringSubmatch(tc.Image); m != nil {
			project, name = m[1], m[2]
		}
		img, err = retryGCE(ctx, p.cfg, func() (*compute.Image, error) {
			return p.svc.Images.Get(project, name).Context(ctx).Do()
		})
	}
	if errors.Is(gceError(err), drivers.ErrNotFound) {
		return nil, types.Invalid(field, "image %s does not exist in project %s", what, project)
	} else if err != nil {
		return nil, fmt.Errorf("get image: %w", err)
	}
	if img.Status != "" && img.Status != "READY" {
		return nil, types.Invalid(field, "image %s is %s, not READY", img.Name, img.Status)
	}
	return gceEntry{GCETemplate: tc, imageLink: img.SelfLink}, nil
}

var notLabel = regexp.MustCompile(`[^-_a-z0-9]+`)

// labelValue makes s a label value: lower case, other characters '-', 63 at most.
func labelValue(s string) string {
	s = notLabel.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

func (p *gceProvider) instance(spec createSpec) *compute.Instance {
	e := spec.Template.(gceEntry)
	labels := maps.Clone(e.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range spec.Keys {
		if v != "" {
			labels[gceLabelPrefix+k] = labelValue(v)
		}
	}
	keys, _ := json.Marshal(spec.Keys)
	res, _ := json.Marshal(spec.Resources)
	items := map[string]string{gceItemKeys: string(keys), gceItemResources: string(res), gceItemMetadata: string(metadataJSON(spec.Meta))}
	for k, v := range spec.Meta {
		items[k] = v
	}
	if e.StartupScript != "" {
		items[gceItemStartup] = e.StartupScript
	}
	md := &compute.Metadata{}
	for _, k := range slices.Sorted(maps.Keys(items)) {
		md.Items = append(md.Items, &compute.MetadataItems{Key: k, Value: googleapi.String(items[k])})
	}
	nic := &compute.NetworkInterface{}
	if e.Network != "" {
		nic.Network = qualify(e.Network, "global/networks/")
	}
	if e.Subnetwork != "" {
		nic.Subnetwork = qualify(e.Subnetwork, "regions/"+p.cfg.Region+"/subnetworks/")
	}
	if e.ExternalIP {
		nic.AccessConfigs = []*compute.AccessConfig{{Name: "External NAT", Type: "ONE_TO_ONE_NAT"}}
	}
	disk := &compute.AttachedDisk{Boot: true, AutoDelete: true, InitializeParams: &compute.AttachedDiskInitializeParams{
		SourceImage: e.imageLink, Labels: labels,
	}}
	if spec.Resources.DiskGB > 0 {
		disk.InitializeParams.DiskSizeGb = int64(math.Ceil(spec.Resources.DiskGB))
	}
	return &compute.Instance{
		Name:              spec.Name,
		MachineType:       "zones/" + p.cfg.Zone + "/machineTypes/" + e.MachineType,
		Labels:            labels,
		Metadata:          md,
		Disks:             []*compute.AttachedDisk{disk},
		NetworkInterfaces: []*compute.NetworkInterface{nic},
	}
}

func qualify(name, prefix string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return prefix + name
}

// create inserts an instance with hf's labels and waits for the zone
// operation. The request id makes retries of the insert idempotent.
// leftovers implements provider: a gce instance leaves nothing of its own
// behind (its boot disk goes with it).
func (p *gceProvider) leftovers(context.Context, owner) ([]string, error) { return nil, nil }

// cleanup implements provider: there is nothing besides the instance.
func (p *gceProvider) cleanup(context.Context, owner, string) error { return nil }

func (p *gceProvider) create(ctx context.Context, spec createSpec) (string, map[string]string, error) {
	inst := p.instance(spec)
	reqID := requestID()
	op, err := retryGCE(ctx, p.cfg, func() (*compute.Operation, error) {
		return p.svc.Instances.Insert(p.cfg.Project, p.cfg.Zone, inst).RequestId(reqID).Context(ctx).Do()
	})
	if err != nil {
		return "", nil, fmt.Errorf("insert instance: %w", gceError(err))
	}
	if err := p.wait(ctx, op); err != nil {
		return "", nil, fmt.Errorf("insert instance: %w", err)
	}
	return spec.Name, nil, nil
}

// wait waits for a zone operation to be done and returns its error.
func (p *gceProvider) wait(ctx context.Context, op *compute.Operation) error {
	for op.Status != "DONE" {
		var err error
		name := op.Name
		op, err = retryGCE(ctx, p.cfg, func() (*compute.Operation, error) {
			return p.svc.ZoneOperations.Wait(p.cfg.Project, p.cfg.Zone, name).Context(ctx).Do()
		})
		if err != nil {
			return fmt.Errorf("wait for operation %s: %w", name, gceError(err))
		}
	}
	if op.Error == nil || len(op.Error.Errors) == 0 {
		return nil
	}
	var msgs []string
	noCapacity := false
	for _, e := range op.Error.Errors {
		msgs = append(msgs, e.Code+": "+e.Message)
		noCapacity = noCapacity || gceNoCapacity[e.Code]
	}
	err := fmt.Errorf("operation %s failed: %s", op.Name, strings.Join(msgs, "; "))
	if noCapacity {
		return fmt.Errorf("%w: %w", drivers.ErrNoCapacity, err)
	}
	return err
}

func (p *gceProvider) get(ctx context.Context, id string) (vm, error) {
	inst, err := retryGCE(ctx, p.cfg, func() (*compute.Instance, error) {
		return p.svc.Instances.Get(p.cfg.Project, p.cfg.Zone, id).Context(ctx).Do()
	})
	if err != nil {
		return vm{}, fmt.Errorf("get instance %s: %w", id, gceError(err))
	}
	return gceVM(inst), nil
}

// remove deletes an instance (its boot disk goes with it: auto-delete).
func (p *gceProvider) remove(ctx context.Context, id string) error {
	reqID := requestID()
	op, err := retryGCE(ctx, p.cfg, func() (*compute.Operation, error) {
		return p.svc.Instances.Delete(p.cfg.Project, p.cfg.Zone, id).RequestId(reqID).Context(ctx).Do()
	})
	if err := gceError(err); errors.Is(err, drivers.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("delete instance: %w", err)
	}
	if err := p.wait(ctx, op); err != nil {
		return fmt.Errorf("delete instance: %w", err)
	}
	return nil
}

func (p *gceProvider) list(ctx context.Context, o owner) ([]vm, error) {
	filter := fmt.Sprintf(`(labels.%s%s = "%s") AND (labels.%s%s = "%s")`,
		gceLabelPrefix, keyNode, labelValue(o.node), gceLabelPrefix, keyInstance, labelValue(o.instance))
	var out []vm
	call := p.svc.Instances.List(p.cfg.Project, p.cfg.Zone).Filter(filter)
	_, err := retryGCE(ctx, p.cfg, func() (struct{}, error) {
		out = out[:0]
		return struct{}{}, call.Pages(ctx, func(l *compute.InstanceList) error {
			for _, inst := range l.Items {
				if v := gceVM(inst); v.Keys[keyNode] == o.node && v.Keys[keyInstance] == o.instance {
					out = append(out, v)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", gceError(err))
	}
	return out, nil
}

// quota reads the region's CPUS and INSTANCES quotas; what others use is
// the region's usage less this driver's instances.
func (p *gceProvider) quota(ctx context.Context, o owner) (usage, error) {
	reg, err := retryGCE(ctx, p.cfg, func() (*compute.Region, error) {
		return p.svc.Regions.Get(p.cfg.Project, p.cfg.Region).Context(ctx).Do()
	})
	if err != nil {
		return usage{}, fmt.Errorf("region %s: %w", p.cfg.Region, gceError(err))
	}
	own, err := p.list(ctx, o)
	if err != nil {
		return usage{}, err
	}
	var ownCPU float64
	for _, v := range own {
		ownCPU += v.Resources.CPU
	}
	u := usage{LimitVCPUs: -1, LimitInstances: -1}
	for _, q := range reg.Quotas {
		switch q.Metric {
		case "CPUS":
			u.LimitVCPUs, u.OtherVCPUs = q.Limit, max(q.Usage-ownCPU, 0)
		case "INSTANCES":
			u.LimitInstances, u.OtherInstances = q.Limit, max(q.Usage-float64(len(own)), 0)
		}
	}
	return u, nil
}

// console implements provider with getSerialPortOutput of port 1.
func (p *gceProvider) console(ctx context.Context, id string) (string, error) {
	out, err := retryGCE(ctx, p.cfg, func() (*compute.SerialPortOutput, error) {
		return p.svc.Instances.GetSerialPortOutput(p.cfg.Project, p.cfg.Zone, id).Port(1).Context(ctx).Do()
	})
	if err != nil {
		return "", fmt.Errorf("serial port output of %s: %w", id, gceError(err))
	}
	return out.Contents, nil
}

// gceVM reads an instance.
func gceVM(inst *compute.Instance) vm {
	v := vm{ID: inst.Name, Name: inst.Name, State: inst.Status, Zone: lastPart(inst.Zone), Type: lastPart(inst.MachineType),
		Keys: map[string]string{}}
	if len(inst.NetworkInterfaces) > 0 {
		nic := inst.NetworkInterfaces[0]
		v.PrivateIP = nic.NetworkIP
		if len(nic.AccessConfigs) > 0 {
			v.PublicIP = nic.AccessConfigs[0].NatIP
		}
	}
	for _, d := range inst.Disks {
		if d.Boot {
			v.Image = lastPart(d.Source)
		}
	}
	if inst.Metadata != nil {
		for _, it := range inst.Metadata.Items {
			if it.Value == nil {
				continue
			}
			switch it.Key {
			case gceItemKeys:
				_ = json.Unmarshal([]byte(*it.Value), &v.Keys) // missing: not hf's
			case gceItemResources:
				_ = json.Unmarshal([]byte(*it.Value), &v.Resources)
			}
		}
	}
	switch inst.Status {
	case "PROVISIONING", "STAGING":
		v.Phase = types.MachineProvisioning
	case "RUNNING":
		v.Phase = types.MachineRunning
	case "STOPPING":
		v.Phase = types.MachineTerminating
	default: // SUSPENDING, SUSPENDED, TERMINATED (stopped): hf never stops a VM
		v.Phase = types.MachineFailed
	}
	return v
}

func lastPart(s string) string { return s[strings.LastIndex(s, "/")+1:] }

// gceNoCapacity are the operation error codes of a cloud without room.
var gceNoCapacity = map[string]bool{
	"QUOTA_EXCEEDED": true, "ZONE_RESOURCE_POOL_EXHAUSTED": true, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": true,
	"RESOURCE_POOL_EXHAUSTED": true,
}

// gceError marks the errors callers branch on: not found and no capacity.
func gceError(err error) error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return err
	}
	if ge.Code == http.StatusNotFound {
		return fmt.Errorf("%w: %w", drivers.ErrNotFound, err)
	}
	for _, e := range ge.Errors {
		if e.Reason == "quotaExceeded" || gceNoCapacity[e.Reason] {
			return fmt.Errorf("%w: %w", drivers.ErrNoCapacity, err)
		}
	}
	return err
}

// retryable says whether a call may be tried again: throttled (429, 403
// rateLimitExceeded) or the service unavailable (5xx).
func retryable(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	if ge.Code == http.StatusTooManyRequests || ge.Code >= 500 {
		return true
	}
	for _, e := range ge.Errors {
		if e.Reason == "rateLimitExceeded" || e.Reason == "userRateLimitExceeded" {
			return true
		}
	}
	return false
}

// retryGCE runs call until it succeeds, fails for good or runs out of
// attempts, waiting a jittered, doubling backoff (from 100 ms, at most
// retry_max_backoff) between tries. The Go client retries only uploads.
func retryGCE[T any](ctx context.Context, c GCEConfig, call func() (T, error)) (T, error) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		v, err := call()
		if err == nil || !retryable(err) || attempt >= c.RetryMaxAttempts {
			return v, err
		}
		wait := min(backoff, c.RetryMaxBackoff.Duration)
		if n, rerr := rand.Int(rand.Reader, big.NewInt(int64(wait)+1)); rerr == nil {
			wait = time.Duration(n.Int64())
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		backoff *= 2
	}
}

// requestID is a random UUID (version 4), the form Compute wants.
func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := fmt.Sprintf("%x", b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
