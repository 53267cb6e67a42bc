// Package transfertest compares export documents in tests.
package transfertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Normalized is a document's lines decoded, with what an import changes
// replaced by what it stands for: the session's id (SESSION), turn ids by
// order of appearance (TURN1, …) and the checksums (SUM). Two documents of
// one session, one exported, the other exported after an import, are equal
// once normalized.
func Normalized(t testing.TB, doc []byte) []map[string]any {
	t.Helper()
	turns := map[string]string{}
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(doc), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		switch m["type"] {
		case "header":
			m["session"].(map[string]any)["id"] = "SESSION"
		case "turn":
			id := m["id"].(string)
			if turns[id] == "" {
				turns[id] = fmt.Sprintf("TURN%d", len(turns)+1)
			}
			m["id"] = turns[id]
		case "message":
			if id, ok := m["turn"].(string); ok {
				m["turn"] = turns[id]
			}
		case "schedule":
			m["id"] = "SCHEDULE"
			if id, ok := m["lastTurn"].(string); ok {
				m["lastTurn"] = turns[id]
			}
		case "trailer", "tenant-trailer":
			m["sha256"] = "SUM"
		}
		out = append(out, m)
	}
	return out
}

// Diff returns how two normalized documents differ, line by line ("" for
// none).
func Diff(a, b []map[string]any) string {
	var out strings.Builder
	if len(a) != len(b) {
		fmt.Fprintf(&out, "%d lines, then %d\n", len(a), len(b))
	}
	for i := range min(len(a), len(b)) {
		x, _ := json.Marshal(a[i])
		y, _ := json.Marshal(b[i])
		if string(x) != string(y) {
			fmt.Fprintf(&out, "line %d:\n  %s\n  %s\n", i+1, x, y)
		}
	}
	return out.String()
}
