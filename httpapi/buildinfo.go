package httpapi

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo describes the binary, for aapd_build_info: which version each
// replica runs shows on a dashboard during a rollout.
type BuildInfo struct {
	Version   string
	Revision  string
	GoVersion string // empty: the running Go's
}

// newBuildInfo is the aapd_build_info gauge: always 1, the build in its
// labels (one series per binary).
func newBuildInfo(b BuildInfo) prometheus.Collector {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "aapd_build_info",
		Help: "Always 1; the labels describe the running binary (module version, VCS revision, Go version).",
		ConstLabels: prometheus.Labels{
			"version":   or(b.Version, "(devel)"),
			"revision":  or(b.Revision, "unknown"),
			"goversion": or(b.GoVersion, runtime.Version()),
		},
	})
	g.Set(1)
	return g
}
