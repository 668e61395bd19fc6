package main

import (
	"net"
	"os"
	"path/filepath"

	"github.com/hf-fleet/hf/lib/config"
)

// writeAPIURL saves the URL at which this host reaches the API listening on
// addr (an address of every interface is reached at the loopback's).
func writeAPIURL(dataDir, scheme, addr string) error {
	return os.WriteFile(filepath.Join(dataDir, config.APIURLFile), []byte(localAPIURL(scheme, addr)+"\n"), 0o600)
}

// localAPIURL is scheme://addr with an unspecified host made 127.0.0.1.
func localAPIURL(scheme, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return scheme + "://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		// Both families' "any" (Go listens on [::] dual-stack for an empty
		// host) take IPv4's loopback: a host or container may have no ::1.
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
