package cloud

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/smithy-go"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// awsTagPrefix starts hf's tag keys ("hf/node", ...).
const awsTagPrefix = "hf/"

// infoPrivateKey is the machine information key of a generated key pair's
// private key.
const infoPrivateKey = "ssh_private_key"

// awsTagResources records the template's resources on an instance (JSON).
const awsTagResources = awsTagPrefix + "resources"

// NewAWS builds an unprepared aws driver; it is a drivers.Factory.
func NewAWS(env drivers.Env) drivers.Driver { return newAWS(env, nil) }

// newAWS builds an aws driver whose SDK config gets extra load options (the
// tests' static credentials).
func newAWS(env drivers.Env, extra []func(*awsconfig.LoadOptions) error) *Driver {
	return newDriver(env, TypeAWS, func(ctx context.Context, raw []byte) (provider, Common, error) {
		c, err := ParseAWSConfig(raw)
		if err != nil {
			return nil, Common{}, fmt.Errorf("config: %w", err)
		}
		p, err := connectAWS(ctx, c, extra)
		return p, c.Common, err
	})
}

// awsProvider is EC2 (and Service Quotas) through aws-sdk-go-v2.
type awsProvider struct {
	cfg AWSConfig
	ec2 *ec2.Client
	sq  *servicequotas.Client
	cw  *cloudwatch.Client
}

func connectAWS(ctx context.Context, c AWSConfig, extra []func(*awsconfig.LoadOptions) error) (*awsProvider, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(c.Region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts, o.MaxBackoff = c.RetryMaxAttempts, c.RetryMaxBackoff.Duration
				// EC2 answers InsufficientInstanceCapacity with a 5xx, which the
				// retryer would retry at once; the node declines instead.
				o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					if awsNoCapacity[apiCode(err)] {
						return aws.FalseTernary
					}
					return aws.UnknownTernary
				})}, o.Retryables...)
			})
		}),
	}
	if c.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(c.Profile))
	}
	sdk, err := awsconfig.LoadDefaultConfig(ctx, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("aws config (region %s, profile %q): %w", c.Region, c.Profile, err)
	}
	p := &awsProvider{cfg: c}
	p.ec2 = ec2.NewFromConfig(sdk, func(o *ec2.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	p.sq = servicequotas.NewFromConfig(sdk, func(o *servicequotas.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	p.cw = cloudwatch.NewFromConfig(sdk, func(o *cloudwatch.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
		}
	})
	return p, nil
}

// awsEntry is a template entry with what the cloud resolved of it.
type awsEntry struct {
	AWSTemplate
	imageID    string
	imageName  string
	rootDevice string
	subnetID   string
}

func (e awsEntry) portMap() map[string]int { return e.Ports }

func (p *awsProvider) parseTemplate(raw []byte) (any, error) {
	return parseAWSTemplate(raw, p.cfg.Defaults)
}

// checkTemplate resolves the image (by id, or the newest matching the
// filter) and the subnet by tags; an image or subnet that does not exist is
// an error naming its key.
func (p *awsProvider) checkTemplate(ctx context.Context, raw any) (any, error) {
	tc := raw.(AWSTemplate)
	e := awsEntry{AWSTemplate: tc, subnetID: tc.SubnetID}
	in := &ec2.DescribeImagesInput{}
	field := "ami"
	if tc.AMI != "" {
		in.ImageIds = []string{tc.AMI}
	} else {
		field = "ami_filter.name"
		in.Owners = tc.AMIFilter.Owners
		in.Filters = []ec2types.Filter{
			{Name: aws.String("name"), Values: []string{tc.AMIFilter.Name}},
			{Name: aws.String("state"), Values: []string{"available"}},
		}
	}
	out, err := p.ec2.DescribeImages(ctx, in)
	if code := apiCode(err); strings.HasPrefix(code, "InvalidAMIID.") {
		return nil, types.Invalid(field, "image %s does not exist in %s", tc.AMI, p.cfg.Region)
	} else if err != nil {
		return nil, fmt.Errorf("describe images: %w", err)
	}
	if len(out.Images) == 0 {
		if tc.AMI != "" {
			return nil, types.Invalid(field, "image %s does not exist in %s", tc.AMI, p.cfg.Region)
		}
		return nil, types.Invalid(field, "no available image in %s matches %q (owners %v)", p.cfg.Region, tc.AMIFilter.Name, tc.AMIFilter.Owners)
	}
	imgs := out.Images
	// ISO 8601 times sort as strings; ties go to the id, so every node picks alike.
	sort.Slice(imgs, func(i, j int) bool {
		ci, cj := aws.ToString(imgs[i].CreationDate), aws.ToString(imgs[j].CreationDate)
		if ci != cj {
			return ci > cj
		}
		return aws.ToString(imgs[i].ImageId) < aws.ToString(imgs[j].ImageId)
	})
	img := imgs[0]
	e.imageID, e.imageName, e.rootDevice = aws.ToString(img.ImageId), aws.ToString(img.Name), aws.ToString(img.RootDeviceName)
	if len(tc.SubnetTags) > 0 {
		var filters []ec2types.Filter
		for _, k := range slices.Sorted(maps.Keys(tc.SubnetTags)) {
			filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tc.SubnetTags[k]}})
		}
		out, err := p.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: filters})
		if err != nil {
			return nil, fmt.Errorf("describe subnets: %w", err)
		}
		var ids []string
		for _, s := range out.Subnets {
			ids = append(ids, aws.ToString(s.SubnetId))
		}
		if len(ids) == 0 {
			return nil, types.Invalid("subnet_tags", "no subnet in %s has these tags", p.cfg.Region)
		}
		slices.Sort(ids)
		e.subnetID = ids[0]
	}
	return e, nil
}

