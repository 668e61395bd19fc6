package gcetest

import (
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/api/compute/v1"
)

// consoleMax is how much of a serial port Compute keeps: the last 1 MB.
const consoleMax = 1 << 20

// bootLine is what a new instance prints first, so its console is never empty.
func bootLine(name string) string {
	return fmt.Sprintf("[    0.000000] Linux version 6.1.0-gcetest (%s) booting\n", name)
}

// SetConsole replaces an instance's serial port 1 output, as if it had
// printed text and nothing before; false when there is no such instance.
func (s *Server) SetConsole(name, text string) bool {
	return s.editConsole(name, func(console) console { return console{text: text} })
}

// AppendConsole adds text to an instance's serial port 1 output; false
// when there is no such instance.
func (s *Server) AppendConsole(name, text string) bool {
	return s.editConsole(name, func(c console) console {
		c.text += text
		return c
	})
}

func (s *Server) editConsole(name string, fn func(console) console) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, in := range s.instances {
		if in.Name == name {
			s.consoles[k] = fn(s.consoles[k]).trim()
			return true
		}
	}
	return false
}

// console is one instance's serial port 1: text holds what is kept, which
// starts at byte offset start of all the port ever printed.
type console struct {
	start int64
	text  string
}

// trim drops what is beyond what Compute keeps.
func (c console) trim() console {
	if cut := len(c.text) - consoleMax; cut > 0 {
		c.start, c.text = c.start+int64(cut), c.text[cut:]
	}
	return c
}

// serialPort answers instances.getSerialPortOutput: the port's output from
// byte offset start (from the oldest byte kept when start is older), and
// next, the offset to ask for next time. Ports 2 to 4 print nothing.
func (s *Server) serialPort(r *http.Request) (any, error) {
	q := r.URL.Query()
	port, start := int64(1), int64(0)
	var err error
	if v := q.Get("port"); v != "" {
		if port, err = strconv.ParseInt(v, 10, 64); err != nil || port < 1 || port > 4 {
			return nil, &apiError{http.StatusBadRequest, "invalid", "Invalid value for field 'port': '" + v + "'. Must be between 1 and 4."}
		}
	}
	if v := q.Get("start"); v != "" {
		if start, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, &apiError{http.StatusBadRequest, "invalid", "Invalid value for field 'start': '" + v + "'."}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	key := r.PathValue("zone") + "/" + r.PathValue("name")
	in, ok := s.instances[key]
	if !ok {
		return nil, notFound("projects/" + r.PathValue("project") + "/zones/" + key)
	}
	c := s.consoles[key]
	if port != 1 {
		c = console{}
	}
	end := c.start + int64(len(c.text))
	start = min(max(start, c.start), end)
	return &compute.SerialPortOutput{Kind: "compute#serialPortOutput", Contents: c.text[start-c.start:], Start: start, Next: end,
		SelfLink: in.SelfLink + "/serialPort?port=" + strconv.FormatInt(port, 10)}, nil
}
