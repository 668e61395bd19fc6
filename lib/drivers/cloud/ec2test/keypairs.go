package ec2test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// KeyPair is the server's record of one key pair (no private key: EC2 keeps
// none either, it hands the material out once, in CreateKeyPair's answer).
type KeyPair struct {
	ID, Name, Type, Fingerprint string
	Tags                        map[string]string
	Created                     time.Time
}

// KeyPairs returns copies of the key pairs, sorted by name.
func (s *Server) KeyPairs() []KeyPair {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]KeyPair, 0, len(s.keyPairs))
	for _, k := range s.keyPairs {
		c := *k
		c.Tags = cloneMap(k.Tags)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b KeyPair) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

type createKeyPairResponse struct {
	XMLName     xml.Name `xml:"CreateKeyPairResponse"`
	Xmlns       string   `xml:"xmlns,attr"`
	RequestID   string   `xml:"requestId"`
	KeyName     string   `xml:"keyName"`
	Fingerprint string   `xml:"keyFingerprint"`
	Material    string   `xml:"keyMaterial"`
	KeyPairID   string   `xml:"keyPairId"`
	Tags        []tagXML `xml:"tagSet>item"`
}

// createKeyPair makes a key pair. The material is a real ed25519 private
// key, PKCS #8 in PEM (EC2 sends OpenSSH's format for ed25519; hf passes the
// material through unread, so the format does not matter here).
func (s *Server) createKeyPair(f map[string][]string) (any, *apiError) {
	name, typ := first(f["KeyName"]), first(f["KeyType"])
	if typ == "" {
		typ = "rsa"
	}
	switch {
	case name == "":
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter KeyName"}
	case typ != "ed25519" && typ != "rsa":
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter keyType is invalid.", typ)}
	case typ == "rsa":
		return nil, &apiError{http.StatusBadRequest, "InvalidParameterValue", "this test double makes ed25519 keys only"}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, &apiError{http.StatusInternalServerError, "InternalError", err.Error()}
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(pubDER)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keyPairs[name]; ok {
		return nil, &apiError{http.StatusBadRequest, "InvalidKeyPair.Duplicate", fmt.Sprintf("The keypair '%s' already exists.", name)}
	}
	k := &KeyPair{ID: newID("key-"), Name: name, Type: typ, Fingerprint: base64.StdEncoding.EncodeToString(sum[:]),
		Tags: tagSpecs(f)["key-pair"], Created: s.now()}
	if k.Tags == nil {
		k.Tags = map[string]string{}
	}
	s.keyPairs[name] = k
	return createKeyPairResponse{Xmlns: Namespace, RequestID: newID(""), KeyName: name, Fingerprint: k.Fingerprint,
		Material: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), KeyPairID: k.ID, Tags: tagsXML(k.Tags)}, nil
}

type deleteKeyPairResponse struct {
	XMLName   xml.Name `xml:"DeleteKeyPairResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
	KeyPairID string   `xml:"keyPairId,omitempty"`
}

// deleteKeyPair deletes a key pair by name or id; like EC2, one that does
// not exist is no error.
func (s *Server) deleteKeyPair(f map[string][]string) (any, *apiError) {
	name, id := first(f["KeyName"]), first(f["KeyPairId"])
	if name == "" && id == "" {
		return nil, &apiError{http.StatusBadRequest, "MissingParameter", "The request must contain the parameter KeyName or KeyPairId"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faults.FailDeleteKeyPair {
		return nil, &apiError{http.StatusInternalServerError, "InternalError", "An internal error has occurred (injected)."}
	}
	resp := deleteKeyPairResponse{Xmlns: Namespace, RequestID: newID(""), Return: true}
	for n, k := range s.keyPairs {
		if (name != "" && n == name) || (id != "" && k.ID == id) {
			resp.KeyPairID = k.ID
			delete(s.keyPairs, n)
		}
	}
	return resp, nil
}

type keyPairXML struct {
	ID          string   `xml:"keyPairId"`
	Fingerprint string   `xml:"keyFingerprint"`
	Name        string   `xml:"keyName"`
	Type        string   `xml:"keyType"`
	Tags        []tagXML `xml:"tagSet>item"`
	CreateTime  string   `xml:"createTime"`
}

type describeKeyPairsResponse struct {
	XMLName   xml.Name     `xml:"DescribeKeyPairsResponse"`
	Xmlns     string       `xml:"xmlns,attr"`
	RequestID string       `xml:"requestId"`
	Keys      []keyPairXML `xml:"keySet>item"`
}

// describeKeyPairs answers by KeyName.N, KeyPairId.N and the filters
// key-name, key-pair-id and tag:<key>; a name or id that does not exist is
// InvalidKeyPair.NotFound, as in EC2.
func (s *Server) describeKeyPairs(f map[string][]string) (any, *apiError) {
	names, ids, fs := list(f, "KeyName"), list(f, "KeyPairId"), filters(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		if _, ok := s.keyPairs[n]; !ok {
			return nil, &apiError{http.StatusBadRequest, "InvalidKeyPair.NotFound", fmt.Sprintf("The key pair '%s' does not exist", n)}
		}
	}
	for _, id := range ids {
		if !slices.ContainsFunc(slices.Collect(maps.Values(s.keyPairs)), func(k *KeyPair) bool { return k.ID == id }) {
			return nil, &apiError{http.StatusBadRequest, "InvalidKeyPair.NotFound", fmt.Sprintf("The key pair ID '%s' does not exist", id)}
		}
	}
	resp := describeKeyPairsResponse{Xmlns: Namespace, RequestID: newID("")}
	for _, n := range slices.Sorted(maps.Keys(s.keyPairs)) {
		k := s.keyPairs[n]
		if len(names) > 0 && !slices.Contains(names, n) || len(ids) > 0 && !slices.Contains(ids, k.ID) {
			continue
		}
		ok := matches(fs, func(name string) (string, bool) {
			switch {
			case name == "key-name":
				return k.Name, true
			case name == "key-pair-id":
				return k.ID, true
			}
			return tagFilter(name, k.Tags)
		})
		if ok {
			resp.Keys = append(resp.Keys, keyPairXML{ID: k.ID, Fingerprint: k.Fingerprint, Name: k.Name, Type: k.Type,
				Tags: tagsXML(k.Tags), CreateTime: k.Created.UTC().Format(time.RFC3339)})
		}
	}
	return resp, nil
}
