//go:build !race

package membertest

// raceEnabled: the race detector slows memberlist's probes ~10x, so test
// timings are relaxed under it.
const raceEnabled = false
