package httpapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 document of every route of routes. It is
// kept in YAML, which people can read and review, and served as JSON, which
// every tool takes; cmd/aapd's end-to-end suite validates its traffic
// against it, so it cannot drift from the handlers unnoticed.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPIYAML returns the OpenAPI document as it is written.
func OpenAPIYAML() []byte { return bytes.Clone(openAPIYAML) }

var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(openAPIYAML) })

// OpenAPIJSON returns the OpenAPI document as GET /openapi.json serves it.
func OpenAPIJSON() ([]byte, error) {
	b, err := openAPIJSON()
	return bytes.Clone(b), err
}

// openAPI is GET /openapi.json: public, like /healthz, so that tools can
// read the API before they hold a key.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	b, err := openAPIJSON()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(b)
	return nil
}

// yamlToJSON converts a YAML document to JSON, keeping the order of its
// mappings (encoding/json would sort a map's keys, scattering "openapi",
// "info" and "paths" through the document).
func yamlToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSONNode(&buf, &doc); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func writeJSONNode(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("yaml: a document holds %d nodes, want 1", len(n.Content))
		}
		return writeJSONNode(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSONNode(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			// A key given twice would be served twice, and JSON readers
			// disagree on which one wins.
			if line, dup := seen[n.Content[i].Value]; dup {
				return fmt.Errorf("yaml: line %d: key %q already defined at line %d", n.Content[i].Line, n.Content[i].Value, line)
			}
			seen[n.Content[i].Value] = n.Content[i].Line
			if i > 0 {
				buf.WriteByte(',')
			}
			// Keys are strings in JSON, whatever YAML read them as ('200').
			key, _ := json.Marshal(n.Content[i].Value)
			buf.Write(key)
			buf.WriteByte(':')
			if err := writeJSONNode(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSONNode(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return writeJSONScalar(buf, n)
	default:
		return fmt.Errorf("yaml: line %d: unexpected node kind %v", n.Line, n.Kind)
	}
	return nil
}

func writeJSONScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("yaml: line %d: %v", n.Line, err)
		}
		buf.Write(b)
	default:
		b, _ := json.Marshal(n.Value)
		buf.Write(b)
	}
	return nil
}