func (p *awsProvider) tags(spec createSpec) []ec2types.Tag {
	all := map[string]string{}
	for k, v := range spec.Template.(awsEntry).Tags {
		all[k] = v
	}
	for k, v := range spec.Keys {
		if v != "" {
			all[awsTagPrefix+k] = v
		}
	}
	res, _ := json.Marshal(spec.Resources)
	all[awsTagResources] = string(res)
	all["Name"] = spec.Name
	out := make([]ec2types.Tag, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(all[k])})
	}
	return out
}

// create runs one instance. The tags come with RunInstances itself, so the
// instance is this node's from its first moment; the client token makes the
// SDK's retries of the call idempotent. A generated key pair is made first,
// named and tagged like the instance (so a restarted node finds it even
// when the instance was never made), and its private key is returned as
// machine information.
func (p *awsProvider) create(ctx context.Context, spec createSpec) (string, map[string]string, error) {
	e := spec.Template.(awsEntry)
	var info map[string]string
	if e.GenerateKeyPair {
		spec.Keys = maps.Clone(spec.Keys)
		spec.Keys[keyKeyPair] = spec.Name
		kp, err := p.ec2.CreateKeyPair(ctx, &ec2.CreateKeyPairInput{
			KeyName: aws.String(spec.Name), KeyType: ec2types.KeyTypeEd25519,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeKeyPair, Tags: p.tags(spec)}},
		})
		if err != nil {
			return "", nil, fmt.Errorf("create key pair: %w", awsError(err))
		}
		e.KeyName = spec.Name
		info = map[string]string{"key_name": spec.Name, "key_fingerprint": aws.ToString(kp.KeyFingerprint),
			infoPrivateKey: aws.ToString(kp.KeyMaterial)}
	}
	tags := p.tags(spec)
	in := &ec2.RunInstancesInput{
		ImageId:      aws.String(e.imageID),
		InstanceType: ec2types.InstanceType(e.InstanceType),
		MinCount:     aws.Int32(1),
		MaxCount:     aws.Int32(1),
		ClientToken:  aws.String(spec.Token),
		UserData:     aws.String(base64.StdEncoding.EncodeToString([]byte(cloudConfig(spec.Meta, e.StartupScript)))),
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
		SecurityGroupIds: e.SecurityGroupIDs,
	}
	if e.subnetID != "" {
		in.SubnetId = aws.String(e.subnetID)
	}
	if e.KeyName != "" {
		in.KeyName = aws.String(e.KeyName)
	}
	if spec.Resources.DiskGB > 0 {
		dev := e.rootDevice
		if dev == "" {
			dev = "/dev/xvda"
		}
		in.BlockDeviceMappings = []ec2types.BlockDeviceMapping{{
			DeviceName: aws.String(dev),
			Ebs: &ec2types.EbsBlockDevice{
				VolumeSize:          aws.Int32(int32(math.Ceil(spec.Resources.DiskGB))),
				VolumeType:          ec2types.VolumeTypeGp3,
				DeleteOnTermination: aws.Bool(true),
			},
		}}
	}
	out, err := p.ec2.RunInstances(ctx, in)
	if err != nil {
		return "", nil, fmt.Errorf("run instance: %w", awsError(err))
	}
	if len(out.Instances) != 1 {
		return "", nil, fmt.Errorf("run instance: %d instances in the answer", len(out.Instances))
	}
	return aws.ToString(out.Instances[0].InstanceId), info, nil
}

