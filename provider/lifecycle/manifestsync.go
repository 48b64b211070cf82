package lifecycle

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/day2"
)

// ManifestSync applies the cluster's manifests (rendered Helm releases, inline manifests, extra
// manifest URLs) to its Kubernetes API after bootstrap, whenever they change, and prunes the
// objects it applied that the configuration dropped. Talos applies them only at bootstrap.
type ManifestSync struct{}

// docManifestSync describes ManifestSync in the schema.
const docManifestSync = "Applies the cluster's manifests (Helm releases, inline and extra manifests) with server-side " +
	"apply after bootstrap and whenever they change, and prunes objects the configuration dropped. " +
	"Registered by TalosProxmoxCluster."

// ManifestSyncArgs are a ManifestSync's inputs.
type ManifestSyncArgs struct {
	Kubeconfig             string            `pulumi:"kubeconfig" provider:"secret" doc:"Admin kubeconfig of the cluster."`
	Manifests              map[string]string `pulumi:"manifests" provider:"secret" doc:"Manifests by name (as in the control planes' inlineManifests)."`
	ExtraManifests         []string          `pulumi:"extraManifests,optional" doc:"URLs of extra manifests, fetched by the sync as Talos fetches them."`
	Namespaces             map[string]string `pulumi:"namespaces,optional"`
	PruneCrdsAndNamespaces bool              `pulumi:"pruneCrdsAndNamespaces,optional" doc:"Also delete CustomResourceDefinitions and Namespaces that left the configuration."`
	Force                  bool              `pulumi:"force,optional" doc:"Delete and recreate objects whose immutable fields changed."`
	NoWait                 []string          `pulumi:"noWait,optional" doc:"Manifests whose objects are applied without waiting for them to be ready (they become ready through something outside the cluster)."`
	Timeout                string            `pulumi:"timeout" doc:"How long a sync may take (a duration)."`
}

// ManifestSyncState is what the last sync applied.
type ManifestSyncState struct {
	ManifestSyncArgs
	// Applied is manifest name → object (group/Kind/namespace/name) → sha256 of the object.
	Applied map[string]map[string]string `pulumi:"applied,optional" provider:"secret" doc:"What the last sync applied: manifest → object → sha256."`
	// Changes says per manifest what the last sync (at preview: the planned one) added, changed
	// and pruned.
	Changes []string `pulumi:"changes,optional" doc:"Per manifest, the objects the last sync added, changed and pruned."`
}

// Annotate documents the resource.
func (r *ManifestSync) Annotate(an infer.Annotator) { an.Describe(r, docManifestSync) }

// Annotate documents the inputs.
func (a *ManifestSyncArgs) Annotate(an infer.Annotator) {
	describeFields(an, a)
	an.Describe(&a.Namespaces, "Extra manifest URL → the namespace of its namespaced objects that name none (`kubectl apply -n`).")
}

// Annotate documents the state.
func (s *ManifestSyncState) Annotate(an infer.Annotator) { describeFields(an, s) }

// desired parses the manifests and fetches the extra ones. Names keep the manifests apart in
// the plan; extra manifests are named by URL.
func (a ManifestSyncArgs) desired(ctx context.Context) ([]day2.Object, error) {
	ms := make([]day2.Manifest, 0, len(a.Manifests)+len(a.ExtraManifests))
	for _, name := range slices.Sorted(maps.Keys(a.Manifests)) {
		ms = append(ms, day2.Manifest{Name: name, Contents: a.Manifests[name]})
	}

	for _, url := range a.ExtraManifests {
		contents, err := fetch(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("extraManifests: %w", err)
		}

		ms = append(ms, day2.Manifest{Name: url, Contents: contents, Namespace: a.Namespaces[url]})
	}

	return day2.ParseManifests(ms)
}

func fetch(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", url, err)
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close() //nolint:errcheck

	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching %s: %s", url, resp.Status)
	}

	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))

	return string(b), err
}

// Diff shows an update exactly when the objects differ from what the last sync applied (added,
// changed, or dropped and to be pruned); which ones is logged by the update's preview.
func (r *ManifestSync) Diff(ctx context.Context, req infer.DiffRequest[ManifestSyncArgs, ManifestSyncState]) (infer.DiffResponse, error) {
	for _, contents := range req.Inputs.Manifests {
		if contents == "" { // not known yet (an output at preview): what changes is known at `up`
			return infer.DiffResponse{HasChanges: true}, nil
		}
	}

	objs, err := req.Inputs.desired(ctx)
	if err != nil {
		return infer.DiffResponse{}, err
	}

	plan := day2.PlanSync(req.State.Applied, objs)
	if plan.Empty() {
		return infer.DiffResponse{}, nil
	}

	detailed := map[string]p.PropertyDiff{}
	for _, m := range []map[string][]string{plan.Added, plan.Changed, plan.Pruned} {
		for name := range m {
			detailed[fmt.Sprintf("manifests[%q]", name)] = p.PropertyDiff{Kind: p.Update}
		}
	}

	return infer.DiffResponse{HasChanges: true, DetailedDiff: detailed}, nil
}

