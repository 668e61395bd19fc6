package types

import (
	"fmt"
	"slices"
	"time"
)

// Roles of users and tokens.
const (
	// RoleAdmin may do everything, users and tokens included.
	RoleAdmin = "admin"
	// RoleOperator runs the fleet: every kind but users and tokens.
	RoleOperator = "operator"
	// RoleUser sees and writes only its own claims and sessions.
	RoleUser = "user"
)

// Roles lists the roles of users, most powerful first.
var Roles = []string{RoleAdmin, RoleOperator, RoleUser}

// RoleJoin is the role of a join token: it may fetch the cluster's
// secrets (POST /api/v1/cluster/join) and nothing else. Its user is
// JoinUser, which needs no User object.
const (
	RoleJoin = "join"
	JoinUser = "hf-join"
)

// Join token lifetimes: the default, the shortest and the longest. The API
// refuses one out of range, and hf-cli before it asks. A token's expiry is
// kept to the second, so a shorter one could be expired when it is made.
const (
	DefaultJoinTTL = 24 * time.Hour
	MinJoinTTL     = time.Second
	MaxJoinTTL     = 7 * 24 * time.Hour
)

// User is a person or program known to the whole cluster: the roles its
// tokens may carry. Replicated like every kind, so a token works on every
// node.
type User struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     UserSpec   `json:"spec"`
}

// UserSpec describes a user.
type UserSpec struct {
	// DisplayName is for people.
	DisplayName string `json:"displayName,omitempty"`
	// Roles are the roles the user's tokens may carry.
	Roles []string `json:"roles"`
	// Disabled stops every token of the user at once.
	Disabled bool `json:"disabled,omitempty"`
}

// HasRole reports whether the user may act in role.
func (o *User) HasRole(role string) bool { return slices.Contains(o.Spec.Roles, role) }

// Meta returns the metadata.
func (o *User) Meta() *ObjectMeta { return &o.Metadata }

// Facets implements Object.
func (o *User) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}}
}

// Validate checks the user.
func (o *User) Validate() error {
	if err := o.TypeMeta.check(KindUser); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	if len(o.Spec.Roles) == 0 {
		return Invalid("spec.roles", "must name at least one of %v", Roles)
	}
	for i, r := range o.Spec.Roles {
		if !slices.Contains(Roles, r) {
			return Invalid(fmt.Sprintf("spec.roles[%d]", i), "must be one of %v, got %q", Roles, r)
		}
		if slices.Contains(o.Spec.Roles[:i], r) {
			return Invalid(fmt.Sprintf("spec.roles[%d]", i), "role %q is named twice", r)
		}
	}
	return nil
}

// Token is a bearer token of a user. The secret is shown once, when the
// token is made; the cluster keeps only a keyed hash of it. Deleting the
// token revokes it on every node.
type Token struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     TokenSpec  `json:"spec"`
}

// TokenSpec describes a token.
type TokenSpec struct {
	// User is the User the token acts as.
	User string `json:"user"`
	// Role is the role the token carries, one of the user's.
	Role string `json:"role"`
	// ExpiresAt ends the token (zero: never).
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// UserCreatedAt is the createdAt of the User object the token was made
	// for, set by the server: a user deleted and made again under the same
	// name is another object, which the old tokens do not act for (see
	// OfUser).
	UserCreatedAt time.Time `json:"userCreatedAt,omitzero"`
	// Hash is HMAC-SHA256 of the secret keyed with Salt, hex; both are made
	// by the server and never shown.
	Hash string `json:"hash,omitempty"`
	Salt string `json:"salt,omitempty"`
}

// Meta returns the metadata.
func (o *Token) Meta() *ObjectMeta { return &o.Metadata }

// Facets implements Object.
func (o *Token) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}}
}

// Validate checks the token.
func (o *Token) Validate() error {
	if err := o.TypeMeta.check(KindToken); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	if err := ValidateName("spec.user", o.Spec.User); err != nil {
		return err
	}
	if o.Spec.Role == RoleJoin {
		if o.Spec.User != JoinUser {
			return Invalid("spec.user", "a join token's user is %q, got %q", JoinUser, o.Spec.User)
		}
		return nil
	}
	if !slices.Contains(Roles, o.Spec.Role) {
		return Invalid("spec.role", "must be one of %v, got %q", Roles, o.Spec.Role)
	}
	return nil
}

// OfUser reports whether the token was made for user, the object now
// stored under its spec.user, and not for an earlier user of that name
// since deleted. A token of an earlier release, made without
// spec.userCreatedAt, counts as user's when it was not made before user
// was created.
func (o *Token) OfUser(user *User) bool {
	if !o.Spec.UserCreatedAt.IsZero() {
		return o.Spec.UserCreatedAt.Equal(user.Metadata.CreatedAt)
	}
	return !o.Metadata.CreatedAt.Before(user.Metadata.CreatedAt)
}

// ExpiredAt reports whether the token has expired at now.
func (o *Token) ExpiredAt(now time.Time) bool {
	return !o.Spec.ExpiresAt.IsZero() && !now.Before(o.Spec.ExpiresAt)
}
