// Package stats holds the figures that benchmarks and `hf-cli bench` print.
package stats

import (
	"cmp"
	"math"
	"slices"
)

// Percentile returns the p-th percentile (0 < p <= 100) of values by nearest
// rank: the smallest value with at least p% of the values at or below it;
// the zero value for no values. values is not changed and need not be sorted.
func Percentile[T cmp.Ordered](values []T, p float64) T {
	var zero T
	if len(values) == 0 {
		return zero
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}
