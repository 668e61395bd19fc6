package native

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	Name     string
	UID, GID int
	GECOS    string
	Home     string
	Shell    string
}

// parsePasswd reads passwd(5) lines; malformed lines are skipped.
func parsePasswd(b []byte) []passwdEntry {
	var out []passwdEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 7 {
			continue
		}
		uid, err1 := strconv.Atoi(f[2])
		gid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{Name: f[0], UID: uid, GID: gid, GECOS: f[4], Home: f[5], Shell: f[6]})
	}
	return out
}

// groupEntry is one line of /etc/group.
type groupEntry struct {
	Name    string
	GID     int
	Members []string
}

// parseGroups reads group(5) lines; malformed lines are skipped.
func parseGroups(b []byte) []groupEntry {
	var out []groupEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) != 4 {
			continue
		}
		gid, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		g := groupEntry{Name: f[0], GID: gid}
		if f[3] != "" {
			g.Members = strings.Split(f[3], ",")
		}
		out = append(out, g)
	}
	return out
}

// userByName returns the passwd entry of name.
func (d *Driver) userByName(name string) (passwdEntry, bool, error) {
	b, err := os.ReadFile(d.passwdPath)
	if err != nil {
		return passwdEntry{}, false, fmt.Errorf("read %s: %w", d.passwdPath, err)
	}
	for _, e := range parsePasswd(b) {
		if e.Name == name {
			return e, true, nil
		}
	}
	return passwdEntry{}, false, nil
}

// idDigits is how many hex digits follow the prefix in a machine id.
const idDigits = 10

var idRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// validID reports whether id is safe as a user, file and cgroup name.
func validID(id string) bool { return idRE.MatchString(id) }

// ownID reports whether id has the shape of the ids this driver makes.
func (d *Driver) ownID(id string) bool {
	rest, ok := strings.CutPrefix(id, d.cfg.UserPrefix)
	if !ok || len(rest) != idDigits || !validID(id) {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// randomID returns the prefix and idDigits random hex digits.
func randomID(prefix string) string {
	var b [idDigits / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand docs)
	return prefix + hex.EncodeToString(b[:])
}

var markerUnsafe = regexp.MustCompile(`[^A-Za-z0-9._/-]+`)

// markerFor is the comment (GECOS) of the users and the content of the marker
// file of the workspaces a driver instance makes. Only what carries the
// driver's own marker is ever treated as an orphan of it: a user or directory
// that merely starts with the prefix is left alone, and so are the machines of
// other nodes or instances on the same host.
func markerFor(node, instance string) string {
	return "hf-native " + markerUnsafe.ReplaceAllString(node+"/"+instance, "_")
}
