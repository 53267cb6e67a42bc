package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard's JSON model checked here.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// PromQL that is not a metric name: label matchers, grouping clauses,
// ranges, strings and Grafana's variables are cut out before identifiers
// are read; what is left and not a function or keyword names a metric.
var (
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promVariables = regexp.MustCompile(`\$\{?\w+\}?`)
	promNumbers   = regexp.MustCompile(`\b\d+(\.\d+)?[a-z]*\b`)
	promIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*\s*\(?`)
	promKeywords  = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "bool": true,
		"and": true, "or": true, "unless": true, "offset": true, "group_left": true, "group_right": true}
)

// metricNames lists the metrics a PromQL expression reads, histogram
// series (_bucket, _sum, _count) by their family's name.
func metricNames(expr string) []string {
	for _, re := range []*regexp.Regexp{promMatchers, promGrouping, promRanges, promVariables, promNumbers} {
		expr = re.ReplaceAllString(expr, " ")
	}
	var names []string
	for _, id := range promIdent.FindAllString(expr, -1) {
		if strings.HasSuffix(id, "(") {
			continue // a function
		}
		id = strings.TrimSpace(id)
		if promKeywords[id] {
			continue
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(id, suffix); ok {
				id = base
				break
			}
		}
		names = append(names, id)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`histogram_quantile(0.95, sum by (le, route) (rate(aapd_http_request_duration_seconds_bucket{instance=~"$instance",status="5xx"}[$__rate_interval]))) / on (x) sum(rate(b_total[5m]) offset 1h)`)
	if strings.Join(got, ",") != "aapd_http_request_duration_seconds,b_total" {
		t.Errorf("metricNames = %v", got)
	}
}

// checkDashboard loads a Grafana dashboard and checks that it has the
// shape Grafana's schema asks for, and that each panel's queries name only
// metrics in exported (family name → type, as /metrics declares them).
func checkDashboard(t *testing.T, path string, exported map[string]string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, schemaVersion %d, %d panels", path, d.UID, d.Title, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("no datasource variable: %v", vars)
	}
	ids := map[int]bool{}
	var check func(p panel)
	check = func(p panel) {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or taken", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" || p.GridPos == nil || p.GridPos.W < 1 || p.GridPos.W > 24 || p.GridPos.H < 1 {
			t.Errorf("panel %d (%q): needs a title, a type and a gridPos within 24 columns", p.ID, p.Title)
		}
		for _, sub := range p.Panels {
			check(sub)
		}
		if p.Type == "row" {
			return
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: needs the Prometheus ${datasource} and a target", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || tg.Expr == "" {
				t.Errorf("panel %q: target %q needs a unique refId and an expr", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: %s names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if _, ok := exported[n]; !ok {
					t.Errorf("panel %q: %s names %s, which aapd does not export", p.Title, tg.Expr, n)
				}
			}
		}
	}
	for _, p := range d.Panels {
		check(p)
	}
}
