package openapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json/jsontext"
	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/types"
)

// MaxBodyBytes is the largest request body the API reads.
const MaxBodyBytes = 1 << 20

// readBody reads the request body up to MaxBodyBytes; a larger body is an
// *http.MaxBytesError (413). A body that did not arrive by the deadline
// bodyDeadline set is a 408 (timeout is that deadline's, for the message).
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The body was not read to its end: bodyDeadline closes the
			// connection after the answer.
			return nil, newErr(http.StatusRequestTimeout, CodeTimeout, "", "the request body did not arrive within %s", timeout)
		}
		return nil, badRequest("", "read body: %v", err)
	}
	if err := uniqueNames(b); err != nil {
		return nil, err
	}
	return b, nil
}

// uniqueNames refuses a JSON body in which an object names a member twice
// ({"user": "alice", "user": "bob"}): decoders disagree on which one counts
// (encoding/json and goccy take the last, others the first), so a check
// made on one reading could be passed by a value stored from another. The
// error names the member. A body that is not JSON at all passes: its decoder
// says what is wrong with it.
func uniqueNames(body []byte) error {
	if len(body) == 0 || jsontext.Value(body).IsValid() {
		return nil // the common case, without an allocation
	}
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) || !errors.Is(se.Err, jsontext.ErrDuplicateName) {
		return nil
	}
	return badRequest(pointerField(se.JSONPointer), "is given twice in one JSON object")
}

