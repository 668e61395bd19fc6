package cloud

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Quota is what an operator lets one driver instance run at once. A claim
// that does not fit is declined (it waits), never failed.
type Quota struct {
	// VCPUs caps the vCPUs of the instances this driver runs. Required.
	VCPUs float64 `json:"vcpus"`
	// Instances caps how many instances it runs; 0 means no cap of its own.
	Instances int `json:"instances"`
	// RAMGB is the memory (GiB) reported for the fit check. Clouds count
	// vCPUs, not memory, so the default (0) is 8 GiB per vCPU of the quota,
	// room for every common instance family.
	RAMGB float64 `json:"ram_gb"`
}

// ramPerVCPU is the memory reported per quota vCPU when ram_gb is not set.
const ramPerVCPU = 8

// Common holds the keys both providers take.
type Common struct {
	// Endpoint replaces the provider's API endpoint (a private endpoint, or
	// a test double in tests). Empty: the SDK's default.
	Endpoint string `json:"endpoint"`
	// Quota is the configured quota; the provider's own quota, where it can
	// be read, lowers it further.
	Quota Quota `json:"quota"`
	// QuotaRefresh is how long a reading of the provider's quota and usage
	// is used before it is read again.
	QuotaRefresh types.Duration `json:"quota_refresh"`
	// CloudQuota reads the provider's quota (Service Quotas for aws, the
	// region's quotas for gce); false uses the configured quota only.
	CloudQuota bool `json:"cloud_quota"`
	// NamePrefix starts every instance name.
	NamePrefix string `json:"name_prefix"`
	// CreateTimeout bounds how long Allocate waits for an instance to run.
	CreateTimeout types.Duration `json:"create_timeout"`
	// DeleteTimeout bounds how long Deallocate waits for it to be gone.
	DeleteTimeout types.Duration `json:"delete_timeout"`
	// PollInterval is how often an instance's state is read while waiting.
	PollInterval types.Duration `json:"poll_interval"`
	// NoCapacityHold is how long the driver reports itself full after the
	// provider said it has no capacity, so offers are declined at once.
	NoCapacityHold types.Duration `json:"no_capacity_hold"`
}

// AWSConfig is the aws driver's configuration (JSON, snake_case keys).
// Credentials come from the SDK's default chain (environment, shared config
// and credentials files under profile, instance role); hf never reads or logs
// them itself.
type AWSConfig struct {
	Common
	// Region is the AWS region ("eu-central-1"). Required.
	Region string `json:"region"`
	// Profile selects a profile of the shared config files; empty: default.
	Profile string `json:"profile"`
	// ServiceQuotaCode is the Service Quotas code of the vCPU quota read
	// when cloud_quota is on (Running On-Demand Standard instances).
	ServiceQuotaCode string `json:"service_quota_code"`
	// RetryMaxAttempts and RetryMaxBackoff tune the SDK's retryer, which
	// retries throttled and failed calls with jittered exponential backoff.
	RetryMaxAttempts int            `json:"retry_max_attempts"`
	RetryMaxBackoff  types.Duration `json:"retry_max_backoff"`
	// Defaults fill what a template leaves out.
	Defaults AWSDefaults `json:"defaults"`
	// Activity is how the driver sees a machine's use, for idle reaping.
	Activity AWSActivity `json:"activity"`
}

// AWSActivity makes the aws driver report a machine's use (see
// drivers.ActivityMeter) from CloudWatch: the CPUUtilization of its
// instance above an idle floor, per metric period. EC2 itself reports no
// use, and hf puts no agent on a VM.
type AWSActivity struct {
	// CloudWatch turns it on. It needs cloudwatch:GetMetricData (which
	// CloudWatch bills per metric read: one read per machine per period).
	// Off, the driver reports no use: only a session's keepalives count as
	// a VM's activity for idle reaping.
	CloudWatch bool `json:"cloudwatch"`
	// CPUPercent is the idle floor: only the CPU an instance uses above it
	// counts (an idle VM's agents use a little).
	CPUPercent float64 `json:"cpu_percent"`
	// Period is the metric's period: 5m with EC2's basic monitoring, 1m
	// with detailed monitoring.
	Period types.Duration `json:"period"`
	// Delay is how long after a period its datapoint is final; newer
	// periods are not read, so use is seen up to Period+Delay late.
	Delay types.Duration `json:"delay"`
}

// AWSDefaults are template keys a node supplies when a template leaves them out.
type AWSDefaults struct {
	InstanceType     string            `json:"instance_type"`
	SubnetID         string            `json:"subnet_id"`
	SubnetTags       map[string]string `json:"subnet_tags"`
	SecurityGroupIDs []string          `json:"security_group_ids"`
	KeyName          string            `json:"key_name"`
}

