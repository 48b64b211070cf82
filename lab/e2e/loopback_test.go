//go:build e2e

package e2e

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loopbackOnly: every socket the test process and its children (the lab's kube-apiserver, the
// Pulumi CLI's plugins while they run) listen on is bound to a loopback address — never to all
// interfaces or a routable one. Read from /proc: the listening TCP sockets of /proc/net/tcp{,6}
// whose inodes the processes hold.
func loopbackOnly(t *testing.T) {
	t.Helper()

	inodes := map[string]int{}
	for _, pid := range family(os.Getpid()) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
			if err == nil && strings.HasPrefix(link, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = pid
			}
		}
	}

	listening := 0

	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}

		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}

			pid, ours := inodes[f[9]]
			if !ours {
				continue
			}

			listening++

			if addr := procAddr(f[1]); !addr.IsLoopback() {
				t.Errorf("process %d listens on %s: the lab and its tests bind loopback only", pid, addr)
			}
		}
	}

	if listening == 0 {
		t.Error("found no listening socket of the test process: the check sees nothing")
	}
}

// family is pid and its descendants.
func family(pid int) []int {
	out := []int{pid}
	children := map[int][]int{}

	for n, st := range procStats() {
		children[st.ppid] = append(children[st.ppid], n)
	}

	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}

	return out
}

// procAddr decodes /proc/net/tcp's "0100007F:1F90" (little-endian words).
func procAddr(s string) netip.Addr {
	hexAddr, _, _ := strings.Cut(s, ":")

	raw, err := hex.DecodeString(hexAddr)
	if err != nil {
		return netip.Addr{}
	}

	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}

	addr, _ := netip.AddrFromSlice(raw)

	return addr.Unmap()
}
