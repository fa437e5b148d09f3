package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/secops-agent/investigator/intake"
)

// intakeArgs are the arguments of local intake k (from 1).
func (s *Stack) intakeArgs(token string, k int) []string {
	args := []string{"intake", "--log-level", "info",
		"--subscription", intake.Subscription(s.Project, intake.SubscriptionIntake),
		"--dead-letter-topic", intake.Topic(s.Project, intake.TopicDeadLetter),
		"--results-topic", intake.Topic(s.Project, intake.TopicVerdicts),
		"--slack", "--listen", s.intakeAddr(k), "--token-file", token}
	// STACK_INTAKE_FLAGS: more of starter intake's flags, for every intake
	// (the cluster tests: --no-group --max-running 25).
	return append(args, strings.Fields(getenv("STACK_INTAKE_FLAGS"))...)
}

func (s *Stack) intakeTokenPath() string { return filepath.Join(s.DataDir, "intake-token") }

// intakeToken returns the webhook's token file, written with a random
// token (readable by its owner only) the first time. The cluster's two
// intakes start at once: the token is written whole to a file of its own
// and linked into place, so one token wins and both read it; neither sees
// an empty or half-written file.
func (s *Stack) intakeToken() (string, error) {
	return s.secretFile(s.intakeTokenPath())
}

// secretFile makes p hold a random token (0600) unless it holds one.
func (s *Stack) secretFile(p string) (string, error) {
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	if err := s.mkdirPrivate(s.DataDir); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(b) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	// Link, not rename: a token already there (the other intake's) stays.
	if err := os.Link(tmp.Name(), p); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	return p, nil
}

// localSlackURL is the local receiver's webhook URL.
func (s *Stack) localSlackURL() string { return "http://" + s.addr("SLACK") + "/services/local" }

// intakeAddr is where intake k (from 1) listens: the cluster's second
// intake takes the port after STACK_INTAKE_PORT.
func (s *Stack) intakeAddr(k int) string {
	return fmt.Sprintf("%s:%d", s.Host, s.port("INTAKE")+max(k, 1)-1)
}
