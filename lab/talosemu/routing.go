package talosemu

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/siderolabs/talos/pkg/machinery/api/common"
	machineapi "github.com/siderolabs/talos/pkg/machinery/api/machine"
	storageapi "github.com/siderolabs/talos/pkg/machinery/api/storage"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// methodTable holds the node's services and their handlers by full method name, so that a call
// apid-proxied from another node can be dispatched without a network hop.
type methodTable struct {
	services []registeredService
	unary    map[string]unaryMethod
	streams  map[string]streamMethod
}

type registeredService struct {
	desc *grpc.ServiceDesc
	impl any
}

type unaryMethod struct {
	impl    any
	handler grpc.MethodHandler
}

type streamMethod struct {
	impl    any
	handler grpc.StreamHandler
}

func newMethodTable(n *Node) methodTable {
	t := methodTable{
		services: []registeredService{
			{&machineapi.MachineService_ServiceDesc, &machineService{node: n}},
			{&storageapi.StorageService_ServiceDesc, &storageService{node: n}},
			{&machineapi.ImageService_ServiceDesc, &imageService{node: n}},
			{&machineapi.LifecycleService_ServiceDesc, &lifecycleService{node: n}},
			cosiService(n.resources),
		},
		unary:   map[string]unaryMethod{},
		streams: map[string]streamMethod{},
	}

	for _, s := range t.services {
		for _, m := range s.desc.Methods {
			t.unary["/"+s.desc.ServiceName+"/"+m.MethodName] = unaryMethod{s.impl, m.Handler}
		}

		for _, m := range s.desc.Streams {
			t.streams["/"+s.desc.ServiceName+"/"+m.StreamName] = streamMethod{s.impl, m.Handler}
		}
	}

	return t
}

func (t methodTable) register(srv *grpc.Server) {
	for _, s := range t.services {
		srv.RegisterService(s.desc, s.impl)
	}
}

// admit refuses calls that arrive on a boot that is going down, then injects the configured faults.
func (n *Node) admit(ctx context.Context, gen uint64, method string) error {
	n.mu.Lock()
	current := n.gen == gen && n.boot != nil
	n.mu.Unlock()

	if !current {
		return status.Error(codes.Unavailable, "talosemu: the node is going down")
	}

	return n.faults.inject(ctx, method)
}

// unaryInterceptor routes a call the way apid does with the `node` and `nodes` metadata that
// client.WithNode and client.WithNodes set: no metadata or this node → handled here; another node
// of the cluster → proxied to it; `nodes` → fanned out, each reply message stamped with its node.
func (n *Node) unaryInterceptor(gen uint64) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := n.admit(ctx, gen, info.FullMethod); err != nil {
			return nil, err
		}

		targets, fanOut := routeTargets(ctx)

		switch {
		case fanOut:
			return n.fanOut(ctx, info.FullMethod, req, targets)
		case len(targets) == 1 && !n.isNamed(targets[0]):
			peer := n.Cluster().lookup(targets[0])
			if peer == nil {
				return nil, unreachable(targets[0])
			}

			return peer.serveUnary(withoutRouting(ctx), info.FullMethod, req, true)
		default:
			return handler(ctx, req)
		}
	}
}

// streamInterceptor routes streaming calls like unaryInterceptor; fan-out to several nodes is
// not emulated for streams.
func (n *Node) streamInterceptor(gen uint64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		if err := n.admit(ctx, gen, info.FullMethod); err != nil {
			return err
		}

		targets, fanOut := routeTargets(ctx)
		if fanOut && len(targets) > 1 {
			return status.Error(codes.Unimplemented, "talosemu: streaming calls to several nodes are not emulated")
		}

		if len(targets) == 1 && !n.isNamed(targets[0]) {
			peer := n.Cluster().lookup(targets[0])
			if peer == nil {
				return unreachable(targets[0])
			}

			return peer.serveStream(&routedStream{ServerStream: ss, ctx: withoutRouting(ctx)}, info.FullMethod)
		}

		return handler(srv, ss)
	}
}

// serveUnary handles a call proxied from another node (or fanned out locally).
func (n *Node) serveUnary(ctx context.Context, method string, req any, injectFaults bool) (any, error) {
	if !n.isUp() {
		return nil, unreachable(n.ip.String())
	}

	if injectFaults {
		if err := n.faults.inject(ctx, method); err != nil {
			return nil, err
		}
	}

	m, ok := n.methods.unary[method]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}

	dec := func(v any) error {
		proto.Merge(v.(proto.Message), req.(proto.Message))

		return nil
	}

	return m.handler(m.impl, ctx, dec, nil)
}

