package shellframe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frame builds one frame by hand, as the format says, not as Writer does.
func frame(typ byte, payload string) string {
	n := len(payload)
	return string([]byte{typ, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + payload
}

// readAll reads r to its end and returns the output, the exit and the
// error Read ended with (nil for io.EOF).
func readAll(r *Reader) (string, Exit, bool, error) {
	out, err := io.ReadAll(r)
	e, ok := r.Exit()
	return string(out), e, ok, err
}

// The wire format, byte for byte: what Writer sends is what the format
// says, and Reader reads it back.
func TestWriterWireFormat(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w *Writer) error
		want  string
	}{
		{"exit 0", func(w *Writer) error { return w.Exit(Exit{}) }, frame(TypeExit, "\x00")},
		{"output then exit 3", func(w *Writer) error {
			if _, err := w.Write([]byte("hello\n")); err != nil {
				return err
			}
			return w.Exit(Exit{Code: 3})
		}, frame(TypeOutput, "hello\n") + frame(TypeExit, "\x03")},
		{"killed", func(w *Writer) error { return w.Exit(Exit{Code: 137, Signal: "SIGKILL"}) }, frame(TypeExit, "\x89SIGKILL")},
		{"error", func(w *Writer) error { return w.Fail("no such container") }, frame(TypeError, "no such container")},
		{"empty write sends nothing", func(w *Writer) error {
			if _, err := w.Write(nil); err != nil {
				return err
			}
			return w.Exit(Exit{Code: 1})
		}, frame(TypeExit, "\x01")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, tc.write(NewWriter(&b)))
			assert.Equal(t, []byte(tc.want), b.Bytes())
		})
	}
}

// A write longer than a frame is split; the reader joins it again.
func TestLongWriteSplits(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	long := bytes.Repeat([]byte("0123456789abcdef"), MaxPayload/16*2+3) // two full frames and 48 bytes
	n, err := w.Write(long)
	require.NoError(t, err)
	assert.Equal(t, len(long), n)
	require.NoError(t, w.Exit(Exit{Code: 2}))
	assert.Equal(t, len(long)+3*HeaderLen+HeaderLen+1, b.Len(), "three output frames and the exit frame")
	assert.Equal(t, []byte{TypeOutput, 0, 1, 0, 0}, b.Bytes()[:HeaderLen], "a first frame of MaxPayload")
	out, e, ok, err := readAll(NewReader(&b))
	require.NoError(t, err)
	assert.Equal(t, string(long), out)
	assert.True(t, ok)
	assert.Equal(t, Exit{Code: 2}, e)
}

// Nothing goes out after the final frame: a late write of a driver's
// output copy is refused, and so is a second final frame.
func TestWriterFinished(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	require.NoError(t, w.Exit(Exit{Code: 3}))
	_, err := w.Write([]byte("late"))
	assert.ErrorIs(t, err, ErrFinished)
	assert.ErrorIs(t, w.Exit(Exit{}), ErrFinished)
	assert.ErrorIs(t, w.Fail("again"), ErrFinished)
	assert.Equal(t, frame(TypeExit, "\x03"), b.String())
}

// A keep-alive is an empty output frame, sent only when no output went
// since the last one; readers skip it, and nothing follows the final frame.
func TestWriterKeepAlive(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	require.NoError(t, w.KeepAlive())
	_, err := w.Write([]byte("out"))
	require.NoError(t, err)
	require.NoError(t, w.KeepAlive(), "output went: nothing to send")
	require.NoError(t, w.KeepAlive())
	require.NoError(t, w.Exit(Exit{Code: 4}))
	assert.ErrorIs(t, w.KeepAlive(), ErrFinished)
	assert.Equal(t, frame(TypeOutput, "")+frame(TypeOutput, "out")+frame(TypeOutput, "")+frame(TypeExit, "\x04"), b.String())
	out, e, ok, err := readAll(NewReader(&b))
	require.NoError(t, err)
	assert.Equal(t, "out", out)
	assert.True(t, ok)
	assert.Equal(t, Exit{Code: 4}, e)

	// A connection that fails fails the keep-alive, and ends the stream.
	cut := errors.New("connection reset by peer")
	w = NewWriter(&failing{cut})
	assert.ErrorIs(t, w.KeepAlive(), cut)
	assert.ErrorIs(t, w.KeepAlive(), ErrFinished)
}

