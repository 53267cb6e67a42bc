package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aapd/aapd/store/storetest"
)

// TestOpenAPIServedAsJSON fetches GET /openapi.json without a key: the
// document, as JSON, in the order it is written.
func TestOpenAPIServedAsJSON(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, storetest.Open(t))
	res, err := http.Get(s.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	want, err := OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Error("the served document is not OpenAPIJSON()")
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if !strings.HasPrefix(string(body), `{"openapi":"3.1.`) {
		t.Errorf("the document does not start with its version: %.40s", body)
	}
}

// TestYAMLToJSON covers the scalars and shapes the converter must keep.
func TestYAMLToJSON(t *testing.T) {
	got, err := yamlToJSON([]byte("z: 1\na:\n  '200': {x: [true, null, 1.5, '3', \"q\\\"\"]}\nb: ~\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"z":1,"a":{"200":{"x":[true,null,1.5,"3","q\""]}},"b":null}` + "\n"
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// A key given twice (as a merge that interleaves two branches' paths can
// leave it) is an error, not a document served with the key twice.
func TestYAMLToJSONRefusesDuplicateKeys(t *testing.T) {
	_, err := yamlToJSON([]byte("paths:\n  /a:\n    get: {}\n    get: {}\n"))
	if err == nil || !strings.Contains(err.Error(), `key "get" already defined at line 3`) {
		t.Errorf("err = %v, want the duplicate key named", err)
	}
}
