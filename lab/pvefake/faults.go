package pvefake

import (
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault and latency rules name routes by their key, "METHOD /pattern" as listed by Routes, e.g.
// "POST /nodes/{node}/qemu". A rule is either such a key (exact), a key ending in "*" (prefix:
// "POST /nodes/{node}/qemu/{vmid}/status/*"), or either form without the method (any method).
// When several rules match a call, the most specific one wins (longest, exact before prefix,
// with method before without).

// faults holds the runtime-adjustable fault and latency knobs.
type faults struct {
	mu   sync.Mutex
	rng  *rand.Rand
	seed uint64
	rate float64
	// drawn counts the calls of each route key drawn for so far; injected counts the calls of
	// each route key failed on purpose (FailNext and rates).
	drawn      map[string]uint64
	injected   map[string]int
	routeRates map[string]float64
	failNext   map[string]int
	// statusFailNext counts, per task type, the status reads of finished tasks still to fail.
	statusFailNext map[string]int
	taskErrors     map[string][]string
	latency        time.Duration
	routeDelays    map[string]time.Duration
}

func newFaults(o Options) *faults {
	f := &faults{
		rng:            newRand(o.Seed),
		seed:           o.Seed,
		rate:           o.FailureRate,
		drawn:          map[string]uint64{},
		injected:       map[string]int{},
		routeRates:     map[string]float64{},
		failNext:       map[string]int{},
		statusFailNext: map[string]int{},
		taskErrors:     map[string][]string{},
		latency:        o.Latency,
		routeDelays:    map[string]time.Duration{},
	}

	for rule, d := range o.RouteLatency {
		f.routeDelays[rule] = d
	}

	return f
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// ruleScore tells how specifically rule matches key; -1 means no match.
func ruleScore(rule, key string) int {
	method, pattern, _ := strings.Cut(key, " ")
	score := 0

	if m, p, ok := strings.Cut(rule, " "); ok {
		if m != method {
			return -1
		}

		rule = p
		score++
	}

	if prefix, ok := strings.CutSuffix(rule, "*"); ok {
		if !strings.HasPrefix(pattern, prefix) {
			return -1
		}

		return score + 4*len(prefix)
	}

	if rule != pattern {
		return -1
	}

	return score + 4*len(rule) + 2
}

// bestRule returns the most specific rule of m matching key.
func bestRule[V any](m map[string]V, key string) (string, bool) {
	best, bestScore := "", -1

	for rule := range m {
		if sc := ruleScore(rule, key); sc > bestScore || (sc == bestScore && sc >= 0 && rule < best) {
			best, bestScore = rule, sc
		}
	}

	return best, bestScore >= 0
}

func (f *faults) latencyFor(key string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()

	if rule, ok := bestRule(f.routeDelays, key); ok {
		return f.routeDelays[rule]
	}

	return f.latency
}

// failure decides whether this call fails before doing anything, and how.
func (f *faults) failure(key string) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()

	if rule, ok := bestRule(f.failNext, key); ok && f.failNext[rule] > 0 {
		f.failNext[rule]--
		if f.failNext[rule] == 0 {
			delete(f.failNext, rule)
		}

		f.injected[key]++

		return injectedError(f.rng.Uint64())
	}

	rate := f.rate
	if rule, ok := bestRule(f.routeRates, key); ok {
		rate = f.routeRates[rule]
	}

	if rate <= 0 {
		return nil
	}

	// The n-th call of a route fails or not by (seed, route, n) alone, so concurrent calls of
	// other routes (two VMs created at once, pollers) do not shift which calls fail.
	n := f.drawn[key]
	f.drawn[key]++

	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := mix64(f.seed ^ mix64(h.Sum64()^mix64(n)))

	if float64(x>>11)/(1<<53) >= rate {
		return nil
	}

	f.injected[key]++

	return injectedError(mix64(x))
}

// mix64 is splitmix64's finaliser: a bijective, well-spread hash of a 64-bit value.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb

	return x ^ x>>31
}