// An exit the format cannot carry is refused, naming what is wrong, before
// anything is sent.
func TestWriterRefusesBadExit(t *testing.T) {
	for _, tc := range []struct {
		exit  Exit
		field string
	}{
		{Exit{Code: -1}, "exit code"},
		{Exit{Code: 256}, "exit code"},
		{Exit{Code: 130, Signal: "SIG INT"}, "exit signal"},
		{Exit{Code: 130, Signal: strings.Repeat("S", MaxSignalLen+1)}, "exit signal"},
	} {
		var b bytes.Buffer
		w := NewWriter(&b)
		err := w.Exit(tc.exit)
		require.Error(t, err, "%+v", tc.exit)
		assert.True(t, strings.HasPrefix(err.Error(), tc.field+":"), "%v", err)
		assert.Zero(t, b.Len())
		require.NoError(t, w.Exit(Exit{Code: 1}), "the writer is still usable")
	}
}

// Fail cuts a long message short at a character's end and mends bad UTF-8.
func TestWriterFailMessage(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, NewWriter(&b).Fail(strings.Repeat("é", maxErrorLen)+"\xff"))
	_, _, ok, err := readAll(NewReader(&b))
	assert.False(t, ok)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	assert.LessOrEqual(t, len(re.Message), maxErrorLen)
	assert.Equal(t, strings.Repeat("é", maxErrorLen/2), re.Message)
}

// What a reader makes of streams that end well, and of every way one can
// end badly.
func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stream  string
		out     string
		exit    *Exit
		remote  string
		noExit  bool
		badForm bool
	}{
		{name: "exit 0", stream: frame(TypeExit, "\x00"), exit: &Exit{}},
		{name: "output, exit 3", stream: frame(TypeOutput, "a") + frame(TypeOutput, "") + frame(TypeOutput, "bc") + frame(TypeExit, "\x03"),
			out: "abc", exit: &Exit{Code: 3}},
		{name: "killed by a signal", stream: frame(TypeOutput, "x") + frame(TypeExit, "\x8fSIGTERM"), out: "x", exit: &Exit{Code: 143, Signal: "SIGTERM"}},
		{name: "nothing after the final frame is read", stream: frame(TypeExit, "\x01") + "garbage", exit: &Exit{Code: 1}},
		{name: "error frame", stream: frame(TypeOutput, "x") + frame(TypeError, "exec failed"), out: "x", remote: "exec failed"},
		{name: "empty stream", stream: "", noExit: true},
		{name: "dropped between frames", stream: frame(TypeOutput, "abc"), out: "abc", noExit: true},
		{name: "dropped in a header", stream: frame(TypeOutput, "abc")[:3], noExit: true},
		{name: "dropped in output", stream: frame(TypeOutput, "abcdef")[:HeaderLen+2], out: "ab", noExit: true},
		{name: "dropped in the exit frame", stream: frame(TypeExit, "\x01SIGHUP")[:HeaderLen+3], noExit: true},
		{name: "unknown type", stream: frame(9, "x"), noExit: true, badForm: true},
		{name: "payload too long", stream: string([]byte{TypeOutput, 0, 1, 0, 1}), noExit: true, badForm: true},
		{name: "empty exit frame", stream: frame(TypeExit, ""), noExit: true, badForm: true},
		{name: "exit frame too long", stream: frame(TypeExit, "\x01"+strings.Repeat("S", MaxSignalLen+1)), noExit: true, badForm: true},
		{name: "bad signal name", stream: frame(TypeExit, "\x81SIG\nHUP"), noExit: true, badForm: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time too: a reader must not care how the
			// connection cuts the stream.
			for _, src := range []io.Reader{strings.NewReader(tc.stream), &oneByte{s: tc.stream}} {
				out, e, ok, err := readAll(NewReader(src))
				assert.Equal(t, tc.out, out)
				switch {
				case tc.exit != nil:
					require.NoError(t, err)
					assert.True(t, ok)
					assert.Equal(t, *tc.exit, e)
				case tc.remote != "":
					var re *RemoteError
					require.ErrorAs(t, err, &re)
					assert.Equal(t, tc.remote, re.Message)
					assert.False(t, ok)
				case tc.noExit:
					assert.ErrorIs(t, err, ErrNoExit)
					assert.Equal(t, tc.badForm, errors.Is(err, ErrMalformed), "%v", err)
					assert.False(t, ok)
				}
			}
		})
	}
}

