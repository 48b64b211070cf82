package netns

import (
	"net/netip"
	"testing"
)

func TestAddr(t *testing.T) {
	for _, tc := range []struct {
		subnet, host int
		want         string
	}{
		{0, 1, "fd1a:b::1"},
		{1, 0x10, "fd1a:b:0:1::10"},
		{2, 0x20, "fd1a:b:0:2::20"},
		{0xffff, 0xffff, "fd1a:b:0:ffff::ffff"},
	} {
		got := Addr(tc.subnet, tc.host)
		if got != netip.MustParseAddr(tc.want) {
			t.Errorf("Addr(%d, %#x) = %s, want %s", tc.subnet, tc.host, got, tc.want)
		}
		if !Prefix.Contains(got) {
			t.Errorf("Addr(%d, %#x) = %s is outside %s", tc.subnet, tc.host, got, Prefix)
		}
	}
	for _, bad := range [][2]int{{-1, 0}, {0x10000, 0}, {0, -1}, {0, 0x10000}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Addr(%d, %d) did not panic", bad[0], bad[1])
				}
			}()
			Addr(bad[0], bad[1])
		}()
	}
}