// ownerFilters select what o tagged as its own.
func ownerFilters(o owner) []ec2types.Filter {
	return []ec2types.Filter{
		{Name: aws.String("tag:" + awsTagPrefix + keyNode), Values: []string{o.node}},
		{Name: aws.String("tag:" + awsTagPrefix + keyInstance), Values: []string{o.instance}},
	}
}

// keyPairs lists o's generated key pairs, of the instance called name or
// (name "") of all instances.
func (p *awsProvider) keyPairs(ctx context.Context, o owner, name string) ([]ec2types.KeyPairInfo, error) {
	filters := ownerFilters(o)
	if name != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("key-name"), Values: []string{name}})
	}
	out, err := p.ec2.DescribeKeyPairs(ctx, &ec2.DescribeKeyPairsInput{Filters: filters})
	if err != nil {
		return nil, fmt.Errorf("describe key pairs: %w", err)
	}
	return out.KeyPairs, nil
}

// leftovers implements provider: the names of o's generated key pairs.
func (p *awsProvider) leftovers(ctx context.Context, o owner) ([]string, error) {
	kps, err := p.keyPairs(ctx, o, "")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(kps))
	for _, k := range kps {
		names = append(names, aws.ToString(k.KeyName))
	}
	return names, nil
}

// cleanup implements provider: it deletes the key pair o generated for the
// instance called name, found by its tags (never a key pair of someone
// else's that happens to have the name).
func (p *awsProvider) cleanup(ctx context.Context, o owner, name string) error {
	kps, err := p.keyPairs(ctx, o, name)
	if err != nil {
		return err
	}
	for _, k := range kps {
		if _, err := p.ec2.DeleteKeyPair(ctx, &ec2.DeleteKeyPairInput{KeyPairId: k.KeyPairId}); err != nil {
			return fmt.Errorf("delete key pair %s: %w", name, err)
		}
	}
	return nil
}

func (p *awsProvider) get(ctx context.Context, id string) (vm, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return vm{}, fmt.Errorf("describe instance: %w", awsError(err))
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			v := awsVM(in)
			if v.State == string(ec2types.InstanceStateNameTerminated) {
				return vm{}, fmt.Errorf("instance %s: %w (terminated)", id, drivers.ErrNotFound)
			}
			return v, nil
		}
	}
	return vm{}, fmt.Errorf("instance %s: %w", id, drivers.ErrNotFound)
}

func (p *awsProvider) remove(ctx context.Context, id string) error {
	_, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err := awsError(err); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		return fmt.Errorf("terminate instance: %w", err)
	}
	return nil
}

// liveStates are the instance states that hold something.
var liveStates = []string{"pending", "running", "shutting-down", "stopping", "stopped"}

func (p *awsProvider) list(ctx context.Context, o owner) ([]vm, error) {
	filters := append(ownerFilters(o), ec2types.Filter{Name: aws.String("instance-state-name"), Values: liveStates})
	var out []vm
	err := p.describe(ctx, filters, func(in ec2types.Instance) {
		if v := awsVM(in); v.Keys[keyNode] == o.node && v.Keys[keyInstance] == o.instance {
			out = append(out, v)
		}
	})
	return out, err
}

func (p *awsProvider) describe(ctx context.Context, filters []ec2types.Filter, each func(ec2types.Instance)) error {
	pages := ec2.NewDescribeInstancesPaginator(p.ec2, &ec2.DescribeInstancesInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describe instances: %w", awsError(err))
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				each(in)
			}
		}
	}
	return nil
}

// quota reads the vCPU quota from Service Quotas and counts the vCPUs of
// the region's pending and running instances that are not this driver's.
// EC2 has no instance-count quota any more.
func (p *awsProvider) quota(ctx context.Context, o owner) (usage, error) {
	q, err := p.sq.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{
		ServiceCode: aws.String("ec2"), QuotaCode: aws.String(p.cfg.ServiceQuotaCode),
	})
	if err != nil {
		return usage{}, fmt.Errorf("service quota %s: %w", p.cfg.ServiceQuotaCode, err)
	}
	if q.Quota == nil || q.Quota.Value == nil {
		return usage{}, fmt.Errorf("service quota %s: no value in the answer", p.cfg.ServiceQuotaCode)
	}
	u := usage{LimitVCPUs: *q.Quota.Value, LimitInstances: -1}
	err = p.describe(ctx, []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}},
		func(in ec2types.Instance) {
			v := awsVM(in)
			if v.Keys[keyNode] == o.node && v.Keys[keyInstance] == o.instance {
				return
			}
			u.OtherInstances++
			if c := in.CpuOptions; c != nil {
				u.OtherVCPUs += float64(aws.ToInt32(c.CoreCount) * max(aws.ToInt32(c.ThreadsPerCore), 1))
			}
		})
	return u, err
}

