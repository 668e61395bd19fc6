package member

import (
	"bufio"
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/memberlist"
)

// A link is a long-lived TCP stream, dialled through memberlist's transport,
// that carries one member's messages to one peer: replication batches,
// election messages, anti-entropy. memberlist's SendReliable dials a new
// connection for every message (connect, accept and close on both sides,
// about a fifth of a three-node cluster's CPU under a burst of claims); a
// link is dialled once and each batch of messages waiting for it is one
// write.
//
// A link starts with a preamble in the clear, then frames:
//
//	preamble: magic(0xE8) version(1) flags(1) len(1) label len(1) from
//	hello:    a frame holding from again
//	frame:    len(4, big endian) body
//	body:     the message, or with a key: nonce(12) AES-GCM(message), with
//	          "hf-link" + label as additional data
//
// The magic byte is none that memberlist starts a stream with (its message
// types, the encryption versions and the label header), so the transport
// tells a link from memberlist's own streams by it. With a key every frame is
// sealed with the keyring's primary key and opened with any of its keys, as
// memberlist does for its messages; a member with a key refuses a link
// without one. The hello, a frame of at most helloMax bytes, must open and
// name the member the preamble names: until it has, a link is nobody's and
// may send no larger frame, so a stranger that connects to the gossip port
// cannot make a member hold more than that.
const (
	linkMagic   byte = 0xE8
	linkVersion byte = 1
	// linkSealed is the preamble flag of a link whose frames are sealed.
	linkSealed byte = 1
	// maxLinkFrame bounds a frame's body: messages stay under 256 KB.
	maxLinkFrame = 4 << 20
	// helloMax bounds the hello frame, the only one before the link is
	// known to be a member's.
	helloMax  = 1 << 10
	nonceSize = 12
)

// linkAAD is the additional data every sealed frame is bound to: a frame of
// another cluster (label) or another protocol does not open.
func linkAAD(label string) []byte { return append([]byte("hf-link"), label...) }

// preamble encodes a link's preamble.
func preamble(from, label string, sealed bool) ([]byte, error) {
	if len(from) > 255 || len(label) > 255 {
		return nil, errors.New("link preamble: name or label longer than 255 bytes")
	}
	var flags byte
	if sealed {
		flags |= linkSealed
	}
	b := []byte{linkMagic, linkVersion, flags, byte(len(label))}
	b = append(b, label...)
	b = append(b, byte(len(from)))
	return append(b, from...), nil
}

// linkHello is what a preamble says.
type linkHello struct {
	from, label string
	sealed      bool
}

// readPreamble reads a link's preamble (the magic byte included).
func readPreamble(r *bufio.Reader) (linkHello, error) {
	var h linkHello
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, fmt.Errorf("link preamble: %w", err)
	}
	if head[0] != linkMagic || head[1] != linkVersion {
		return h, fmt.Errorf("link preamble: magic %#x version %d, want %#x %d", head[0], head[1], linkMagic, linkVersion)
	}
	h.sealed = head[2]&linkSealed != 0
	label := make([]byte, head[3])
	if _, err := io.ReadFull(r, label); err != nil {
		return h, fmt.Errorf("link preamble: %w", err)
	}
	n, err := r.ReadByte()
	if err != nil {
		return h, fmt.Errorf("link preamble: %w", err)
	}
	from := make([]byte, n)
	if _, err := io.ReadFull(r, from); err != nil {
		return h, fmt.Errorf("link preamble: %w", err)
	}
	h.label, h.from = string(label), string(from)
	return h, nil
}

// sealer seals the frames of one outgoing link.
type sealer struct {
	keys  *memberlist.Keyring // nil: frames in the clear
	aad   []byte
	base  [nonceSize]byte // random per link; frame i uses base xor i
	count uint64
	// aead caches the cipher of key.
	key  []byte
	aead cipher.AEAD
}

func newSealer(keys *memberlist.Keyring, label string) (*sealer, error) {
	s := &sealer{keys: keys, aad: linkAAD(label)}
	if keys != nil {
		if _, err := rand.Read(s.base[:]); err != nil {
			return nil, fmt.Errorf("link nonce: %w", err)
		}
	}
	return s, nil
}

// appendFrame appends msg as one frame to dst.
func (s *sealer) appendFrame(dst, msg []byte) ([]byte, error) {
	if s.keys == nil {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
		return append(dst, msg...), nil
	}
	key := s.keys.GetPrimaryKey()
	if s.aead == nil || string(key) != string(s.key) {
		aead, err := newGCM(key)
		if err != nil {
			return nil, err
		}
		s.key, s.aead = key, aead
	}
	nonce := s.base
	s.count++
	var ctr [8]byte
	binary.BigEndian.PutUint64(ctr[:], s.count)
	for i := range ctr {
		nonce[nonceSize-8+i] ^= ctr[i]
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(nonceSize+len(msg)+s.aead.Overhead()))
	dst = append(dst, nonce[:]...)
	return s.aead.Seal(dst, nonce[:], msg, s.aad), nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("link key: %w", err)
	}
	return cipher.NewGCM(block)
}

// opener opens the frames of one incoming link.
type opener struct {
	keys   *memberlist.Keyring // nil: frames in the clear
	aad    []byte
	aeads  map[string]cipher.AEAD // by key
	buf    []byte
	plain  []byte
	reader *bufio.Reader
	// max bounds the next frame (helloMax until the hello opened).
	max uint32
}

// hello reads the link's first frame, which must name from.
func (o *opener) hello(from string) error {
	o.max = helloMax
	msg, err := o.next()
	if err != nil {
		return fmt.Errorf("link hello: %w", err)
	}
	if string(msg) != from {
		return fmt.Errorf("link hello names %q, the preamble %q", msg, from)
	}
	o.max = maxLinkFrame
	return nil
}

// next reads and opens the next frame. The message is valid until the
// next call.
func (o *opener) next() ([]byte, error) {
	var head [4]byte
	if _, err := io.ReadFull(o.reader, head[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if limit := cmp.Or(o.max, maxLinkFrame); n > limit {
		return nil, fmt.Errorf("link frame of %d bytes, more than %d", n, limit)
	}
	if cap(o.buf) < int(n) {
		o.buf = make([]byte, n)
	}
	body := o.buf[:n]
	if _, err := io.ReadFull(o.reader, body); err != nil {
		return nil, err
	}
	if o.keys == nil {
		return body, nil
	}
	if len(body) < nonceSize {
		return nil, errors.New("link frame shorter than its nonce")
	}
	nonce, sealed := body[:nonceSize], body[nonceSize:]
	for _, key := range o.keys.GetKeys() {
		aead := o.aeads[string(key)]
		if aead == nil {
			var err error
			if aead, err = newGCM(key); err != nil {
				continue
			}
			if o.aeads == nil {
				o.aeads = map[string]cipher.AEAD{}
			}
			o.aeads[string(key)] = aead
		}
		plain, err := aead.Open(o.plain[:0], nonce, sealed, o.aad)
		if err == nil {
			o.plain = plain
			return plain, nil
		}
	}
	return nil, errors.New("link frame: no installed key opens it")
}
