package types

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDescribeType(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"", "a string"}, {true, "true or false"}, {3, "a whole number"}, {uint8(3), "a whole number"},
		{1.5, "a number"}, {[]string{}, "a list of strings"}, {[]int{}, "a list"},
		{map[string]int{}, "an object"}, {Resources{}, "an object"}, {new(int), "a whole number"},
		{time.Duration(0), "a whole number"}, {func() {}, "func()"},
	} {
		assert.Equal(t, tc.want, DescribeType(reflect.TypeOf(tc.v)), "%T", tc.v)
	}
	assert.Equal(t, "another type", DescribeType(nil))
}
