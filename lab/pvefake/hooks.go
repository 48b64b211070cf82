package pvefake

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
)

// EventType names a VM lifecycle event.
type EventType string

// VM lifecycle events.
const (
	// EventCreated: the create task finished; the VM exists, stopped.
	EventCreated EventType = "created"
	// EventStarted: a start task finished; the guest is "booting".
	EventStarted EventType = "started"
	// EventRebooted: a reboot task finished on a running VM.
	EventRebooted EventType = "rebooted"
	// EventStopped: a stop or shutdown task stopped a running VM.
	EventStopped EventType = "stopped"
	// EventDeleted: a destroy task removed the VM and its disks.
	EventDeleted EventType = "deleted"
	// EventNICsChanged: a configuration update hot-plugged, unplugged or replaced network devices
	// of a running VM (network hot-plug is on by default); Event.NICs are the VM's NICs now.
	EventNICsChanged EventType = "nics-changed"
)

// Event reports a VM lifecycle change to a lab controller, e.g. to boot or halt the emulated
// Talos node that stands for the VM.
type Event struct {
	Type EventType
	Node string
	VMID int
	Name string
	// IPConfig0 is the raw cloud-init "ipconfig0" value, e.g. "gw=10.0.0.1,ip=10.0.0.11/24" or
	// "ip=dhcp" (empty when unset).
	IPConfig0 string
	// Nameserver is the raw cloud-init "nameserver" value (space separated addresses).
	Nameserver string
	// AgentEnabled reports whether the QEMU guest agent is enabled in the configuration.
	AgentEnabled bool
	// MAC is net0's MAC address (upper case, as PVE prints it).
	MAC string
	// NICs are the VM's network devices in index order, as the guest sees them (MTU included).
	NICs []NIC
	// Config is a copy of the VM configuration as PVE stores it.
	Config map[string]string
}

// eventQueue delivers events in order on its own goroutine, so that a slow handler never
// blocks the API.
type eventQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	items   []queuedEvent
	handler func(Event)
	closed  bool
	done    chan struct{}
}

// queuedEvent is an event and the channel closed once the handler has returned from it.
type queuedEvent struct {
	Event
	handled chan struct{}
}

func newEventQueue(h func(Event)) *eventQueue {
	q := &eventQueue{handler: h, done: make(chan struct{})}
	q.cond = sync.NewCond(&q.mu)

	go q.loop()

	return q
}

func (q *eventQueue) loop() {
	defer close(q.done)

	for {
		q.mu.Lock()
		for len(q.items) == 0 && !q.closed {
			q.cond.Wait()
		}

		if len(q.items) == 0 {
			q.mu.Unlock()
			return
		}

		e := q.items[0]
		q.items = q.items[1:]
		h := q.handler
		q.mu.Unlock()

		if h != nil {
			h(e.Event)
		}

		close(e.handled)
	}
}

// push queues e; the channel it returns is closed once the handler has returned from e (at once
// when the queue is closed).
func (q *eventQueue) push(e Event) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()

	handled := make(chan struct{})
	if q.closed {
		close(handled)
		return handled
	}

	q.items = append(q.items, queuedEvent{Event: e, handled: handled})
	q.cond.Signal()

	return handled
}

// close delivers what is queued and stops the loop.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Signal()
	q.mu.Unlock()
	<-q.done
}

// SetEventHandler replaces Options.OnEvent; events queued but not yet delivered go to h.
func (s *Server) SetEventHandler(h func(Event)) {
	s.events.mu.Lock()
	s.events.handler = h
	s.events.mu.Unlock()
}

// emit queues an event for v and returns the channel closed once the handler has returned from
// it. Callers hold s.mu, so they must not wait on it there: a task that must not finish before
// the guest has reacted hands it to taskRun.await.
func (s *Server) emit(typ EventType, v *vm) <-chan struct{} {
	nics, _ := s.nicsOf(v.config)

	e := Event{
		NICs:         nics,
		Type:         typ,
		Node:         v.node,
		VMID:         v.id,
		Name:         v.config["name"],
		IPConfig0:    v.config["ipconfig0"],
		Nameserver:   v.config["nameserver"],
		AgentEnabled: agentEnabled(v.config["agent"]),
		MAC:          netMAC(v.config["net0"]),
		Config:       cloneConfig(v.config),
	}

	s.opts.Logf("pvefake: VM %d on %s %s", v.id, v.node, typ)

	return s.events.push(e)
}

// guestAddress is what the guest agent reports on eth0.
type guestAddress struct {
	prefix netip.Prefix
}

// SetGuestAddress makes the guest agent of VM vmid report addr on eth0 (with DHCP, the address
// the guest got). The agent answers only while the VM runs and has the agent enabled. Without
// a supplied address the agent reports the static address of ipconfig0, and with "ip=dhcp" it
// answers "QEMU guest agent is not running" (the guest is still booting).
//
// bpg only accepts a global unicast address (not 127.0.0.0/8) and otherwise keeps polling until
// agent.timeout (default 15 minutes); a loopback address is therefore reported together with a
// TEST-NET-2 stand-in (see agentNetworkInterfaces).
func (s *Server) SetGuestAddress(vmid int, addr netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.guestAddr[vmid] = guestAddress{prefix: addr}
}

// ClearGuestAddress forgets the address supplied with SetGuestAddress.
func (s *Server) ClearGuestAddress(vmid int) {
	s.mu.Lock()
	defer s.mu.Unlock()

	delete(s.guestAddr, vmid)
}

// reportedAddress is the address the agent of v reports first: the one supplied with
// SetGuestAddress, else ipconfig0's static IPv4 address, else its static IPv6 one (an IPv6-only
// guest); none while ipconfig0 asks for a DHCP lease the lab has not supplied. Callers hold s.mu.
func (s *Server) reportedAddress(v *vm) (netip.Prefix, bool) {
	if _, supplied := s.guestAddr[v.id]; !supplied && parsePropertyString(v.config["ipconfig0"], "")["ip"] == "dhcp" {
		return netip.Prefix{}, false // the lease is not known yet
	}

	if a := s.guestAddresses(v, 0); len(a) > 0 {
		return a[0], true
	}

	return netip.Prefix{}, false
}

// guestAddresses are the addresses the agent of v reports on the NIC of netN: ipconfigN's static
// ip and ip6 (DHCP and SLAAC leases are unknown until the lab supplies them with
// SetGuestAddress, which replaces net0's IPv4 one). Callers hold s.mu.
func (s *Server) guestAddresses(v *vm, index int) []netip.Prefix {
	props := parsePropertyString(v.config[fmt.Sprintf("ipconfig%d", index)], "")

	var out []netip.Prefix

	if a, ok := s.guestAddr[v.id]; ok && a.prefix.IsValid() && index == 0 {
		out = append(out, a.prefix)
	} else if p, err := netip.ParsePrefix(props["ip"]); err == nil {
		out = append(out, p)
	}

	if p, err := netip.ParsePrefix(props["ip6"]); err == nil {
		out = append(out, p)
	}

	return out
}

// agentEnabled reads the "agent" option ("1", "enabled=1,type=virtio", …).
func agentEnabled(v string) bool {
	props := parsePropertyString(v, "enabled")
	b, _ := parseBool(props["enabled"])

	return b
}

// netMAC reads the MAC of a net option ("virtio=BC:24:11:…,bridge=vmbr0").
func netMAC(v string) string {
	for _, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(part, "=")
		if ok && netModels[k] {
			return strings.ToUpper(val)
		}

		if ok && k == "macaddr" {
			return strings.ToUpper(val)
		}
	}

	return ""
}
