package openapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/types"
)

// AuditRecord is one write through the API (types.AuditRecord).
type AuditRecord = types.AuditRecord

// DefaultAuditMaxBytes is the size at which the audit file is rotated
// (the one before is kept as <file>.1).
const DefaultAuditMaxBytes = 64 << 20

// auditLog keeps the records of this node's API writes in a JSON-lines
// file (and, with no file, the last ones in memory), for GET /api/v1/audit.
type auditLog struct {
	mu       sync.Mutex
	path     string
	maxBytes int64
	f        *os.File
	size     int64
	mem      []AuditRecord // no file: the last memKeep records
}

const memKeep = 10000

func openAuditLog(path string, maxBytes int64) (*auditLog, error) {
	a := &auditLog{path: path, maxBytes: maxBytes}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultAuditMaxBytes
	}
	if path == "" {
		return a, nil
	}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *auditLog) open() error {
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open audit log: %w", err)
	}
	a.f, a.size = f, fi.Size()
	return nil
}

// add appends r; a failure to write is returned for the caller to log.
func (a *auditLog) add(r AuditRecord) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.path == "" {
		if len(a.mem) >= memKeep {
			a.mem = append(a.mem[:0], a.mem[len(a.mem)-memKeep/2:]...)
		}
		a.mem = append(a.mem, r)
		return nil
	}
	if a.f == nil {
		return errors.New("audit log closed")
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if a.size+int64(len(line))+1 > a.maxBytes && a.size > 0 {
		if err := a.rotate(); err != nil {
			return err
		}
	}
	n, err := a.f.Write(append(line, '\n'))
	a.size += int64(n)
	return err
}

func (a *auditLog) rotate() error {
	_ = a.f.Close()
	a.f = nil
	if err := os.Rename(a.path, a.path+".1"); err != nil {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	return a.open()
}

func (a *auditLog) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// auditFilter selects records; empty fields select all.
type auditFilter struct {
	user, kind, name string
	since            time.Time
	limit            int
}

func (f auditFilter) match(r AuditRecord) bool {
	return (f.user == "" || r.User == f.user) && (f.kind == "" || r.Kind == f.kind) &&
		(f.name == "" || r.Name == f.name) && (f.since.IsZero() || !r.Time.Before(f.since))
}

// query returns the last f.limit matching records, oldest first.
func (a *auditLog) query(f auditFilter) ([]AuditRecord, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []AuditRecord
	keep := func(r AuditRecord) {
		if f.match(r) {
			out = append(out, r)
			if len(out) > 2*f.limit {
				out = append(out[:0], out[len(out)-f.limit:]...)
			}
		}
	}
	if a.path == "" {
		for _, r := range a.mem {
			keep(r)
		}
	} else {
		for _, p := range []string{a.path + ".1", a.path} {
			if err := scanAudit(p, keep); err != nil {
				return nil, err
			}
		}
	}
	if len(out) > f.limit {
		out = out[len(out)-f.limit:]
	}
	return out, nil
}

func scanAudit(path string, fn func(AuditRecord)) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r AuditRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			fn(r)
		}
	}
	return sc.Err()
}

// auditNameKey holds, in a create's context, the name of the object the
// body names, for its audit record.
const auditNameKey = "hf.audit.name"

// audit records every write through the API with who made it (the token's
// name, role and user) and how it ended, in the log and the audit record.
func (s *Server) audit(c *gin.Context) {
	c.Next()
	if m := c.Request.Method; m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions {
		return
	}
	p := principal(c)
	s.log.Info("api write", "method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(),
		"token", p.Name, "role", p.Role, "user", p.User)
	r := AuditRecord{Time: s.cfg.Now().UTC(), Node: s.cfg.NodeName, Method: c.Request.Method, Path: c.Request.URL.Path,
		Status: c.Writer.Status(), Token: p.Name, Role: p.Role, User: p.User}
	parts := strings.Split(strings.TrimPrefix(c.Request.URL.Path, apiPrefix+"/"), "/")
	if kind, ok := types.KindForPlural(parts[0]); ok {
		r.Kind = kind
		if len(parts) > 1 && types.ValidateName("name", parts[1]) == nil {
			r.Name = parts[1]
		}
	}
	if r.Name == "" {
		r.Name = c.GetString(auditNameKey)
	}
	if err := s.auditLog.add(r); err != nil {
		s.log.Error("audit record not kept", "err", err)
	}
}

// auditList answers GET /api/v1/audit: this node's records of API writes,
// newest last, filtered by ?user, ?kind, ?name and ?since (RFC 3339), at
// most ?limit (default 100, at most 10000). Admin only.
func (s *Server) auditList(c *gin.Context) {
	p := principal(c)
	if !p.IsAdmin() {
		s.writeErr(c, forbidden("", "role %s may not read the audit record", p.Role))
		return
	}
	f := auditFilter{user: c.Query("user"), name: c.Query("name"), limit: 100}
	if k := c.Query("kind"); k != "" {
		kind, ok := types.KindForPlural(k)
		if !ok {
			s.writeErr(c, badRequest("kind", "unknown kind %q", k))
			return
		}
		f.kind = kind
	}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			s.writeErr(c, badRequest("since", "want an RFC 3339 time, got %q", v))
			return
		}
		f.since = t
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			s.writeErr(c, badRequest("limit", "must be 1 to 10000, got %q", v))
			return
		}
		f.limit = n
	}
	recs, err := s.auditLog.query(f)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if recs == nil {
		recs = []AuditRecord{}
	}
	c.JSON(http.StatusOK, gin.H{"items": recs})
}
