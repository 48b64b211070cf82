package talosstandin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// createSchematic registers a schematic with the Image Factory (POST /schematics), as the
// upstream resource does; the factory answers with the schematic id.
func createSchematic(ctx context.Context, factoryURL, schematic string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(factoryURL, "/")+"/schematics",
		bytes.NewReader([]byte(schematic)))
	if err != nil {
		return "", err
	}

	req.Header.Set("Content-Type", "application/yaml")

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("creating the schematic at %s: %w", factoryURL, err)
	}
	defer resp.Body.Close() //nolint:errcheck

	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("creating the schematic at %s: %s: %s", factoryURL, resp.Status, strings.TrimSpace(string(body)))
	}

	var out struct {
		ID string `json:"id"`
	}

	if err := json.Unmarshal(body, &out); err != nil || out.ID == "" {
		return "", fmt.Errorf("creating the schematic at %s: unexpected answer %q", factoryURL, body)
	}

	return out.ID, nil
}
