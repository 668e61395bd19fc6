package ec2test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/smithy-go/encoding/cbor"
)

// cloudWatchPath starts the paths of CloudWatch's Smithy RPC v2 CBOR
// protocol (/service/<service>/operation/<operation>), which
// aws-sdk-go-v2's service/cloudwatch speaks.
const cloudWatchPath = "/service/GraniteServiceVersion20100801/operation/"

// cpuPoint is one CPUUtilization datapoint (percent) of an instance.
type cpuPoint struct {
	at      time.Time
	percent float64
}

// SetCPU records an instance's CPUUtilization datapoint at a time, as the
// EC2 hypervisor publishes it to CloudWatch (AWS/EC2, dimension InstanceId).
func (s *Server) SetCPU(id string, at time.Time, percent float64) {
	s.mu.Lock()
	s.cpu[id] = append(s.cpu[id], cpuPoint{at, percent})
	s.mu.Unlock()
}

// serveCloudWatch answers GetMetricData for AWS/EC2 CPUUtilization with the
// Average statistic: request and answer are CBOR maps; times are tag 1
// (epoch seconds); errors carry __type and message, and, the service being
// query-compatible, the X-Amzn-Query-Error header.
func (s *Server) serveCloudWatch(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.URL.Path, cloudWatchPath)
	s.mu.Lock()
	s.calls[op]++
	denied := s.faults.MetricsDenied
	s.mu.Unlock()
	w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
	w.Header().Set("Content-Type", "application/cbor")
	fail := func(status int, typ, query, msg string) {
		w.Header().Set("X-Amzn-Query-Error", query+";Sender")
		w.WriteHeader(status)
		_, _ = w.Write(cbor.Encode(cbor.Map{"__type": cbor.String(typ), "message": cbor.String(msg)}))
	}
	if r.Header.Get("Smithy-Protocol") != "rpc-v2-cbor" {
		fail(http.StatusBadRequest, "InvalidParameterValueException", "InvalidParameterValue", "want Smithy-Protocol: rpc-v2-cbor")
		return
	}
	if op != "GetMetricData" {
		fail(http.StatusBadRequest, "UnknownOperationException", "InvalidAction", op)
		return
	}
	if denied {
		fail(http.StatusForbidden, "AccessDeniedException", "AccessDenied", "not authorized to perform cloudwatch:GetMetricData")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(http.StatusBadRequest, "SerializationException", "MalformedInput", err.Error())
		return
	}
	v, err := cbor.Decode(body)
	in, ok := v.(cbor.Map)
	if err != nil || !ok {
		fail(http.StatusBadRequest, "SerializationException", "MalformedInput", "want a CBOR map")
		return
	}
	start, err1 := cbor.AsTime(in["StartTime"])
	end, err2 := cbor.AsTime(in["EndTime"])
	queries, _ := in["MetricDataQueries"].(cbor.List)
	if err1 != nil || err2 != nil || len(queries) == 0 {
		fail(http.StatusBadRequest, "InvalidParameterValueException", "InvalidParameterValue", "StartTime, EndTime and MetricDataQueries are required")
		return
	}
	var results cbor.List
	for _, q := range queries {
		qm, _ := q.(cbor.Map)
		res, msg := s.metricResult(qm, start, end)
		if msg != "" {
			fail(http.StatusBadRequest, "InvalidParameterValueException", "InvalidParameterValue", msg)
			return
		}
		results = append(results, res)
	}
	_, _ = w.Write(cbor.Encode(cbor.Map{"MetricDataResults": results, "Messages": cbor.List{}}))
}

// metricResult is one query's answer: the average of each period from start
// that has datapoints, newest first (CloudWatch's default order).
func (s *Server) metricResult(q cbor.Map, start, end time.Time) (cbor.Map, string) {
	id, _ := q["Id"].(cbor.String)
	stat, _ := q["MetricStat"].(cbor.Map)
	metric, _ := stat["Metric"].(cbor.Map)
	period, err := cbor.AsInt32(stat["Period"])
	if id == "" || metric == nil || err != nil || period <= 0 || period%60 != 0 {
		return nil, "each query needs an Id and a MetricStat with a Metric and a Period of whole minutes"
	}
	instance := ""
	dims, _ := metric["Dimensions"].(cbor.List)
	for _, d := range dims {
		if dm, _ := d.(cbor.Map); dm["Name"] == cbor.String("InstanceId") {
			v, _ := dm["Value"].(cbor.String)
			instance = string(v)
		}
	}
	var times, values cbor.List
	if metric["Namespace"] == cbor.String("AWS/EC2") && metric["MetricName"] == cbor.String("CPUUtilization") &&
		stat["Stat"] == cbor.String("Average") {
		s.mu.Lock()
		points := slices.Clone(s.cpu[instance])
		s.mu.Unlock()
		step := time.Duration(period) * time.Second
		for b := start; b.Before(end); b = b.Add(step) {
			sum, n := 0.0, 0
			for _, p := range points {
				if !p.at.Before(b) && p.at.Before(b.Add(step)) && p.at.Before(end) {
					sum, n = sum+p.percent, n+1
				}
			}
			if n > 0 {
				times = append(cbor.List{&cbor.Tag{ID: 1, Value: cbor.Float64(float64(b.UnixMilli()) / 1e3)}}, times...)
				values = append(cbor.List{cbor.Float64(sum / float64(n))}, values...)
			}
		}
	}
	return cbor.Map{"Id": id, "Label": cbor.String("CPUUtilization"), "Timestamps": times, "Values": values,
		"StatusCode": cbor.String("Complete")}, ""
}