// GCEConfig is the gce driver's configuration (JSON, snake_case keys).
// Credentials are Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's, the metadata server's).
type GCEConfig struct {
	Common
	// Project is the project instances run in. Required.
	Project string `json:"project"`
	// Zone is where instances run ("europe-west1-b"). Required.
	Zone string `json:"zone"`
	// Region is the zone's region, whose quotas are read; default: the zone
	// without its last part.
	Region string `json:"region"`
	// RetryMaxAttempts and RetryMaxBackoff bound the retries of throttled
	// (429, rateLimitExceeded) and unavailable (5xx) calls.
	RetryMaxAttempts int            `json:"retry_max_attempts"`
	RetryMaxBackoff  types.Duration `json:"retry_max_backoff"`
	// Defaults fill what a template leaves out.
	Defaults GCEDefaults `json:"defaults"`
}

// GCEDefaults are template keys a node supplies when a template leaves them out.
type GCEDefaults struct {
	MachineType string `json:"machine_type"`
	Network     string `json:"network"`
	Subnetwork  string `json:"subnetwork"`
}

// Defaults for absent keys.
const (
	DefaultNamePrefix       = "hf-"
	DefaultQuotaRefresh     = time.Minute
	DefaultCreateTimeout    = 10 * time.Minute
	DefaultDeleteTimeout    = 10 * time.Minute
	DefaultPollInterval     = 2 * time.Second
	DefaultNoCapacityHold   = 30 * time.Second
	DefaultRetryMaxAttempts = 10
	DefaultRetryMaxBackoff  = 20 * time.Second
	// DefaultActivityCPUPercent, DefaultActivityPeriod and
	// DefaultActivityDelay are aws's activity defaults (basic monitoring).
	DefaultActivityCPUPercent = 5
	DefaultActivityPeriod     = 5 * time.Minute
	DefaultActivityDelay      = 10 * time.Minute
	// DefaultServiceQuotaCode is "Running On-Demand Standard (A, C, D, H,
	// I, M, R, T, Z) instances", counted in vCPUs.
	DefaultServiceQuotaCode = "L-1216C47A"
)

func defaultCommon() Common {
	return Common{
		QuotaRefresh:   types.D(DefaultQuotaRefresh),
		CloudQuota:     true,
		NamePrefix:     DefaultNamePrefix,
		CreateTimeout:  types.D(DefaultCreateTimeout),
		DeleteTimeout:  types.D(DefaultDeleteTimeout),
		PollInterval:   types.D(DefaultPollInterval),
		NoCapacityHold: types.D(DefaultNoCapacityHold),
	}
}

// ParseAWSConfig decodes cfg strictly over the defaults and validates it.
func ParseAWSConfig(cfg []byte) (AWSConfig, error) {
	c := AWSConfig{Common: defaultCommon(), ServiceQuotaCode: DefaultServiceQuotaCode,
		RetryMaxAttempts: DefaultRetryMaxAttempts, RetryMaxBackoff: types.D(DefaultRetryMaxBackoff),
		Activity: AWSActivity{CPUPercent: DefaultActivityCPUPercent, Period: types.D(DefaultActivityPeriod), Delay: types.D(DefaultActivityDelay)}}
	if err := drivers.DecodeConfig(cfg, &c); err != nil {
		return AWSConfig{}, err
	}
	return c, c.Validate()
}

// ParseGCEConfig decodes cfg strictly over the defaults and validates it.
func ParseGCEConfig(cfg []byte) (GCEConfig, error) {
	c := GCEConfig{Common: defaultCommon(), RetryMaxAttempts: DefaultRetryMaxAttempts, RetryMaxBackoff: types.D(DefaultRetryMaxBackoff)}
	if err := drivers.DecodeConfig(cfg, &c); err != nil {
		return GCEConfig{}, err
	}
	if c.Region == "" {
		if i := lastDash(c.Zone); i > 0 {
			c.Region = c.Zone[:i]
		}
	}
	return c, c.Validate()
}

func lastDash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '-' {
			return i
		}
	}
	return -1
}