// Create syncs the manifests Talos applied at bootstrap (adopting its objects).
func (r *ManifestSync) Create(ctx context.Context, req infer.CreateRequest[ManifestSyncArgs]) (infer.CreateResponse[ManifestSyncState], error) {
	state, err := r.sync(ctx, req.Inputs, nil, req.DryRun)

	return infer.CreateResponse[ManifestSyncState]{ID: "manifests", Output: state}, err
}

// Update syncs what changed.
func (r *ManifestSync) Update(ctx context.Context, req infer.UpdateRequest[ManifestSyncArgs, ManifestSyncState]) (infer.UpdateResponse[ManifestSyncState], error) {
	state, err := r.sync(ctx, req.Inputs, req.State.Applied, req.DryRun)
	if err != nil {
		return infer.UpdateResponse[ManifestSyncState]{}, err
	}

	return infer.UpdateResponse[ManifestSyncState]{Output: state}, nil
}

func (r *ManifestSync) sync(ctx context.Context, in ManifestSyncArgs, last day2.Applied, dryRun bool) (ManifestSyncState, error) {
	state := ManifestSyncState{ManifestSyncArgs: in}
	log := p.GetLogger(ctx)

	if dryRun && in.Kubeconfig == "" { // a cluster being created: nothing to read yet
		return state, nil
	}

	timeout, err := parseDuration("timeout", in.Timeout)
	if err != nil {
		return state, err
	}

	objs, err := in.desired(ctx)
	if err != nil {
		return state, err
	}

	plan := day2.PlanSync(last, objs)
	state.Changes = plan.Summary()

	if dryRun {
		state.Changes = append(state.Changes, fieldChanges(ctx, in.Kubeconfig, objs, plan)...)

		for _, line := range state.Changes {
			log.Infof("manifest sync planned: %s", line)
		}

		return state, nil
	}

	start := time.Now()

	res, err := day2.Sync(ctx, day2.SyncOptions{
		Access: day2.Access{Kubeconfig: in.Kubeconfig}, Objects: objs, Prune: plan.PruneKeys(),
		PruneCRDsAndNamespaces: in.PruneCrdsAndNamespaces, Force: in.Force, NoWait: in.NoWait, Timeout: timeout, Progress: log.InfoStatus,
	})
	if err != nil {
		return state, err
	}

	state.Applied = day2.AppliedOf(objs)

	log.Infof("manifests in sync in %s: %d objects, %d created, %d changed, %d pruned%s", time.Since(start).Round(100*time.Millisecond),
		len(objs), len(res.Created), len(res.Configured), len(res.Pruned), left(res.Left))

	return state, nil
}

// fieldChanges says, per changed object, which fields the sync changes, as the API server's
// server-side apply dry run answers (Secrets' values as fingerprints). A cluster that cannot be
// asked within 30 s leaves it at the object names.
func fieldChanges(ctx context.Context, kubeconfig string, objs []day2.Object, plan day2.SyncPlan) []string {
	var changed []string
	for _, keys := range plan.Changed {
		changed = append(changed, keys...)
	}

	if len(changed) == 0 {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	fields, err := day2.FieldChanges(ctx, day2.Access{Kubeconfig: kubeconfig}, objs, changed)
	if err != nil {
		return []string{"the fields that change could not be read from the cluster: " + err.Error()}
	}

	lines := make([]string, 0, len(fields))
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		paths := strings.Join(fields[key], "; ")
		if paths == "" {
			paths = "no field changes on the server (it already holds this version)"
		}

		lines = append(lines, fmt.Sprintf("%s: %s", day2.Display(key), paths))
	}

	return lines
}

func left(keys []string) string {
	if len(keys) == 0 {
		return ""
	}

	shown := make([]string, len(keys))
	for i, k := range keys {
		shown[i] = day2.Display(k)
	}

	return "; left in place: " + strings.Join(shown, ", ")
}

// ManifestSyncKind registers ManifestSyncs.
var ManifestSyncKind = kindOf[ManifestSync, ManifestSyncArgs, Registered]()
