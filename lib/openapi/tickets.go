package openapi

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/types"
)

// Stream tickets let a browser's EventSource, which cannot send an
// Authorization header, open an event stream: the page asks for a ticket
// with its bearer token and passes it as ?ticket= on the stream's URL. A
// ticket is this node's (kept in memory, never replicated: the page asks
// the node it streams from), valid for StreamTicketTTL and for one stream.
// It stands for the token that asked for it, which is checked again when
// the ticket is used, so a token revoked meanwhile opens nothing.

// StreamTicketTTL is how long a stream ticket may wait to be used.
const StreamTicketTTL = 30 * time.Second

// maxTickets bounds the tickets waiting on one node, and
// maxTicketsPerToken those of one token (so one token cannot keep the
// others from streaming); more get 429.
const (
	maxTickets         = 10000
	maxTicketsPerToken = 64
)

const streamTicketsPath = "/stream-tickets"

// StreamTicket is the answer of POST /api/v1/stream-tickets.
type StreamTicket struct {
	// Ticket is passed as ?ticket= on a watch (once).
	Ticket string `json:"ticket"`
	// ExpiresAt is when the ticket stops opening a stream.
	ExpiresAt time.Time `json:"expiresAt"`
}

// ticketBook holds the tickets this node issued. Safe for concurrent use.
type ticketBook struct {
	now func() time.Time
	mu  sync.Mutex
	// byID maps a ticket to the bearer token it stands for.
	byID map[string]issuedTicket
}

type issuedTicket struct {
	token   string
	expires time.Time
}

func newTicketBook(now func() time.Time) *ticketBook {
	return &ticketBook{now: now, byID: map[string]issuedTicket{}}
}

// issue makes a ticket for token; false when too many are waiting, on the
// node or for the token.
func (b *ticketBook) issue(token string) (StreamTicket, bool) {
	var raw [24]byte
	_, _ = rand.Read(raw[:]) // crypto/rand never fails on Linux
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := 0
	for k, t := range b.byID {
		switch {
		case !now.Before(t.expires):
			delete(b.byID, k)
		case t.token == token:
			mine++
		}
	}
	if len(b.byID) >= maxTickets || mine >= maxTicketsPerToken {
		return StreamTicket{}, false
	}
	exp := now.Add(StreamTicketTTL)
	b.byID[id] = issuedTicket{token: token, expires: exp}
	return StreamTicket{Ticket: id, ExpiresAt: exp.UTC()}, true
}

// redeem uses up a ticket and returns the token it stands for.
func (b *ticketBook) redeem(id string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.byID[id]
	delete(b.byID, id)
	if !ok || !b.now().Before(t.expires) {
		return "", false
	}
	return t.token, true
}

func (s *Server) createStreamTicket(c *gin.Context) {
	if c.GetBool(byTicketKey) {
		s.writeErr(c, forbidden("ticket", "a stream ticket cannot buy another; send the bearer token"))
		return
	}
	t, ok := s.tickets.issue(c.GetString(tokenKey))
	if !ok {
		c.Header("Retry-After", strconv.Itoa(int(StreamTicketTTL.Seconds())))
		s.writeErr(c, newErr(http.StatusTooManyRequests, CodeTooMany, "", "too many stream tickets wait on node %s (at most %d, %d per token); use one or retry when they expire",
			s.cfg.NodeName, maxTickets, maxTicketsPerToken))
		return
	}
	c.JSON(http.StatusCreated, t)
}

// isStream reports whether the request opens an event stream, the only
// requests a ticket may authenticate.
func isStream(c *gin.Context) bool {
	if c.Request.Method != http.MethodGet {
		return false
	}
	if c.FullPath() == apiPrefix+"/events" {
		return true
	}
	// A watch is of a list: /api/v1/<kind>, nothing under it (a ticket
	// opened a machine's logs or shell, or read one object, given
	// ?watch=true).
	if _, ok := types.KindForPlural(strings.TrimPrefix(c.FullPath(), apiPrefix+"/")); !ok {
		return false
	}
	on, err := strconv.ParseBool(c.Query("watch"))
	return err == nil && on
}
