package cosistate

import (
	"context"
	"fmt"
	"strings"
	"sync"

	cosiapi "github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// State is the COSI resource state of one emulated Talos node: an in-memory namespaced state
// with machined's namespaces and resource definitions, written by the node emulator through the
// setters and served read-only over the COSI State gRPC service. A State is safe for concurrent
// use.
type State struct {
	resources state.State
	server    *server.State

	mu       sync.Mutex
	nodename string
	pods     map[string]*podRecord // static pods by name
	volume   volumeIDs             // the EPHEMERAL partition's identifiers, fixed until Clear
}

// New returns a State holding only the namespace and resource definitions machined registers at
// boot. It panics if those definitions cannot be registered, which would be a programming error.
func New() *State {
	resources := state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		// machined's history settings, so that watches with tail events behave alike
		return inmem.NewStateWithOptions(
			inmem.WithHistoryInitialCapacity(8),
			inmem.WithHistoryMaxCapacity(1024),
			inmem.WithHistoryGap(4),
		)(ns)
	}))

	if err := register(context.Background(), resources); err != nil {
		panic(err)
	}

	s := &State{
		resources: resources,
		server:    server.NewState(state.WrapCore(state.Filter(resources, accessPolicy(resources)))),
	}
	s.resetLocked()

	return s
}

// Service returns the COSI State service description and its implementation over this state,
// as a pair for a method table or grpc.Server.RegisterService.
func (s *State) Service() (*grpc.ServiceDesc, cosiapi.StateServer) {
	return &cosiapi.State_ServiceDesc, s.server
}

// Register registers the COSI State service on srv.
func (s *State) Register(srv grpc.ServiceRegistrar) {
	srv.RegisterService(&cosiapi.State_ServiceDesc, s.server)
}

// Resources returns the state with full access, for resources the setters do not cover. Resources
// written there are served like the others and removed by Clear.
func (s *State) Resources() state.State {
	return s.resources
}

// Clear removes every resource outside the meta namespace (a node that was reset or powered
// off): watchers see them destroyed. The namespace and resource definitions stay.
func (s *State) Clear() error {
	s.mu.Lock()
	defer s.mu.Unlock()

	ctx := context.Background()

	nss, err := safe.StateListAll[*meta.Namespace](ctx, s.resources)
	if err != nil {
		return fmt.Errorf("cosistate: listing namespaces: %w", err)
	}

	rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, s.resources)
	if err != nil {
		return fmt.Errorf("cosistate: listing resource definitions: %w", err)
	}

	for ns := range nss.All() {
		if ns.Metadata().ID() == meta.NamespaceName {
			continue
		}

		for rd := range rds.All() {
			if err := s.destroyAll(ctx, ns.Metadata().ID(), rd.TypedSpec().Type); err != nil {
				return err
			}
		}
	}

	s.resetLocked()

	return nil
}

func (s *State) destroyAll(ctx context.Context, ns resource.Namespace, typ resource.Type) error {
	items, err := s.resources.List(ctx, resource.NewMetadata(ns, typ, "", resource.VersionUndefined))
	if err != nil {
		return fmt.Errorf("cosistate: listing %s in %s: %w", typ, ns, err)
	}

	for _, r := range items.Items {
		err := s.resources.Destroy(ctx, r.Metadata(), state.WithDestroyOwner(r.Metadata().Owner()))
		if err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("cosistate: destroying %s: %w", r.Metadata(), err)
		}
	}

	return nil
}

func (s *State) resetLocked() {
	s.nodename = ""
	s.pods = map[string]*podRecord{}
	s.volume = newVolumeIDs()
}

// put creates r or updates the resource in place to r's spec and labels, as owner (the Talos
// controller that owns such resources); an update that changes nothing is not written, so
// watchers see no event.
func put[T typed.DeepCopyable[T], E typed.Extension](s *State, r *typed.Resource[T, E], owner string) error {
	spec, labels := (*r.TypedSpec()).DeepCopy(), r.Metadata().Labels().Raw()

	err := safe.StateModify(context.Background(), s.resources, typed.NewResource[T, E](*r.Metadata(), spec),
		func(cur *typed.Resource[T, E]) error {
			*cur.TypedSpec() = spec.DeepCopy()

			for k, v := range labels {
				cur.Metadata().Labels().Set(k, v)
			}

			return nil
		}, state.WithUpdateOwner(owner))
	if err != nil {
		return fmt.Errorf("cosistate: writing %s: %w", r.Metadata(), err)
	}

	return nil
}

// destroy removes the resource at ptr if it exists.
func (s *State) destroy(ptr resource.Pointer, owner string) error {
	err := s.resources.Destroy(context.Background(), ptr, state.WithDestroyOwner(owner))
	if err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("cosistate: destroying %s: %w", ptr, err)
	}

	return nil
}

// prune destroys the resources of kind (namespace and type) whose IDs are not in keep.
func (s *State) prune(kind resource.Kind, owner string, keep map[resource.ID]bool) error {
	items, err := s.resources.List(context.Background(), kind)
	if err != nil {
		return fmt.Errorf("cosistate: listing %s: %w", kind.Type(), err)
	}

	for _, r := range items.Items {
		if !keep[r.Metadata().ID()] {
			if err := s.destroy(r.Metadata(), owner); err != nil {
				return err
			}
		}
	}

	return nil
}

// accessPolicy is machined's (internal/app/resources/access.go): reads only, of registered types
// in registered namespaces. Every caller counts as os:admin, so sensitive resources are served too.
func accessPolicy(st state.State) state.FilteringRule {
	return func(ctx context.Context, access state.Access) error {
		if !access.Verb.Readonly() {
			return status.Error(codes.PermissionDenied, "write access is not allowed")
		}

		_, err := safe.StateGet[*meta.ResourceDefinition](ctx, st, resource.NewMetadata(meta.NamespaceName,
			meta.ResourceDefinitionType, strings.ToLower(access.ResourceType), resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("resource type %q is not supported", access.ResourceType))
			}

			return err
		}

		_, err = safe.StateGet[*meta.Namespace](ctx, st, resource.NewMetadata(meta.NamespaceName,
			meta.NamespaceType, access.ResourceNamespace, resource.VersionUndefined))
		if err != nil {
			if state.IsNotFoundError(err) {
				return status.Error(codes.PermissionDenied, fmt.Sprintf("namespace %q is not supported", access.ResourceNamespace))
			}

			return err
		}

		return nil
	}
}
