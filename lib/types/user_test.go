package types

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A token acts only for the User object it was made for: its
// spec.userCreatedAt must be that user's createdAt; a token of an earlier
// release, without it, must not be older than the user.
func TestTokenOfUser(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	user := &User{Metadata: ObjectMeta{Name: "dave", CreatedAt: t0}}
	for _, tc := range []struct {
		name          string
		created, made time.Time
		want          bool
	}{
		{"made for this user", t0.Add(time.Minute), t0, true},
		{"made for an earlier user of the name", t0.Add(time.Minute), t0.Add(-time.Hour), false},
		{"made for a later one", t0.Add(2 * time.Hour), t0.Add(time.Hour), false},
		{"earlier release, made after the user", t0.Add(time.Second), time.Time{}, true},
		{"earlier release, made at once with it", t0, time.Time{}, true},
		{"earlier release, made before the user", t0.Add(-time.Second), time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := &Token{Metadata: ObjectMeta{Name: "t", CreatedAt: tc.created}, Spec: TokenSpec{User: "dave", Role: RoleUser, UserCreatedAt: tc.made}}
			assert.Equal(t, tc.want, tok.OfUser(user))
		})
	}
}

// A role named twice is refused, naming the second (it was stored as given).
func TestUserRolesNamedOnce(t *testing.T) {
	u := func(roles ...string) *User {
		return &User{TypeMeta: TypeMeta{Kind: KindUser}, Metadata: ObjectMeta{Name: "dave"}, Spec: UserSpec{Roles: roles}}
	}
	assert.NoError(t, u(RoleUser, RoleOperator).Validate())
	err := u(RoleUser, RoleOperator, RoleUser).Validate()
	var fe *FieldError
	if assert.ErrorAs(t, err, &fe) {
		assert.Equal(t, "spec.roles[2]", fe.Field)
		assert.Contains(t, fe.Message, `"user" is named twice`)
	}
}
