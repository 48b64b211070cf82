//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// procUsage is what the processes of one program (the Pulumi CLI, one plugin, a language host)
// used while a procSampler ran: their CPU (user + system) summed and the largest peak resident
// set of any one of them (a plugin the engine starts three times is three processes).
type procUsage struct {
	CPU     time.Duration
	PeakRSS uint64 // bytes
	Starts  int
}

// procSampler reads, every interval, /proc of every descendant of this test process: the
// Pulumi CLI it runs and the plugins and language hosts the CLI starts. VmHWM is the kernel's
// own high-water mark and utime/stime only grow, so the last reading of a process before it
// exits misses at most one interval of its life.
type procSampler struct {
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	seen map[procID]procReading
}

// procID names one process: a pid with its start time, as the kernel may give a pid again.
type procID struct {
	pid   int
	start string
}

type procReading struct {
	name string
	hwm  uint64
	cpu  time.Duration
}

// sampleProcs starts a procSampler; stop it with usage.
func sampleProcs() *procSampler {
	s := &procSampler{stop: make(chan struct{}), done: make(chan struct{}), seen: map[procID]procReading{}}

	go func() {
		defer close(s.done)

		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()

		for {
			s.read()

			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()

	return s
}

// usage stops the sampler and returns the usage by program name (argv[0]'s base name).
func (s *procSampler) usage() map[string]procUsage {
	close(s.stop)
	<-s.done

	s.mu.Lock()
	defer s.mu.Unlock()

	out := map[string]procUsage{}

	for _, r := range s.seen {
		u := out[r.name]
		u.CPU += r.cpu
		u.PeakRSS = max(u.PeakRSS, r.hwm)
		u.Starts++
		out[r.name] = u
	}

	return out
}

// clockTick is the kernel's USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

func (s *procSampler) read() {
	stats := procStats()
	self := os.Getpid()

	descends := func(pid int) bool {
		for range 16 {
			st, ok := stats[pid]
			if !ok || st.ppid <= 1 {
				return false
			}

			if st.ppid == self {
				return true
			}

			pid = st.ppid
		}

		return false
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	for pid, st := range stats {
		if !descends(pid) {
			continue
		}

		// The name is read again each time: between its fork and its exec a child still
		// carries its parent's.
		id := procID{pid: pid, start: st.start}
		r := s.seen[id]

		if name := procName(pid); name != "" {
			r.name = name
		} else if r.name == "" {
			continue
		}

		r.cpu = max(r.cpu, st.cpu)
		r.hwm = max(r.hwm, procHWM(pid))
		s.seen[id] = r
	}
}

// procStat is what /proc/<pid>/stat says of one process.
type procStat struct {
	ppid  int
	cpu   time.Duration // utime + stime
	start string        // starttime, in clock ticks since boot
}

// procStats reads /proc/<pid>/stat of every process; one that exits meanwhile is left out.
func procStats() map[int]procStat {
	entries, _ := os.ReadDir("/proc")
	out := make(map[int]procStat, len(entries))

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}

		// The command name is in parentheses and may hold spaces: the fields after its ')'
		// are state (3), ppid (4) … utime (14), stime (15) … starttime (22).
		i := strings.LastIndexByte(string(raw), ')')
		if i < 0 {
			continue
		}

		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 20 {
			continue
		}

		ppid, _ := strconv.Atoi(f[1])
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = procStat{ppid: ppid, cpu: time.Duration(utime+stime) * clockTick, start: f[19]}
	}

	return out
}

// procName is the base name of a process's argv[0], or "" once it is gone.
func procName(pid int) string {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(raw) == 0 {
		return ""
	}

	argv0, _, _ := strings.Cut(string(raw), "\x00")

	return filepath.Base(argv0)
}

// procHWM is a process's peak resident set (VmHWM) in bytes, or 0 once it is gone.
func procHWM(pid int) uint64 {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}

	for line := range strings.Lines(string(raw)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}

	return 0
}

// procSummary formats the usage by program, sorted by name, as `name=<cpu>s/<peak rss>MiB×<processes>`.
func procSummary(u map[string]procUsage) string {
	names := make([]string, 0, len(u))
	for n := range u {
		names = append(names, n)
	}

	slices.Sort(names)

	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+strconv.FormatFloat(u[n].CPU.Seconds(), 'f', 1, 64)+"s/"+
			strconv.FormatUint(u[n].PeakRSS>>20, 10)+"MiB×"+strconv.Itoa(u[n].Starts))
	}

	return strings.Join(parts, " ")
}