func (n *Node) serveStream(ss grpc.ServerStream, method string) error {
	if !n.isUp() {
		return unreachable(n.ip.String())
	}

	if err := n.faults.inject(ss.Context(), method); err != nil {
		return err
	}

	m, ok := n.methods.streams[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}

	return m.handler(m.impl, ss)
}

// fanOut calls method on every target and merges the replies' messages, stamping each with
// metadata.hostname = target; a node that fails contributes a message carrying its error, which
// client.FilterMessages turns into an error.
func (n *Node) fanOut(ctx context.Context, method string, req any, targets []string) (any, error) {
	out, err := newReply(method)
	if err != nil {
		return nil, err
	}

	ctx = withoutRouting(ctx)

	for _, target := range targets {
		var (
			resp any
			err  error
		)

		switch peer := n.Cluster().lookup(target); {
		case n.isNamed(target):
			resp, err = n.serveUnary(ctx, method, req, false)
		case peer != nil:
			resp, err = peer.serveUnary(ctx, method, req, true)
		default:
			err = unreachable(target)
		}

		mergeReply(out, target, resp, err)
	}

	return out.Interface(), nil
}

// newReply makes an empty reply message of method's output type.
func newReply(method string) (protoreflect.Message, error) {
	svc, name := cutMethod(method)

	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, status.Errorf(codes.Unimplemented, "unknown service %s", svc)
	}

	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}

	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "reply type of %s: %v", method, err)
	}

	return mt.New(), nil
}

func mergeReply(out protoreflect.Message, target string, resp any, err error) {
	fd := out.Descriptor().Fields().ByName("messages")
	if fd == nil || !fd.IsList() {
		return
	}

	list := out.Mutable(fd).List()

	if err != nil {
		elem := list.NewElement()
		setMetadata(elem.Message(), &common.Metadata{Hostname: target, Error: err.Error(), Status: status.Convert(err).Proto()})
		list.Append(elem)

		return
	}

	src := resp.(proto.Message).ProtoReflect().Get(fd).List()
	for i := range src.Len() {
		m := src.Get(i).Message()
		setMetadata(m, &common.Metadata{Hostname: target})
		list.Append(protoreflect.ValueOfMessage(m))
	}
}

func setMetadata(m protoreflect.Message, md *common.Metadata) {
	if fd := m.Descriptor().Fields().ByName("metadata"); fd != nil {
		m.Set(fd, protoreflect.ValueOfMessage(md.ProtoReflect()))
	}
}

// routeTargets reads the `nodes` (fan-out) or `node` metadata.
func routeTargets(ctx context.Context) ([]string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	if nodes := md.Get("nodes"); len(nodes) > 0 {
		return nodes, true
	}

	return md.Get("node"), false
}

// withoutRouting drops the routing metadata, as apid does before it proxies a call.
func withoutRouting(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	md.Delete("node")
	md.Delete("nodes")

	return metadata.NewIncomingContext(ctx, md)
}

// isNamed reports whether a `node` metadata value names this node: one of the addresses it
// holds (with or without the port), or its hostname.
func (n *Node) isNamed(target string) bool {
	if target == n.ip.String() || target == n.addr || target == n.Hostname() {
		return true
	}

	n.mu.Lock()
	defer n.mu.Unlock()

	return slices.ContainsFunc(n.nodeAddresses(n.networkFor(n.active)), func(a netip.Addr) bool { return namesAddr(target, a, n.opts.Port) })
}

// namesAddr reports whether target is a, or a with port.
func namesAddr(target string, a netip.Addr, port int) bool {
	return target == a.String() || target == net.JoinHostPort(a.String(), strconv.Itoa(port))
}

func (n *Node) isUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()

	return n.boot != nil && n.boot.srv != nil
}

// unreachable is the error apid reports when it cannot dial the node a call is proxied to.
func unreachable(target string) error {
	addr := target
	if _, _, err := net.SplitHostPort(target); err != nil {
		addr = net.JoinHostPort(target, strconv.Itoa(DefaultPort))
	}

	return status.Errorf(codes.Unavailable,
		"connection error: desc = \"transport: Error while dialing: dial tcp %s: connect: connection refused\"", addr)
}

// cutMethod splits "/package.Service/Method".
func cutMethod(full string) (service, method string) {
	service, method, _ = strings.Cut(strings.TrimPrefix(full, "/"), "/")

	return service, method
}

// routedStream is a server stream whose context has lost the routing metadata.
type routedStream struct {
	grpc.ServerStream
	ctx context.Context //nolint:containedctx // the stream's own context
}

func (s *routedStream) Context() context.Context { return s.ctx }
