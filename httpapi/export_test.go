package httpapi

import (
	"sort"

	"github.com/gorilla/mux"
)

// RouteTemplates lists every route routes registers with the doors
// mounted, as "METHOD /template", sorted: what the OpenAPI document must
// describe (openapi_test.go).
func RouteTemplates(doors ...Door) ([]string, error) {
	s := &Server{metrics: newMetrics(metricsConfig{}), cfg: Config{Doors: doors}}
	var out []string
	err := s.routes().(*mux.Router).Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil // a subrouter's own route: no path of its own
		}
		methods, err := route.GetMethods()
		if err != nil {
			return nil
		}
		for _, m := range methods {
			out = append(out, m+" "+tpl)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}
