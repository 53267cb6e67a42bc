package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/aapd/aapd/httpapi"
)

// buildVersion describes the binary from what the Go toolchain recorded in
// it: the module version (a tag, or (devel) for a local build), the VCS
// revision and whether the tree had uncommitted changes, and the Go version.
type buildVersion struct {
	Version   string
	Revision  string
	Modified  bool
	GoVersion string
}

// Set with -ldflags "-X main.version=... -X main.revision=..." where the
// toolchain cannot record them (an image built without .git, as in the
// Dockerfile); what the toolchain recorded wins.
var (
	version  string
	revision string
)

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "(devel)", Revision: "unknown"}
	if version != "" {
		v.Version = version
	}
	if revision != "" {
		// make build stamps a tree with changes as REVISION-modified.
		v.Revision, v.Modified = strings.CutSuffix(revision, "-modified")
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.GoVersion = info.GoVersion
	if info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func (v buildVersion) String() string {
	rev := v.Revision
	if v.Modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("aapd %s, revision %s, %s", v.Version, rev, v.GoVersion)
}

func versionCmd(args []string, stdout, stderr io.Writer) error {
	f := newFlagSet("version", stderr)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, readBuildVersion())
	return nil
}

// buildInfo is the build as aapd_build_info reports it.
func buildInfo() httpapi.BuildInfo {
	v := readBuildVersion()
	rev := v.Revision
	if v.Modified {
		rev += "-modified"
	}
	return httpapi.BuildInfo{Version: v.Version, Revision: rev, GoVersion: v.GoVersion}
}
