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

// guessLimits holds a bucket per user of role user for access-code secrets
// that match no code: codes are often words a person can type, and a user
// token could otherwise try the api.user_writes_per_second pace of them.
// A user gets codeGuessBurst misses at once, then one per codeGuessEvery;
// while their bucket is empty every code they present is refused unchecked,
// so a right guess then tells them nothing either. Per node, like the write
// limit.
type guessLimits struct {
	mu     sync.Mutex
	byUser map[string]*rate.Limiter
}

// codeGuessBurst and codeGuessEvery pace a user's wrong access codes: a
// person who mistypes a few times is not held up, a script gets 10 a minute.
const (
	codeGuessBurst = 10
	codeGuessEvery = 6 * time.Second
)

func (g *guessLimits) limiter(user string) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byUser == nil {
		g.byUser = map[string]*rate.Limiter{}
	}
	lim := g.byUser[user]
	if lim == nil {
		lim = rate.NewLimiter(rate.Every(codeGuessEvery), codeGuessBurst)
		g.byUser[user] = lim
	}
	return lim
}

// blocked says how long user must wait before a code of theirs is checked
// again (0: now).
func (g *guessLimits) blocked(user string, now time.Time) time.Duration {
	lim := g.limiter(user)
	if lim.TokensAt(now) >= 1 {
		return 0
	}
	r := lim.ReserveN(now, 1)
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

// missed counts a code of user's that matched none.
func (g *guessLimits) missed(user string, now time.Time) { g.limiter(user).AllowN(now, 1) }
