package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPercentile(t *testing.T) {
	assert.Equal(t, 0.0, Percentile([]float64(nil), 50))
	assert.Equal(t, 7.0, Percentile([]float64{7}, 99))
	one2four := []float64{4, 2, 3, 1}
	assert.Equal(t, 2.0, Percentile(one2four, 50))
	assert.Equal(t, 4.0, Percentile(one2four, 99))
	assert.Equal(t, 1.0, Percentile(one2four, 1))
	assert.Equal(t, []float64{4, 2, 3, 1}, one2four, "the input is not sorted in place")
	var ms []time.Duration
	for i := 1; i <= 20; i++ {
		ms = append(ms, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 10*time.Millisecond, Percentile(ms, 50))
	assert.Equal(t, 18*time.Millisecond, Percentile(ms, 90))
	assert.Equal(t, 20*time.Millisecond, Percentile(ms, 99))
	assert.Equal(t, 20*time.Millisecond, Percentile(ms, 100))
}
