package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const pubsubReadyTimeout = 60 * time.Second

// StartPubSub starts the official Pub/Sub emulator (`gcloud beta emulators
// pubsub start`, the Debian package google-cloud-cli-pubsub-emulator) for
// project on a free port of 127.0.0.1 and waits until it answers. It
// returns the emulator's host:port, for PUBSUB_EMULATOR_HOST, and a stop
// function that ends its whole process group. The emulator starts empty:
// topics and subscriptions are made through the API.
func StartPubSub(project string) (host string, stop func(), err error) {
	return onFreePort(func(host string) (func(), error) { return StartPubSubOn(project, host) })
}

// StartPubSubOn is StartPubSub on a given host:port.
func StartPubSubOn(project, host string) (stop func(), err error) {
	gcloud, err := findPubSubEmulator()
	if err != nil {
		return nil, err
	}
	return startEmulator("Pub/Sub", host, pubsubReadyTimeout, gcloud, "beta", "emulators", "pubsub", "start", "--host-port="+host, "--project="+project)
}

// PubSub starts a Pub/Sub emulator for the test, stops it when the test
// ends, and sets PUBSUB_EMULATOR_HOST for the test's duration. It returns
// the emulator's host:port. Like Firestore, it cannot be called from a
// parallel test.
func PubSub(tb testing.TB, project string) string {
	tb.Helper()
	tb.Setenv("PUBSUB_EMULATOR_HOST", "")
	host, stop, err := StartPubSub(project)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	tb.Cleanup(stop)
	tb.Setenv("PUBSUB_EMULATOR_HOST", host)
	return host
}

// findPubSubEmulator returns the gcloud path after checking that the
// Pub/Sub emulator and Java are installed.
func findPubSubEmulator() (string, error) {
	gcloud, err := exec.LookPath("gcloud")
	if err != nil {
		return "", errors.New("the Pub/Sub emulator needs the gcloud CLI, which is not on PATH; install the Google Cloud CLI and its google-cloud-cli-pubsub-emulator package (scripts/setup.sh does, as root)")
	}
	if real, err := filepath.EvalSymlinks(gcloud); err == nil {
		root := filepath.Dir(filepath.Dir(real))
		if isFile(filepath.Join(root, "lib", "gcloud.py")) && !isDir(filepath.Join(root, "platform", "pubsub-emulator")) {
			return "", fmt.Errorf("the Pub/Sub emulator is not installed in %s; install the google-cloud-cli-pubsub-emulator package (scripts/setup.sh does, as root) or `gcloud components install pubsub-emulator`", root)
		}
	}
	if os.Getenv("JAVA_HOME") == "" {
		if _, err := exec.LookPath("java"); err != nil {
			return "", errors.New("the Pub/Sub emulator needs Java 11 or newer, but java is not on PATH and JAVA_HOME is not set")
		}
	}
	return gcloud, nil
}
