package gcetest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
)

// tokenPath is the server's OAuth 2.0 token endpoint, the token_uri of the
// service account ServiceAccount makes.
const tokenPath = "/token"

// ServiceAccount returns the JSON key file of a service account of project
// whose token_uri is this server, with a fresh RSA key: a client given it
// as Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS) gets
// its tokens here, as a process that cannot be handed
// option.WithoutAuthentication (a driver plugin) needs.
func (s *Server) ServiceAccount(project string) ([]byte, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     project,
		"private_key_id": "gcetest",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "hf@" + project + ".iam.gserviceaccount.com",
		"client_id":      "1",
		"token_uri":      s.URL + tokenPath,
	})
}

// token answers a token request (a JWT bearer grant) with an access token;
// the API's handlers do not check it.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls["token"]++
	s.mu.Unlock()
	if err := r.ParseForm(); err != nil || r.PostForm.Get("assertion") == "" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "gcetest-token", "token_type": "Bearer", "expires_in": 3600})
}