// console implements provider with GetConsoleOutput, the latest output
// where the instance type offers it (Nitro), else what EC2 buffered.
func (p *awsProvider) console(ctx context.Context, id string) (string, error) {
	out, err := p.ec2.GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: aws.String(id), Latest: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("console output of %s: %w", id, awsError(err))
	}
	text, err := base64.StdEncoding.DecodeString(aws.ToString(out.Output))
	if err != nil {
		return "", fmt.Errorf("console output of %s: %w", id, err)
	}
	return string(text), nil
}

// meterPeriod implements meter: the CloudWatch period, or 0 when off.
func (p *awsProvider) meterPeriod() (time.Duration, time.Duration) {
	if !p.cfg.Activity.CloudWatch {
		return 0, 0
	}
	return p.cfg.Activity.Period.Duration, p.cfg.Activity.Delay.Duration
}

// busy implements meter from the Average CPUUtilization of the instance
// per period (AWS/EC2, dimension InstanceId).
func (p *awsProvider) busy(ctx context.Context, id string, from, to time.Time) (float64, error) {
	a := p.cfg.Activity
	period := a.Period.Duration
	pages := cloudwatch.NewGetMetricDataPaginator(p.cw, &cloudwatch.GetMetricDataInput{
		StartTime: aws.Time(from), EndTime: aws.Time(to),
		MetricDataQueries: []cwtypes.MetricDataQuery{{
			Id: aws.String("cpu"),
			MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{Namespace: aws.String("AWS/EC2"), MetricName: aws.String("CPUUtilization"),
					Dimensions: []cwtypes.Dimension{{Name: aws.String("InstanceId"), Value: aws.String(id)}}},
				Period: aws.Int32(int32(period / time.Second)),
				Stat:   aws.String("Average"),
			},
		}},
	})
	secs := 0.0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("cloudwatch cpu of %s: %w", id, err)
		}
		for _, r := range page.MetricDataResults {
			for _, v := range r.Values {
				secs += max(0, v-a.CPUPercent) / 100 * period.Seconds()
			}
		}
	}
	return secs, nil
}

// awsVM reads an instance.
func awsVM(in ec2types.Instance) vm {
	v := vm{ID: aws.ToString(in.InstanceId), PrivateIP: aws.ToString(in.PrivateIpAddress), PublicIP: aws.ToString(in.PublicIpAddress),
		Type: string(in.InstanceType), Image: aws.ToString(in.ImageId), KeyName: aws.ToString(in.KeyName), Keys: map[string]string{}}
	if in.Placement != nil {
		v.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if c := in.CpuOptions; c != nil {
		v.VCPUs = float64(aws.ToInt32(c.CoreCount) * max(aws.ToInt32(c.ThreadsPerCore), 1))
	}
	v.Launched = aws.ToTime(in.LaunchTime)
	for _, t := range in.Tags {
		k, val := aws.ToString(t.Key), aws.ToString(t.Value)
		switch {
		case k == "Name":
			v.Name = val
		case k == awsTagResources:
			_ = json.Unmarshal([]byte(val), &v.Resources) // a missing tag means none recorded
		case strings.HasPrefix(k, awsTagPrefix):
			v.Keys[strings.TrimPrefix(k, awsTagPrefix)] = val
		}
	}
	if in.State != nil {
		v.State = string(in.State.Name)
	}
	switch ec2types.InstanceStateName(v.State) {
	case ec2types.InstanceStateNamePending:
		v.Phase = types.MachineProvisioning
	case ec2types.InstanceStateNameRunning:
		v.Phase = types.MachineRunning
	case ec2types.InstanceStateNameShuttingDown:
		v.Phase = types.MachineTerminating
	case ec2types.InstanceStateNameTerminated:
		v.Phase = types.MachineTerminated
	default: // stopping, stopped: hf never stops a VM
		v.Phase = types.MachineFailed
	}
	return v
}

// awsNoCapacity are the error codes of a cloud without room for the instance.
var awsNoCapacity = map[string]bool{
	"InsufficientInstanceCapacity": true, "InsufficientHostCapacity": true, "InsufficientCapacity": true,
	"VcpuLimitExceeded": true, "InstanceLimitExceeded": true, "InsufficientFreeAddressesInSubnet": true,
}

// awsError marks the errors callers branch on: no capacity and not found.
func awsError(err error) error {
	code := apiCode(err)
	switch {
	case awsNoCapacity[code]:
		return fmt.Errorf("%w: %w", drivers.ErrNoCapacity, err)
	case strings.HasPrefix(code, "InvalidInstanceID."):
		return fmt.Errorf("%w: %w", drivers.ErrNotFound, err)
	}
	return err
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
