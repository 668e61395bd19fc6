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

// localAPIURL is scheme://addr with an unspecified host made 127.0.0.1:
// both families' "any" (Go listens on [::] dual-stack for an empty host)
// take IPv4's loopback, as a host or container may have no ::1.
func localAPIURL(scheme, addr string) string {
	return scheme + "://" + anyHostAs(addr, "127.0.0.1")
}

// anyHostAs is addr with host in place of an unspecified or empty host (a
// listener on every interface); any other addr, or one that is not
// host:port, is returned as it is.
func anyHostAs(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort(host, port)
	}
	return addr
}
