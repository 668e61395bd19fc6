package ec2test

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"time"
)

// consoleMax is how much of the console GetConsoleOutput returns: EC2 keeps
// the last 64 KB, so a long-running instance's answer is a sliding window.
const consoleMax = 64 << 10

// bootLine is what a new instance prints first, so its console is never empty.
func bootLine(id string) string {
	return fmt.Sprintf("[    0.000000] Linux version 6.8.0-ec2test (%s) booting\n", id)
}

// SetConsole replaces an instance's console output; false when there is no
// such instance.
func (s *Server) SetConsole(id, text string) bool {
	return s.editConsole(id, func(string) string { return text })
}

// AppendConsole adds text to an instance's console output; false when there
// is no such instance.
func (s *Server) AppendConsole(id, text string) bool {
	return s.editConsole(id, func(old string) string { return old + text })
}

func (s *Server) editConsole(id string, fn func(string) string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if ok {
		in.Console, in.consoleAt = fn(in.Console), s.now()
	}
	return ok
}

type getConsoleOutputResponse struct {
	XMLName    xml.Name `xml:"GetConsoleOutputResponse"`
	Xmlns      string   `xml:"xmlns,attr"`
	RequestID  string   `xml:"requestId"`
	InstanceID string   `xml:"instanceId"`
	Timestamp  string   `xml:"timestamp"`
	Output     string   `xml:"output,omitempty"`
}

// getConsoleOutput answers with the last consoleMax bytes of the console,
// base64-encoded as EC2 sends it. Latest is recorded, not needed: the
// double's console is always current.
func (s *Server) getConsoleOutput(f map[string][]string) (any, *apiError) {
	id := first(f["InstanceId"])
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok {
		return nil, &apiError{http.StatusBadRequest, "InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id)}
	}
	if first(f["Latest"]) == "true" {
		s.calls["GetConsoleOutput/Latest"]++
	}
	out := in.Console
	if len(out) > consoleMax {
		out = out[len(out)-consoleMax:]
	}
	return getConsoleOutputResponse{Xmlns: Namespace, RequestID: newID(""), InstanceID: id,
		Timestamp: in.consoleAt.UTC().Format(time.RFC3339), Output: base64.StdEncoding.EncodeToString([]byte(out))}, nil
}