// injectedError is one of the transient errors a busy PVE cluster answers, picked by r.
func injectedError(r uint64) *apiError {
	if r&1 == 0 {
		return errf("cfs-lock 'file-user_cfg' error: got lock request timeout")
	}

	return &apiError{Code: http.StatusServiceUnavailable, Message: "Service Unavailable"}
}

// taskError pops the injected failure for the next task started by the route key, if any.
func (f *faults) taskError(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()

	rule, ok := bestRule(f.taskErrors, key)
	if !ok || len(f.taskErrors[rule]) == 0 {
		return "", false
	}

	msg := f.taskErrors[rule][0]
	f.taskErrors[rule] = f.taskErrors[rule][1:]

	if len(f.taskErrors[rule]) == 0 {
		delete(f.taskErrors, rule)
	}

	return msg, true
}

// SetFailureRate sets the share of calls (0..1) that fail before any side effect, and reseeds
// the draw: from here on, whether the n-th call of a route fails depends only on the seed, the
// route key and n, so a run fails the same calls of each route whatever the interleaving of
// concurrent calls of other routes.
func (s *Server) SetFailureRate(rate float64, seed uint64) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	s.faults.rate = min(max(rate, 0), 1)
	s.faults.rng = newRand(seed)
	s.faults.seed = seed
	s.faults.drawn = map[string]uint64{}
}

// InjectedFailures counts, per route key, the calls failed on purpose (FailNext, failure rates);
// task errors from FailNextTask are not counted.
func (s *Server) InjectedFailures() map[string]int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	return maps.Clone(s.faults.injected)
}

// SetRouteFailureRate sets the failure rate for calls matching rule, overriding the global
// rate; a negative rate removes the rule.
func (s *Server) SetRouteFailureRate(rule string, rate float64) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	if rate < 0 {
		delete(s.faults.routeRates, rule)
		return
	}

	s.faults.routeRates[rule] = min(rate, 1)
}

// FailNext makes the next n calls matching rule fail before any side effect (500 or 503).
func (s *Server) FailNext(rule string, n int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	if n <= 0 {
		delete(s.faults.failNext, rule)
		return
	}

	s.faults.failNext[rule] = n
}

// FailNextTaskStatus makes the next n status reads (GET /nodes/{node}/tasks/{upid}/status) of
// finished tasks of type taskType ("qmcreate", "download", …; see doc.go) fail as FailNext does,
// e.g. the poll that would tell a client its VM create task ended OK.
func (s *Server) FailNextTaskStatus(taskType string, n int) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	if n <= 0 {
		delete(s.faults.statusFailNext, taskType)
		return
	}

	s.faults.statusFailNext[taskType] = n
}

// statusFailure decides whether a status read of a finished task of type typ fails.
func (f *faults) statusFailure(key, typ string) *apiError {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.statusFailNext[typ] <= 0 {
		return nil
	}

	f.statusFailNext[typ]--
	if f.statusFailNext[typ] == 0 {
		delete(f.statusFailNext, typ)
	}

	f.injected[key]++

	return injectedError(f.rng.Uint64())
}

// FailNextTask makes the next task started by a call matching rule end with
// "TASK ERROR: <message>" (exit status = message) after its running time, without its effect.
func (s *Server) FailNextTask(rule, message string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	s.faults.taskErrors[rule] = append(s.faults.taskErrors[rule], message)
}

// SetLatency sets the delay of every call without a route rule (see Options.Latency).
func (s *Server) SetLatency(d time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	s.faults.latency = max(d, 0)
}

// SetRouteLatency sets the delay for calls matching rule, e.g. "POST /nodes/{node}/qemu" 2s
// (the create task runs 2 s) or "GET /nodes/*" 10ms; a negative delay removes the rule.
func (s *Server) SetRouteLatency(rule string, d time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	if d < 0 {
		delete(s.faults.routeDelays, rule)
		return
	}

	s.faults.routeDelays[rule] = d
}
