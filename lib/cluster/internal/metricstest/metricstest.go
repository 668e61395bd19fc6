// Package metricstest reads Prometheus collectors in tests.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Values gathers c through a pedantic registry (which also checks that c
// describes what it collects) and returns each sample keyed
// "name,label=value,..." in label order: a counter's or gauge's value, a
// histogram's sample count.
func Values(t testing.TB, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := []string{mf.GetName()}
			for _, l := range m.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out[strings.Join(key, ",")] = v
		}
	}
	return out
}
