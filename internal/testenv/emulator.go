package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// startEmulator starts one of the Google Cloud CLI's emulators (argv) on
// host and waits until GET http://host/ answers 200. The emulator runs in
// a process group of its own (startGuarded: it dies with this process), so
// that stop reaches the JVM grandchild too; stop
// returns once the group is gone and the port is free, and is safe to call
// more than once.
func startEmulator(what, host string, timeout time.Duration, argv ...string) (stop func(), err error) {
	out := &tailBuffer{max: outputTail}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = out
	cmd.Stderr = out
	// Fail instead of waiting for an answer to an interactive prompt.
	cmd.Env = append(os.Environ(), "CLOUDSDK_CORE_DISABLE_PROMPTS=1")
	pgid, err := startGuarded(cmd)
	if err != nil {
		return nil, fmt.Errorf("start the %s emulator: %w", what, err)
	}
	// Wait returns once gcloud has exited and every process holding its
	// output pipe (the wrapper script and the JVM) has closed it, so done
	// means the whole emulator is gone.
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() { stopGroup(pgid, done, host) })
	}
	if err := waitFirestoreReady(host, done, timeout); err != nil {
		stop()
		return nil, fmt.Errorf("the %s emulator on %s did not start: %w\nemulator output:\n%s", what, host, err, out.String())
	}
	return stop, nil
}
