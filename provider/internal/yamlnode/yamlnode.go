// Package yamlnode holds what code walking YAML node trees (rendered charts, machine
// configurations) needs in more than one place.
package yamlnode

import "go.yaml.in/yaml/v4"

// Child is mapping m's value for key, or nil (also when m is not a mapping).
func Child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}

	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}

	return nil
}
