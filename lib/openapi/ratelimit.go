package openapi

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// userBuckets holds a token bucket per user of role user, on this node.
type userBuckets struct {
	every rate.Limit
	burst int
	mu    sync.Mutex
	// byUser holds each user's bucket, made at the user's first use.
	byUser map[string]*rate.Limiter
}

func newUserBuckets(every rate.Limit, burst int) *userBuckets {
	return &userBuckets{every: every, burst: burst, byUser: map[string]*rate.Limiter{}}
}

func (b *userBuckets) of(user string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	lim := b.byUser[user]
	if lim == nil {
		lim = rate.NewLimiter(b.every, b.burst)
		b.byUser[user] = lim
	}
	return lim
}

// take takes one of user's tokens, or says how long until there is one
// (and takes none).
func (b *userBuckets) take(user string, now time.Time) time.Duration {
	r := b.of(user).ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now)
	}
	return d
}

// wait says how long until user has a token (0: now), taking none.
func (b *userBuckets) wait(user string, now time.Time) time.Duration {
	lim := b.of(user)
	if lim.TokensAt(now) >= 1 {
		return 0
	}
	r := lim.ReserveN(now, 1)
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

// tooMany is a 429 whose Retry-After is d in whole seconds, and which says
// so after msg.
func tooMany(field string, d time.Duration, msg string) *apiError {
	secs := int(math.Ceil(d.Seconds()))
	return newErr(http.StatusTooManyRequests, CodeTooMany, field, "%s; try again in %ds", msg, secs).retryAfter(secs)
}

// The write limit: a user's writes through this node (creates, updates,
// deletes, keepalives) take a token each. The claim quota bounds what a user
// holds at once; this bounds how fast they can churn it (each write is
// stored, replicated to every node and kept as a tombstone after a delete).
// Bursts are writeBurst seconds of the rate (at least 10).
const writeBurst = 5

func newWriteLimits(perSecond float64) *userBuckets {
	if perSecond <= 0 {
		return nil
	}
	return newUserBuckets(rate.Limit(perSecond), max(10, int(math.Ceil(perSecond*writeBurst))))
}

// limitWrites refuses a user's write past api.user_writes_per_second with
// 429 and Retry-After. Reads, and admins' and operators' writes, are not
// limited.
func (s *Server) limitWrites(c *gin.Context) {
	p := principal(c)
	if m := c.Request.Method; s.writeLimits == nil || p.Staff() || m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions {
		c.Next()
		return
	}
	if d := s.writeLimits.take(p.User, time.Now()); d > 0 {
		s.writeErr(c, tooMany("", d, fmt.Sprintf("user %s writes faster than this node allows (api.user_writes_per_second: %g)",
			p.User, float64(s.writeLimits.every))))
		return
	}
	c.Next()
}

// admitWrites refuses a write that would start new work (507) while the
// node's disk is nearly full (store.Admits), so that what is under way
// finishes in the room left. A DELETE goes through: it ends work.
func (s *Server) admitWrites(c *gin.Context) {
	switch c.Request.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete:
	default:
		if err := s.st.Admits(); err != nil {
			s.writeErr(c, err)
			return
		}
	}
	c.Next()
}

// The access-code pace: a user's secrets that match no code take a token
// each, codeGuessBurst at once, then one per codeGuessEvery; while the
// user's bucket is empty every code they present is refused unchecked, so a
// right guess then tells them nothing either. Codes are often words a person
// can type, and the write limit alone would let a user token try them at
// its pace. Per node, like the write limit.
const (
	codeGuessBurst = 10
	codeGuessEvery = 6 * time.Second
)

func newGuessLimits() *userBuckets { return newUserBuckets(rate.Every(codeGuessEvery), codeGuessBurst) }