var (
	awsRegion   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	gceLocation = regexp.MustCompile(`^[a-z]+(-[a-z0-9]+)+$`)
	gceProject  = regexp.MustCompile(`^[a-z][-a-z0-9.:]{4,61}[a-z0-9]$`)
	namePrefix  = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,18})$`)
)

// Validate checks the configuration; the error names the key.
func (c AWSConfig) Validate() error {
	if !awsRegion.MatchString(c.Region) {
		return types.Invalid("region", "%q is not an AWS region (like eu-central-1)", c.Region)
	}
	if c.ServiceQuotaCode == "" && c.CloudQuota {
		return types.Invalid("service_quota_code", "is required with cloud_quota")
	}
	if err := validateRetry(c.RetryMaxAttempts, c.RetryMaxBackoff); err != nil {
		return err
	}
	if err := c.Activity.validate(); err != nil {
		return err
	}
	if err := drivers.PrefixField("defaults", c.Defaults.validate()); err != nil {
		return err
	}
	return c.Common.validate()
}

// validate checks the keys a template shares with the defaults by the
// template's rules (a key left out is fine here; a template requires what
// it needs). AWSConfig.Validate checks the defaults with it under defaults.*:
// a bad one would pass the node's start and then fail every template that
// leaves its key out, with an error naming a key the template does not have.
func (d AWSDefaults) validate() error {
	switch {
	case d.InstanceType != "" && !awsName.MatchString(d.InstanceType):
		return types.Invalid("instance_type", "%q is not an instance type", d.InstanceType)
	case d.SubnetID != "" && len(d.SubnetTags) > 0:
		return types.Invalid("subnet_id", "give a subnet_id or subnet_tags, not both")
	case d.SubnetID != "" && !resourceID.MatchString(d.SubnetID):
		return types.Invalid("subnet_id", "%q is not a subnet id (subnet-...)", d.SubnetID)
	}
	for i, g := range d.SecurityGroupIDs {
		if !resourceID.MatchString(g) || !strings.HasPrefix(g, "sg-") {
			return types.Invalid(fmt.Sprintf("security_group_ids[%d]", i), "%q is not a security group id (sg-...)", g)
		}
	}
	return nil
}

func (a AWSActivity) validate() error {
	switch {
	case math.IsNaN(a.CPUPercent) || a.CPUPercent < 0 || a.CPUPercent >= 100:
		return types.Invalid("activity.cpu_percent", "want a number from 0 to below 100")
	case a.Period.Duration < time.Minute || a.Period.Duration%time.Minute != 0:
		return types.Invalid("activity.period", "want whole minutes (CloudWatch's periods)")
	case a.Delay.Duration < 0:
		return types.Invalid("activity.delay", "must not be negative")
	}
	return nil
}

// Validate checks the configuration; the error names the key.
func (c GCEConfig) Validate() error {
	switch {
	case !gceProject.MatchString(c.Project):
		return types.Invalid("project", "%q is not a project id", c.Project)
	case !gceLocation.MatchString(c.Zone):
		return types.Invalid("zone", "%q is not a zone (like europe-west1-b)", c.Zone)
	case !gceLocation.MatchString(c.Region):
		return types.Invalid("region", "%q is not a region (like europe-west1)", c.Region)
	}
	if err := validateRetry(c.RetryMaxAttempts, c.RetryMaxBackoff); err != nil {
		return err
	}
	if err := drivers.PrefixField("defaults", c.Defaults.validate()); err != nil {
		return err
	}
	return c.Common.validate()
}

// validate checks the keys a template shares with the defaults by the
// template's rules, as AWSDefaults.validate does.
func (d GCEDefaults) validate() error {
	if d.MachineType != "" && !gceName.MatchString(d.MachineType) {
		return types.Invalid("machine_type", "%q is not a machine type", d.MachineType)
	}
	return nil
}

func validateRetry(attempts int, backoff types.Duration) error {
	if attempts < 1 {
		return types.Invalid("retry_max_attempts", "must be at least 1")
	}
	if backoff.Duration <= 0 {
		return types.Invalid("retry_max_backoff", "must be positive")
	}
	return nil
}

func (c Common) validate() error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return types.Invalid("endpoint", "%q: want an http or https URL", c.Endpoint)
		}
	}
	q := c.Quota
	switch {
	case math.IsNaN(q.VCPUs) || math.IsInf(q.VCPUs, 0) || q.VCPUs <= 0:
		return types.Invalid("quota.vcpus", "is required: a positive number")
	case q.Instances < 0:
		return types.Invalid("quota.instances", "must not be negative")
	case math.IsNaN(q.RAMGB) || math.IsInf(q.RAMGB, 0) || q.RAMGB < 0:
		return types.Invalid("quota.ram_gb", "must be a non-negative number")
	case !namePrefix.MatchString(c.NamePrefix) && c.NamePrefix != "":
		return types.Invalid("name_prefix", "%q: want a lower-case letter, then up to 18 letters, digits or dashes", c.NamePrefix)
	}
	for _, d := range []struct {
		key string
		v   types.Duration
	}{
		{"quota_refresh", c.QuotaRefresh}, {"create_timeout", c.CreateTimeout}, {"delete_timeout", c.DeleteTimeout},
		{"poll_interval", c.PollInterval},
	} {
		if d.v.Duration <= 0 {
			return types.Invalid(d.key, "must be positive")
		}
	}
	if c.NoCapacityHold.Duration < 0 {
		return types.Invalid("no_capacity_hold", "must not be negative")
	}
	return nil
}

// capacity is the configured quota as the node's capacity figures.
func (q Quota) ram(vcpus float64) float64 {
	if q.RAMGB > 0 {
		return q.RAMGB
	}
	return vcpus * ramPerVCPU
}
