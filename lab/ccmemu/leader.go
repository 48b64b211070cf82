package ccmemu

import (
	"context"
	"sync"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// run elects a leader (unless --leader-elect=false) and, while leading, runs the controllers.
// Losing the lease ends the process, which the kubelet restarts: here, a new election.
func (c *ccm) run(ctx context.Context, host string) {
	if !c.flags.leaderElect {
		c.lead(ctx)

		return
	}

	id := host + "_" + uuid.NewString()

	var terms terms

	for ctx.Err() == nil {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: c.flags.leaseName, Namespace: c.flags.leaseNamespace},
			Client:     c.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}

		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: c.flags.leaseDuration, RenewDeadline: c.flags.renewDeadline,
			RetryPeriod: c.flags.retryPeriod, Name: c.flags.leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { terms.run(ctx, c.lead) },
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						c.say("leaderelection lost")
					}
				},
			},
		})
		if err != nil {
			c.say("error creating lock: %v", err)
			<-ctx.Done()

			return
		}

		le.Run(ctx)
		terms.wait()
	}
}

// terms are the leader's terms: the elector runs OnStartedLeading on a goroutine it does not
// wait for, and cancels its context before Run returns; a new term, and the process's end, wait
// for the controllers of the last one to stop.
type terms struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running int
}

func (t *terms) run(ctx context.Context, lead func(context.Context)) {
	t.mu.Lock()
	if ctx.Err() != nil {
		t.mu.Unlock()

		return
	}

	t.running++
	t.mu.Unlock()

	defer func() {
		t.mu.Lock()
		t.running--
		t.condLocked().Broadcast()
		t.mu.Unlock()
	}()

	lead(ctx)
}

func (t *terms) wait() {
	t.mu.Lock()
	defer t.mu.Unlock()

	for t.running > 0 {
		t.condLocked().Wait()
	}
}

func (t *terms) condLocked() *sync.Cond {
	if t.cond == nil {
		t.cond = sync.NewCond(&t.mu)
	}

	return t.cond
}
