package openapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// writeLimits holds a token bucket per user of role user: their writes
// through this node (creates, updates, deletes, keepalives) take a token
// each. The claim quota bounds what a user holds at once; this bounds how
// fast they can churn it (each write is stored, replicated to every node and
// kept as a tombstone after a delete).
type writeLimits struct {
	perSecond float64
	burst     int
	mu        sync.Mutex
	byUser    map[string]*rate.Limiter
}

// writeBurst is how many writes a user may make at once, in seconds of the
// rate (at least 10).
const writeBurst = 5

func newWriteLimits(perSecond float64) *writeLimits {
	if perSecond <= 0 {
		return nil
	}
	return &writeLimits{perSecond: perSecond, burst: max(10, int(math.Ceil(perSecond*writeBurst))), byUser: map[string]*rate.Limiter{}}
}

// wait says how long user must wait before a write is allowed (0: go on,
// and the write is counted).
func (l *writeLimits) wait(user string, now time.Time) time.Duration {
	l.mu.Lock()
	lim := l.byUser[user]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(l.perSecond), l.burst)
		l.byUser[user] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d > 0 {
		r.CancelAt(now) // not taken: the request is refused
	}
	return d
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
	if d := s.writeLimits.wait(p.User, time.Now()); d > 0 {
		secs := int(math.Ceil(d.Seconds()))
		c.Header("Retry-After", strconv.Itoa(secs))
		s.writeErr(c, newErr(http.StatusTooManyRequests, CodeTooMany, "", "user %s writes faster than this node allows (api.user_writes_per_second: %g); try again in %ds",
			p.User, s.writeLimits.perSecond, secs))
		return
	}
	c.Next()
}