// pointerField turns a JSON pointer (/metadata/labels/a~1b, /items/0) into
// the field notation of the API's errors (metadata.labels.a/b, items[0]).
func pointerField(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// bodyDeadline gives a request's body BodyTimeout from its headers to
// arrive, whatever the route and whether or not the request has a token: it
// sets the connection's read deadline and clears it once the body has been
// read to its end. A request without a body gets none, so event streams run
// on (a read deadline that passes while net/http waits on the connection
// cancels the request).
//
// A response written before the body was read to its end (401, 404, 413,
// 408...) says Connection: close: net/http would otherwise read the rest of
// the body before answering, for as long as the client took to send it. It
// still reads it after the answer, up to the deadline, then closes the
// connection.
func (s *Server) bodyDeadline(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody {
		c.Next()
		return
	}
	body := &deadlineBody{ReadCloser: r.Body, conn: conn(r, c.Writer)}
	// Best effort: a writer that cannot set deadlines (a test recorder)
	// reads without one.
	_ = body.conn.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	r.Body = body
	w := &unreadBodyWriter{ResponseWriter: c.Writer, body: body}
	c.Writer = w
	c.Next()
	// gin writes a header the handlers did not write itself, past this
	// writer.
	w.beforeHeader()
}

// deadlineBody is a request body that clears the connection's read deadline
// once it is read to its end.
type deadlineBody struct {
	io.ReadCloser
	conn *http.ResponseController
	done atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done.Swap(true) {
		_ = b.conn.SetReadDeadline(time.Time{})
	}
	return n, err
}

// unreadBodyWriter answers with Connection: close when the request's body
// has not been read to its end by the time the header is written.
type unreadBodyWriter struct {
	gin.ResponseWriter
	body *deadlineBody
}

// beforeHeader marks the response Connection: close if its header is not
// written yet and the body was not read to its end.
func (w *unreadBodyWriter) beforeHeader() {
	if !w.Written() && !w.body.done.Load() {
		w.Header().Set("Connection", "close")
	}
}

func (w *unreadBodyWriter) WriteHeaderNow() {
	w.beforeHeader()
	w.ResponseWriter.WriteHeaderNow()
}

func (w *unreadBodyWriter) Write(b []byte) (int, error) {
	w.beforeHeader()
	return w.ResponseWriter.Write(b)
}

func (w *unreadBodyWriter) WriteString(s string) (int, error) {
	w.beforeHeader()
	return w.ResponseWriter.WriteString(s)
}

func (w *unreadBodyWriter) Flush() {
	w.beforeHeader()
	w.ResponseWriter.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *unreadBodyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decodeObject decodes body into a new object of kind, strictly: one JSON object,
// no unknown fields (matched exactly, not case-insensitively as encoding/json
// would), a "kind" that is absent or equal to kind, and every value of the right
// type. Errors are *apiError naming the offending field. The object is not
// validated. A string that is not UTF-8 is refused, never stored with
// U+FFFD in place of what was sent.
func decodeObject(kind string, body []byte) (types.Object, error) {
	if err := checkUTF8(body); err != nil {
		return nil, err
	}
	if obj, ok := decodeObjectFast(kind, body); ok {
		return obj, nil
	}
	return decodeObjectChecked(kind, body)
}

// decodeObjectFast is decodeObject for a body that passes every check,
// decoded with goccy (a third of a node's CPU for a create went into
// encoding/json's three passes); false for anything else, whose error
// decodeObjectChecked then names. FuzzDecodeFastMatchesChecked holds the
// two to the same objects.
func decodeObjectFast(kind string, body []byte) (types.Object, bool) {
	var generic map[string]any
	if err := fastjson.Unmarshal(body, &generic); err != nil || generic == nil {
		return nil, false
	}
	if k, ok := generic["kind"]; ok && k != kind {
		return nil, false
	}
	obj, err := types.New(kind)
	if err != nil {
		return nil, false
	}
	if unknownField(generic, reflect.TypeOf(obj).Elem(), "") != "" {
		return nil, false
	}
	if err := fastjson.Unmarshal(body, obj); err != nil {
		return nil, false
	}
	enc, err := fastjson.Marshal(obj)
	if err != nil || len(enc) > maxObjectBytes {
		return nil, false
	}
	types.Upgrade(obj)
	return obj, true
}

// decodeObjectChecked is decodeObject with encoding/json's strict checks,
// whose errors name the field.
func decodeObjectChecked(kind string, body []byte) (types.Object, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("", "request body is empty; want a JSON %s", kind)
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("", "unexpected data after the JSON object")
	}
	m, ok := generic.(map[string]any)
	if !ok {
		return nil, badRequest("", "request body must be a JSON object, got %s", jsonType(generic))
	}
	if k, ok := m["kind"]; ok {
		if s, _ := k.(string); s != kind {
			return nil, badRequest("kind", "must be absent or %q, got %s", kind, compact(k))
		}
	}
	obj, err := types.New(kind)
	if err != nil {
		return nil, newErr(http.StatusNotFound, CodeNotFound, "", "%v", err)
	}
	t := reflect.TypeOf(obj).Elem()
	if f := unknownField(generic, t, ""); f != "" {
		return nil, badRequest(f, "unknown field %q", f)
	}
	strict := json.NewDecoder(bytes.NewReader(body))
	strict.DisallowUnknownFields()
	if err := strict.Decode(obj); err != nil {
		field := locate(generic, t, "")
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if field == "" {
				field = te.Field
			}
			return nil, badRequest(field, "want %s, got JSON %s", types.DescribeType(te.Type), te.Value)
		}
		return nil, badRequest(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	// A value that decodes but cannot be encoded again (a time whose year leaves
	// 0..9999) would fail later in the store; refuse it here.
	enc, err := json.Marshal(obj)
	if err != nil {
		return nil, badRequest(locate(generic, t, ""), "cannot be stored: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(enc) > maxObjectBytes {
		return nil, tooLarge(len(enc))
	}
	types.Upgrade(obj)
	return obj, nil
}

// checkUTF8 refuses a body with a string that a decode would change: bytes
// that are not UTF-8, or an escaped lone surrogate (\ud800), both decoded
// as U+FFFD. The error names the string's field, or the object's for a
// key. A body that is not JSON passes, for the decode to say so.
func checkUTF8(body []byte) error {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\ud`)) && !bytes.Contains(body, []byte(`\uD`)) {
		return nil
	}
	// One frame per open object or array: the key or index being read.
	type frame struct {
		obj, atKey bool
		key        string
		idx        int
	}
	var stack []frame
	path := func() string {
		p := ""
		for _, f := range stack {
			switch {
			case !f.obj:
				p = indexPath(p, f.idx)
			case !f.atKey:
				p = joinPath(p, f.key)
			}
		}
		return p
	}
	// next moves the innermost frame past the value just read.
	next := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.obj {
			f.atKey = true
		} else {
			f.idx++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, frame{obj: t == '{', atKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				next()
			}
		case string:
			changed := replaced(body[start:dec.InputOffset()], t)
			if f := len(stack) - 1; f >= 0 && stack[f].obj && stack[f].atKey {
				if changed {
					return badRequest(path(), "key %q is not UTF-8 text (U+FFFD marks what is not)", t)
				}
				stack[f].key, stack[f].atKey = t, false
				continue
			}
			if changed {
				return badRequest(path(), "must be UTF-8 text")
			}
			next()
		default:
			next()
		}
	}
}

// replaced reports whether decoding raw, the JSON text of a string (with
// what precedes it), put a U+FFFD into s that raw did not have, literally
// or as \ufffd.
func replaced(raw []byte, s string) bool {
	n := strings.Count(s, "\uFFFD")
	if n == 0 {
		return false
	}
	had := bytes.Count(raw, []byte("\uFFFD"))
	for i := 0; i < len(raw)-1; i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] == 'u' && i+6 <= len(raw) && strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
			had++
		}
		i++ // the escaped character is not a backslash that starts one
	}
	return n > had
}

func syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("", "malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badRequest("", "malformed JSON: unexpected end of input")
	}
	return badRequest("", "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// isLeaf reports whether t decodes itself (time, durations, versions, raw JSON)
// or takes any JSON, so its contents have no fields of their own to check.
func isLeaf(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Kind() == reflect.Interface || pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler)
}

// jsonFields returns the JSON names of t's fields and their types, flattening
// embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsByType.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := collectJSONFields(t)
	fieldsByType.Store(t, m)
	return m
}

// fieldsByType holds jsonFields' answers, which depend on the type alone:
// every request body's check asks for the same few types.
var fieldsByType sync.Map // reflect.Type -> map[string]reflect.Type, read-only

func collectJSONFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range collectJSONFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// joinPath is the path of key under path. An empty key is written "" so
// that the path of a top-level empty key is not the empty path, which
// unknownField's callers read as "none".
func joinPath(path, key string) string {
	if key == "" {
		key = `""`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// unknownField returns the JSON path of the first key of v that t has no field
// for, or "". Values of the wrong JSON type are left to the typed decode.
func unknownField(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isLeaf(t) {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				return joinPath(path, k)
			}
			if f := unknownField(m[k], ft, joinPath(path, k)); f != "" {
				return f
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		for _, k := range sortedKeys(m) {
			if f := unknownField(m[k], t.Elem(), joinPath(path, k)); f != "" {
				return f
			}
		}
	case reflect.Slice, reflect.Array:
		a, ok := v.([]any)
		if !ok {
			return ""
		}
		for i, e := range a {
			if f := unknownField(e, t.Elem(), indexPath(path, i)); f != "" {
				return f
			}
		}
	}
	return ""
}

// locate returns the JSON path of the deepest value in v that does not decode
// into (and encode again from) its Go type t; path itself when no part of v is
// to blame.
func locate(v any, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isLeaf(t) {
		return path
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return path
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			if ft, ok := fields[k]; ok && !roundTrips(m[k], ft) {
				return locate(m[k], ft, joinPath(path, k))
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return path
		}
		for _, k := range sortedKeys(m) {
			if !roundTrips(m[k], t.Elem()) {
				return locate(m[k], t.Elem(), joinPath(path, k))
			}
		}
	case reflect.Slice, reflect.Array:
		a, ok := v.([]any)
		if !ok {
			return path
		}
		for i, e := range a {
			if !roundTrips(e, t.Elem()) {
				return locate(e, t.Elem(), indexPath(path, i))
			}
		}
	}
	return path
}

// roundTrips reports whether the generic JSON value v decodes into t and encodes again.
func roundTrips(v any, t reflect.Type) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	p := reflect.New(t)
	if err := json.Unmarshal(b, p.Interface()); err != nil {
		return false
	}
	_, err = json.Marshal(p.Interface())
	return err == nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}

// compact renders a generic JSON value for a message, cut short.
func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
