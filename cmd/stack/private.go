package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// What the stack keeps under .data says what was investigated (service
// logs, the starter's output with findings and verdicts, Temporal's
// history): none of it is for other local users. .data is 0700, an
// existing one made so; files the stack writes are 0600; and what it
// starts runs with umask 077, so the services' own files follow.

// mkdirPrivate makes dir and .data, owner only; an existing .data from
// before is made so too.
func (s *Stack) mkdirPrivate(dir string) error {
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(s.DataDir, s.dataDirMode()); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o700)
}

// dataDirMode is 0700, or 0711 while the cluster's PostgreSQL runs as
// another user (the stack runs as root; postgresUser) and must reach its
// data directory inside: others may then pass through .data, but every
// entry in it is its owner's only.
func (s *Stack) dataDirMode() os.FileMode {
	if st, err := os.Stat(s.postgresDir()); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
			return 0o711
		}
	}
	return 0o700
}

// createPrivate creates or truncates a file readable by its owner only:
// os.Create keeps the mode of a file that is already there.
func createPrivate(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// umaskMu: the umask is the process's; a start under startPrivate must
// not restore it while another start is under way.
var umaskMu sync.Mutex

// startPrivate starts cmd with umask 077, which it inherits: the files a
// service creates (Temporal's database, the emulators' data) are its
// owner's only. The stack's own files meanwhile only get stricter.
func startPrivate(cmd *exec.Cmd) error {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	return cmd.Start()
}

// isSecretVar names a setting that holds a credential of the product's
// (the model's key, the intel services' keys, a real Slack webhook, the
// codec server's token) or one that looks like one.
func isSecretVar(k string) bool {
	switch k {
	case "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLACK_WEBHOOK_URL", "CODEC_SERVER_TOKEN",
		"GOOGLE_APPLICATION_CREDENTIALS", "PGPASSWORD":
		return true
	}
	for _, suffix := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_CREDENTIALS"} {
		if len(k) > len(suffix) && k[len(k)-len(suffix):] == suffix {
			return true
		}
	}
	return false
}

// envFor is the environment svc starts with: the stack's, less the
// product's secrets unless svc is one of the programs that use them (the
// worker, the codec server). An emulator or Temporal server has no use for
// the model's or the intel services' keys.
func (s *Stack) envFor(svc *Service) []string {
	if svc.Secrets {
		return append([]string{}, s.env...)
	}
	return withoutSecrets(s.env)
}

func withoutSecrets(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !isSecretVar(k) {
			out = append(out, kv)
		}
	}
	return out
}
