package types

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScheduledEventExpectedUsersAndSessionTimeout(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ev := &ScheduledEvent{TypeMeta: TypeMeta{Kind: KindScheduledEvent}, Metadata: ObjectMeta{Name: "ev"},
		Spec: ScheduledEventSpec{StartTime: now, EndTime: now.Add(time.Hour), ExpectedUsers: -1}}
	var fe *FieldError
	require.True(t, errors.As(ev.Validate(), &fe))
	assert.Equal(t, "spec.expectedUsers", fe.Field)
	ev.Spec.ExpectedUsers = 20
	assert.NoError(t, ev.Validate())

	s := &Session{TypeMeta: TypeMeta{Kind: KindSession}, Metadata: ObjectMeta{Name: "s", CreatedAt: now},
		Spec: SessionSpec{User: "alice", Timeout: D(-time.Second)}}
	require.True(t, errors.As(s.Validate(), &fe))
	assert.Equal(t, "spec.timeout", fe.Field)
	s.Spec.Timeout = D(0)
	assert.Equal(t, DefaultSessionTimeout, s.EffectiveTimeout())
	assert.Equal(t, now, s.LastSeen())
	s.Metadata.Annotations = map[string]string{AnnotationKeepalive: now.Add(time.Minute).Format(time.RFC3339Nano)}
	assert.Equal(t, now.Add(time.Minute), s.LastSeen())
	s.Metadata.Annotations[AnnotationKeepalive] = "garbage"
	assert.Equal(t, now, s.LastSeen(), "an unreadable keepalive is ignored")
}
