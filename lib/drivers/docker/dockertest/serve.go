package dockertest

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// FileServer serves one file over HTTP on 127.0.0.1 and counts the requests.
type FileServer struct {
	// URL is the file's address.
	URL  string
	hits atomic.Int64
}

// Hits returns how many requests the server answered.
func (s *FileServer) Hits() int64 { return s.hits.Load() }

// ServeFile serves path at http://127.0.0.1:<port>/<base name> until the test
// ends and returns the URL.
func ServeFile(t testing.TB, path string) string {
	t.Helper()
	return NewFileServer(t, path).URL
}

// NewFileServer serves path like ServeFile and returns the server, so the test
// can count downloads. Any other path answers 404.
func NewFileServer(t testing.TB, path string) *FileServer {
	t.Helper()
	fs := &FileServer{}
	name := "/" + filepath.Base(path)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.hits.Add(1)
		if r.URL.Path != name {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, path)
	}))
	t.Cleanup(srv.Close)
	fs.URL = srv.URL + name
	return fs
}
