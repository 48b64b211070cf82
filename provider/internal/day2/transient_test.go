package day2

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// apiserverBlip answers the first failures requests of every method with what kube-apiserver
// answered in the lab while a control plane's etcd member was leaving (a 500 carrying the etcd
// client's error), then the real answer; it returns a client of it (through Access, with its
// retries) and the count of the requests it got.
func apiserverBlip(t *testing.T, failures int32) (kubernetes.Interface, *atomic.Int32) {
	t.Helper()

	var n atomic.Int32

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")

		if n.Add(1) <= failures {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,`+
				`"message":"rpc error: code = Unknown desc = unexpected HTTP status code received from server: 200 (OK); malformed header: missing HTTP content-type"}`)

			return
		}

		switch r.Method {
		case http.MethodGet:
			_, _ = fmt.Fprint(w, `{"kind":"NodeList","apiVersion":"v1","items":[{"metadata":{"name":"cp-1"}}]}`)
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"kube-system"}}`)
		}
	}))
	t.Cleanup(srv.Close)

	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: %q}}]
users: [{name: admin, user: {token: t}}]
contexts: [{name: admin@lab, context: {cluster: lab, user: admin}}]
current-context: admin@lab
`, srv.URL)

	kube, err := Access{Kubeconfig: kubeconfig}.Kube()
	if err != nil {
		t.Fatal(err)
	}

	return kube, &n
}

func TestReadsSurviveAnAPIServerBlip(t *testing.T) {
	t.Parallel()

	kube, n := apiserverBlip(t, 2)

	nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("a list through two transient 500s: %v", err)
	}

	if len(nodes.Items) != 1 || n.Load() != 3 {
		t.Fatalf("got %d nodes after %d requests, want 1 after 3", len(nodes.Items), n.Load())
	}
}

func TestReadsGiveUpOnALastingFailure(t *testing.T) {
	t.Parallel()

	kube, n := apiserverBlip(t, 1000)

	_, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsInternalError(err) {
		t.Fatalf("want the apiserver's 500 once retries run out, got %v", err)
	}

	if got := n.Load(); got != readRetries+1 {
		t.Fatalf("sent %d times, want %d", got, readRetries+1)
	}
}

func TestWritesAreNotRepeated(t *testing.T) {
	t.Parallel()

	kube, n := apiserverBlip(t, 1)

	_, err := kube.CoreV1().ConfigMaps("kube-system").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) {
		t.Fatalf("want the create's 500, got %v", err)
	}

	if got := n.Load(); got != 1 {
		t.Fatalf("a create was sent %d times", got)
	}
}