// oneByte reads s a byte at a time.
type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if o.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.s[0]
	o.s = o.s[1:]
	return 1, nil
}

// A connection's read error ends the stream, wrapped in ErrNoExit.
func TestReaderConnectionError(t *testing.T) {
	cut := errors.New("connection reset by peer")
	r := NewReader(io.MultiReader(strings.NewReader(frame(TypeOutput, "abc")), &failing{cut}))
	out, err := io.ReadAll(r)
	assert.Equal(t, "abc", string(out))
	assert.ErrorIs(t, err, ErrNoExit)
	assert.ErrorIs(t, err, cut)
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func (f *failing) Write([]byte) (int, error) { return 0, f.err }

// Concurrent writes go out as whole frames: the reader gets every byte of
// each, whatever the order.
func TestWriterConcurrent(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	var wg sync.WaitGroup
	for _, c := range "abcdefgh" {
		wg.Go(func() {
			for range 100 {
				_, _ = w.Write(bytes.Repeat([]byte{byte(c)}, 10))
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Exit(Exit{Code: 4}))
	out, e, ok, err := readAll(NewReader(&b))
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 4, e.Code)
	for _, c := range "abcdefgh" {
		assert.Equal(t, 1000, strings.Count(out, string(c)))
		assert.Contains(t, out, strings.Repeat(string(c), 10), "a write stays whole")
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(frame(TypeOutput, "hello\n") + frame(TypeExit, "\x03")))
	f.Add([]byte(frame(TypeExit, "\x89SIGKILL")))
	f.Add([]byte(frame(TypeOutput, "x") + frame(TypeError, "exec failed")))
	f.Add([]byte(frame(TypeOutput, "abc")))
	f.Add([]byte{TypeOutput, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		// Nothing panics or reads past the final frame; what decodes
		// encodes back to a stream that decodes the same.
		src := bytes.NewReader(stream)
		r := NewReader(src)
		out, err := io.ReadAll(r)
		require.LessOrEqual(t, len(out), len(stream))
		e, ok := r.Exit()
		var re *RemoteError
		switch {
		case ok:
			require.NoError(t, err)
			require.True(t, e.Code >= 0 && e.Code <= 255)
		case errors.As(err, &re):
			require.True(t, utf8.ValidString(re.Message))
		default:
			require.ErrorIs(t, err, ErrNoExit)
			return
		}
		// The final frame ended where the reader stopped reading.
		consumed := stream[:len(stream)-src.Len()]
		prefix := NewReader(bytes.NewReader(consumed))
		out1, err1 := io.ReadAll(prefix)
		assert.Equal(t, out, out1)
		assert.Equal(t, err, err1)

		var b bytes.Buffer
		w := NewWriter(&b)
		_, werr := w.Write(out)
		require.NoError(t, werr)
		if ok {
			require.NoError(t, w.Exit(e))
		} else {
			require.NoError(t, w.Fail(re.Message))
		}
		again := NewReader(&b)
		out2, err2 := io.ReadAll(again)
		assert.Equal(t, out, out2)
		if ok {
			require.NoError(t, err2)
			e2, ok2 := again.Exit()
			assert.True(t, ok2)
			assert.Equal(t, e, e2)
			return
		}
		var re2 *RemoteError
		require.ErrorAs(t, err2, &re2)
		assert.True(t, strings.HasPrefix(re.Message, re2.Message), "a message is at most cut short")
	})
}

// The errors of a stream that ends early say how it ended.
func TestReaderMessages(t *testing.T) {
	for stream, want := range map[string]string{
		"":                                "no exit status from the shell: the connection ended before it",
		frame(TypeOutput, "abc")[:7]:      "no exit status from the shell: the connection ended in a frame: unexpected EOF",
		frame(TypeOutput, "abc")[:3]:      "no exit status from the shell: the connection ended in a frame: unexpected EOF",
		frame(TypeExit, "\x01SIG")[:7]:    "no exit status from the shell: the connection ended in a frame: unexpected EOF",
		frame(7, ""):                      "no exit status from the shell: malformed shell frame: unknown frame type 7",
		frame(TypeError, "disk full\xff"): "disk full\uFFFD",
	} {
		_, err := io.ReadAll(NewReader(strings.NewReader(stream)))
		assert.EqualError(t, err, want, "%q", stream)
	}
}
