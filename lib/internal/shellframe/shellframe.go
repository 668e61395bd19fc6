// Package shellframe is the framing of a machine shell's output under the
// Upgrade token hf-shell.v2: what the shell writes goes in output frames,
// then one final frame says how the shell ended. The client's input is not
// framed: it stays raw bytes, ended by a half-close.
//
//	+--------+---------------------+----------------+
//	| type   | length              | payload        |
//	| 1 byte | 4 bytes, big-endian | length bytes   |
//	+--------+---------------------+----------------+
//
//	type 1, output: bytes the shell wrote (its stdout and stderr, or its
//	        terminal), at most MaxPayload of them. An empty one is a
//	        keep-alive (Writer.KeepAlive), which readers skip: sent while
//	        the shell is quiet, it fails once the client is gone.
//	type 2, exit (final): the shell's exit status in one byte (0-255); when
//	        a signal killed the shell, the signal's name follows in ASCII
//	        ("SIGKILL") and the status is 128 plus the signal's number, as
//	        shells report it.
//	type 3, error (final): the shell has no exit status (it could not start
//	        after the upgrade, or its node ended it); UTF-8 text says why.
//
// Nothing follows a final frame. A stream that ends without one lost the
// shell's status: its connection dropped.
package shellframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// Upgrade tokens of a machine shell.
const (
	// Protocol carries the shell's output in this package's frames.
	Protocol = "hf-shell.v2"
	// RawProtocol carries the shell's output as raw bytes, with no exit
	// status: all that nodes and clients from before Protocol speak.
	RawProtocol = "hf-shell"
)

// Frame types.
const (
	TypeOutput byte = 1
	TypeExit   byte = 2
	TypeError  byte = 3
)

const (
	// HeaderLen is the length of a frame's header: its type and length.
	HeaderLen = 5
	// MaxPayload is the longest payload a frame may have.
	MaxPayload = 1 << 16
	// MaxSignalLen is the longest signal name an exit frame may carry.
	MaxSignalLen = 32
	// maxErrorLen is the longest message Writer.Fail sends.
	maxErrorLen = 1024
)

// Exit is how a shell ended.
type Exit struct {
	// Code is the shell's exit status, 0 to 255; for a shell killed by a
	// signal, 128 plus the signal's number, as shells report it.
	Code int
	// Signal names the signal that killed the shell ("SIGKILL"); empty
	// when the shell exited, or when its node cannot tell (docker's exec
	// reports only the code).
	Signal string
}

// Errors of a stream that ends without its final frame, or with a frame
// this package does not know.
var (
	// ErrNoExit: the stream ended, or could not be read, before its final
	// frame.
	ErrNoExit = errors.New("no exit status from the shell")
	// ErrMalformed: a frame breaks the format.
	ErrMalformed = errors.New("malformed shell frame")
	// ErrFinished is what Writer returns once it sent its final frame.
	ErrFinished = errors.New("the shell's stream has ended")
)

// RemoteError is the message of an error frame: the shell's node says why
// the shell has no exit status.
type RemoteError struct {
	Message string
}

func (e *RemoteError) Error() string { return e.Message }

// validSignal reports whether s can be an exit frame's signal name: 1 to
// MaxSignalLen letters, digits, '+' or '-' ("SIGKILL", "SIGRTMIN+3").
func validSignal(s string) bool {
	if len(s) == 0 || len(s) > MaxSignalLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// Writer frames a shell's output onto w. Its methods may be called
// concurrently: a driver's copy of the shell's output may still be writing
// when the caller sends the exit frame, and what it writes after that is
// refused (ErrFinished).
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	buf  []byte
	done bool
	// wrote: output went since the last KeepAlive.
	wrote bool
}

// NewWriter returns a Writer that sends its frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sends p in output frames of at most MaxPayload bytes each.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxPayload)]
		if err := w.frame(TypeOutput, chunk); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
		w.wrote = true
	}
	return n, nil
}

// KeepAlive sends an empty output frame, which readers skip, unless
// output went since the last call: a connection that carries output needs
// no other. Sent while the shell is quiet, it tells whether the
// connection still works: once the client is gone, a write fails (the
// first may still go out, and draw the peer's reset). ErrFinished after
// the final frame.
func (w *Writer) KeepAlive() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wrote && !w.done {
		w.wrote = false
		return nil
	}
	return w.frame(TypeOutput, nil)
}

// Validate says why an exit frame cannot carry e, if it cannot: a code out
// of 0-255, or a signal name that is not one.
func (e Exit) Validate() error {
	if e.Code < 0 || e.Code > 255 {
		return fmt.Errorf("exit code: must be 0 to 255, got %d", e.Code)
	}
	if e.Signal != "" && !validSignal(e.Signal) {
		return fmt.Errorf("exit signal: must be 1 to %d letters, digits, '+' or '-', got %q", MaxSignalLen, e.Signal)
	}
	return nil
}

