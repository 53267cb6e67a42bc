package httpapi_test

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/httpapi/agui"
	openaidoor "github.com/aapd/aapd/httpapi/openai"
	"github.com/aapd/aapd/httpapi/openapitest"
	"github.com/aapd/aapd/httpapi/sandboxagent"
	v1 "github.com/aapd/aapd/httpapi/v1"
	v3 "github.com/aapd/aapd/httpapi/v3"
)

func loadDocument(t *testing.T) *openapitest.Document {
	t.Helper()
	d, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOpenAPIDocumentIsValid checks the document against the OpenAPI 3.1
// specification's schema, and that every schema in it compiles.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	d := loadDocument(t)
	if v := d.Version(); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	for _, msg := range d.Check() {
		t.Error(msg)
	}
	for name := range d.Model().Components.Schemas.KeysFromOldest() {
		// Validating anything compiles the schema and its references.
		for _, msg := range d.CheckSchema(name, []byte(`null`)) {
			if strings.Contains(msg, "compil") || strings.Contains(msg, "no schema") {
				t.Errorf("schema %s: %s", name, msg)
			}
		}
	}
}

// TestOpenAPIDocumentsEveryRoute holds the document's paths and methods to
// the routers' (the AAP API's and the admin API's): a route added without
// its description (or a description left after its route is gone) fails
// here. Routes under
// openapitest.NotYetDocumented are let be. The sandbox-agent door's routes
// under /sandbox-agent/v1 are documented by its own document (served at
// sandboxagent.DocumentPath, which aapd's documents), and held to it.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	routes, err := httpapi.RouteTemplates(v3.New(v3.Config{}), v1.New(v1.Config{}), agui.New(agui.Config{}), sandboxagent.New(sandboxagent.Config{}), openaidoor.New(openaidoor.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	// The operator's API is its own handler, mounted under /admin/v1/.
	adminRoutes, err := admin.RouteTemplates()
	if err != nil {
		t.Fatal(err)
	}
	if len(adminRoutes) == 0 {
		t.Fatal("no admin routes")
	}
	routes = append(routes, adminRoutes...)
	src, err := httpapi.OpenAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	var seed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(sandboxagent.OpenAPIJSON(), &seed); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for prefix, paths := range map[string]map[string]map[string]json.RawMessage{"": doc.Paths, sandboxagent.Prefix: seed.Paths} {
		for path, item := range paths {
			for method := range item {
				switch method {
				case "get", "put", "post", "delete", "options", "head", "patch", "trace":
					documented = append(documented, strings.ToUpper(method)+" "+prefix+path)
				}
			}
		}
	}
	sort.Strings(documented)
	for _, r := range routes {
		if _, path, _ := strings.Cut(r, " "); !openapitest.Undocumented(path) && !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not in httpapi/openapi.yaml (nor, under %s, in the sandbox-agent document)", r, sandboxagent.Prefix)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routes, d) {
			t.Errorf("httpapi/openapi.yaml documents %s, which no route serves", d)
		}
	}
}
