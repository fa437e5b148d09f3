package scripts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupRebuildsABrokenCachedTool runs setup.sh against a temporary tool
// cache holding a truncated or failing binary (an interrupted copy): setup
// must say it rebuilds it, not exit silently under set -e. A fake go on
// PATH refuses to build, so the check stops where the build would start;
// fake gcloud, java, clang and apt-get keep it off the machine's own tools.
func TestSetupRebuildsABrokenCachedTool(t *testing.T) {
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	for _, tool := range []string{"bash", "awk", "curl", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	elf, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	truncated := elf[:4096]
	goodTemporal := []byte("#!fake-temporal\n")

	cases := []struct {
		name               string
		temporal, bigquery []byte
		want               []string
	}{
		{
			name:     "truncated Temporal CLI",
			temporal: truncated,
			want:     []string{"Temporal CLI at", "rebuilding", "fake go: no builds"},
		},
		{
			name:     "truncated BigQuery emulator",
			temporal: goodTemporal,
			bigquery: truncated,
			want:     []string{"Temporal CLI v1.5.1: cached", "BigQuery emulator at", "does not run", "rebuilding", "fake go: no builds"},
		},
		{
			// Empty output is an unversioned build only when --version succeeded.
			name:     "BigQuery emulator that fails silently",
			temporal: goodTemporal,
			bigquery: []byte("#!/bin/sh\nexit 1\n"),
			want:     []string{"does not run", "rebuilding", "fake go: no builds"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakeTools(t, realGo)
			cache := t.TempDir()
			bin := filepath.Join(cache, "investigator", "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			writeExe(t, filepath.Join(bin, "temporal"), tc.temporal)
			if tc.bigquery != nil {
				writeExe(t, filepath.Join(bin, "bigquery-emulator"), tc.bigquery)
			}
			cmd := exec.Command("bash", "setup.sh")
			cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"))
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err == nil {
				t.Fatalf("setup.sh succeeded, want it to stop at the refused build; output:\n%s", out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("setup.sh output lacks %q; output:\n%s", w, out.String())
				}
			}
			// The broken file stays until a build succeeds (builds go to a
			// temporary directory, then move into place).
			if left, err := os.ReadDir(bin); err == nil {
				for _, e := range left {
					if strings.HasPrefix(e.Name(), ".build") {
						t.Errorf("a failed build left %s in the tool cache", e.Name())
					}
				}
			}
		})
	}
}

func writeExe(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// fakeTools returns a directory of stand-ins: go (the real one, except that
// it builds nothing and reads "#!fake-temporal" files as Temporal CLI
// v1.5.1), a Cloud SDK with the Firestore and Pub/Sub emulators, java,
// clang and a failing apt-get.
func fakeTools(t *testing.T, realGo string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	sdk := filepath.Join(dir, "sdk")
	for _, d := range []string{bin, filepath.Join(sdk, "bin"), filepath.Join(sdk, "platform", "cloud-firestore-emulator"), filepath.Join(sdk, "platform", "pubsub-emulator")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(sdk, "platform", "cloud-firestore-emulator", "cloud-firestore-emulator.jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(sdk, "bin", "gcloud"), []byte("#!/bin/sh\nexit 0\n"))
	if err := os.Symlink(filepath.Join(sdk, "bin", "gcloud"), filepath.Join(bin, "gcloud")); err != nil {
		t.Fatal(err)
	}
	writeExe(t, filepath.Join(bin, "go"), []byte(`#!/bin/sh
case "$1" in
version)
	if [ "$2" = -m ] && head -c 15 "$3" 2>/dev/null | grep -q '^#!fake-temporal'; then
		printf '%s: go1.26\n\tpath\tgithub.com/temporalio/cli/cmd/temporal\n\tmod\tgithub.com/temporalio/cli\tv1.5.1\th1:x\n' "$3"
		exit 0
	fi ;;
install|build|mod)
	echo "fake go: no builds in this test ($*)" >&2
	exit 3 ;;
esac
exec '`+realGo+`' "$@"
`))
	writeExe(t, filepath.Join(bin, "java"), []byte("#!/bin/sh\necho 'openjdk version \"21\" (fake)' >&2\n"))
	writeExe(t, filepath.Join(bin, "clang"), []byte("#!/bin/sh\necho 'clang version 0 (fake)'\n"))
	writeExe(t, filepath.Join(bin, "clang++"), []byte("#!/bin/sh\necho 'clang version 0 (fake)'\n"))
	writeExe(t, filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\necho 'fake apt-get: refused' >&2\nexit 100\n"))
	return bin
}
