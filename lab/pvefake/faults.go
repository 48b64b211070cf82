package pvefake

import (
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
	mu          sync.Mutex
	rng         *rand.Rand
	rate        float64
	routeRates  map[string]float64
	failNext    map[string]int
	taskErrors  map[string][]string
	latency     time.Duration
	routeDelays map[string]time.Duration
}

func newFaults(o Options) *faults {
	f := &faults{
		rng:         newRand(o.Seed),
		rate:        o.FailureRate,
		routeRates:  map[string]float64{},
		failNext:    map[string]int{},
		taskErrors:  map[string][]string{},
		latency:     o.Latency,
		routeDelays: map[string]time.Duration{},
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

		return f.injected()
	}

	rate := f.rate
	if rule, ok := bestRule(f.routeRates, key); ok {
		rate = f.routeRates[rule]
	}

	if rate > 0 && f.rng.Float64() < rate {
		return f.injected()
	}

	return nil
}

// injected is one of the transient errors a busy PVE cluster answers. Callers hold f.mu.
func (f *faults) injected() *apiError {
	if f.rng.IntN(2) == 0 {
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
// the draw so that a sequence of calls made one after another fails the same way on every run.
func (s *Server) SetFailureRate(rate float64, seed uint64) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()

	s.faults.rate = min(max(rate, 0), 1)
	s.faults.rng = newRand(seed)
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
