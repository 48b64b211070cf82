package machineconfig

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/talos-proxmox/pulumi-talos-proxmox/provider/internal/redact"
)

// strategicForm writes a JSON patch (RFC 6902) as the strategic merge patch that does the same,
// for the error that tells a user to rewrite it: "add" and "replace" set the value at the path,
// "remove" deletes the key ($patch: delete). It returns "" when the patch cannot be written so
// (list indexes, other operations).
func strategicForm(text string) string {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}

	if err := json.Unmarshal([]byte(text), &ops); err != nil || len(ops) == 0 {
		return ""
	}

	root := map[string]any{}

	for _, o := range ops {
		keys := strings.Split(strings.TrimPrefix(o.Path, "/"), "/")
		if o.Path == "" || !strings.HasPrefix(o.Path, "/") {
			return ""
		}

		m := root

		for i, k := range keys {
			k = strings.NewReplacer("~1", "/", "~0", "~").Replace(k)
			if _, err := strconv.Atoi(k); err == nil || k == "-" {
				return "" // a list element: no strategic merge equivalent
			}

			if i < len(keys)-1 {
				next, ok := m[k].(map[string]any)
				if !ok {
					next = map[string]any{}
					m[k] = next
				}

				m = next

				continue
			}

			switch o.Op {
			case "add", "replace":
				m[k] = o.Value
			case "remove":
				m[k] = map[string]any{"$patch": "delete"}
			default:
				return ""
			}
		}
	}

	out, err := yaml.Marshal(root)
	if err != nil {
		return ""
	}

	// The suggestion is printed in an error: a password or key the patch sets shows as its
	// fingerprint, as in a preview's configuration diff.
	shown, err := redact.YAML(string(out))
	if err != nil {
		return ""
	}

	return shown
}