// Exit sends the final exit frame of e. An e that fails Validate is
// refused before anything is sent.
func (w *Writer) Exit(e Exit) error {
	if err := e.Validate(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.frame(TypeExit, append([]byte{byte(e.Code)}, e.Signal...))
	w.done = true
	return err
}

// Fail sends the final error frame: the shell has no exit status, and msg
// says why. A long msg is cut short; invalid UTF-8 in it is replaced.
func (w *Writer) Fail(msg string) error {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > maxErrorLen {
		msg = msg[:maxErrorLen]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.frame(TypeError, []byte(msg))
	w.done = true
	return err
}

// frame writes one frame in one write, w.mu held.
func (w *Writer) frame(typ byte, payload []byte) error {
	if w.done {
		return ErrFinished
	}
	w.buf = append(w.buf[:0], typ, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(w.buf[1:HeaderLen], uint32(len(payload)))
	w.buf = append(w.buf, payload...)
	_, err := w.w.Write(w.buf)
	if err != nil {
		// Part of a frame may have gone: nothing after it could be read.
		w.done = true
	}
	return err
}

// Reader reads a shell's output from the frames on r. Read returns the
// output, then io.EOF after the exit frame (see Exit); after an error frame
// it returns a *RemoteError, and for a stream that ends or fails before its
// final frame an error wrapping ErrNoExit (and ErrMalformed for a frame
// that breaks the format). It never reads past the final frame.
type Reader struct {
	r    io.Reader
	left int   // output bytes left in the current frame
	end  error // once set, what every Read returns
	exit Exit
	hdr  [HeaderLen]byte
}

// NewReader returns a Reader of the frames on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Exit returns how the shell ended, once Read returned io.EOF; ok is false
// before, and for a stream that ended otherwise.
func (r *Reader) Exit() (e Exit, ok bool) {
	if r.end != io.EOF {
		return Exit{}, false
	}
	return r.exit, true
}

// Read reads the shell's output.
func (r *Reader) Read(p []byte) (int, error) {
	for r.end == nil && r.left == 0 {
		r.next()
	}
	if r.end != nil {
		return 0, r.end
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.r.Read(p[:min(len(p), r.left)])
	r.left -= n
	switch {
	case err == io.EOF && r.left == 0:
	case err == io.EOF:
		r.end = fmt.Errorf("%w: the connection ended in a frame: %w", ErrNoExit, io.ErrUnexpectedEOF)
	case err != nil:
		r.end = fmt.Errorf("%w: %w", ErrNoExit, err)
	}
	if n > 0 {
		return n, nil
	}
	return 0, r.end
}

// next reads the next frame's header, and a final frame's payload: it sets
// r.left for an output frame, r.end otherwise.
func (r *Reader) next() {
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		switch err {
		case io.EOF:
			r.end = fmt.Errorf("%w: the connection ended before it", ErrNoExit)
		case io.ErrUnexpectedEOF:
			r.end = fmt.Errorf("%w: the connection ended in a frame: %w", ErrNoExit, err)
		default:
			r.end = fmt.Errorf("%w: %w", ErrNoExit, err)
		}
		return
	}
	typ, n := r.hdr[0], binary.BigEndian.Uint32(r.hdr[1:])
	if n > MaxPayload {
		r.end = fmt.Errorf("%w: %w: a payload of %d bytes, more than %d", ErrNoExit, ErrMalformed, n, MaxPayload)
		return
	}
	switch typ {
	case TypeOutput:
		r.left = int(n)
		return
	case TypeExit:
		if n < 1 || n > 1+MaxSignalLen {
			r.end = fmt.Errorf("%w: %w: an exit frame of %d bytes", ErrNoExit, ErrMalformed, n)
			return
		}
	case TypeError:
	default:
		r.end = fmt.Errorf("%w: %w: unknown frame type %d", ErrNoExit, ErrMalformed, typ)
		return
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(r.r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			r.end = fmt.Errorf("%w: the connection ended in a frame: %w", ErrNoExit, io.ErrUnexpectedEOF)
		} else {
			r.end = fmt.Errorf("%w: %w", ErrNoExit, err)
		}
		return
	}
	if typ == TypeError {
		r.end = &RemoteError{Message: strings.ToValidUTF8(string(payload), "\uFFFD")}
		return
	}
	e := Exit{Code: int(payload[0]), Signal: string(payload[1:])}
	if e.Signal != "" && !validSignal(e.Signal) {
		r.end = fmt.Errorf("%w: %w: signal name %q", ErrNoExit, ErrMalformed, e.Signal)
		return
	}
	r.exit, r.end = e, io.EOF
}
