package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/secops-agent/investigator/internal/testenv"
)

// clusterServer is the local cluster's Temporal server (bench -cluster):
// PostgreSQL and the frontend, history, matching and internal-worker
// services as separate processes, started by bin/stack (`stack up
// --profile cluster-server`) in a data directory and on ports of the
// bench's own, and stopped with it.
type clusterServer struct {
	frontend string
	data     string
	env      []string // bin/stack's
	stack    string
	root     string
}

// clusterPorts are the STACK_<VAR>_PORT settings of the cluster-server
// profile (cmd/stack/cluster.go).
var clusterPorts = []string{"POSTGRES", "TEMPORAL", "TEMPORAL_HTTP", "TEMPORAL_FRONTEND_MEMBERSHIP", "TEMPORAL_FRONTEND_METRICS",
	"TEMPORAL_HISTORY", "TEMPORAL_HISTORY_MEMBERSHIP", "TEMPORAL_HISTORY_METRICS",
	"TEMPORAL_MATCHING", "TEMPORAL_MATCHING_MEMBERSHIP", "TEMPORAL_MATCHING_METRICS",
	"TEMPORAL_WORKER", "TEMPORAL_WORKER_MEMBERSHIP", "TEMPORAL_WORKER_METRICS"}

// clusterServices are the processes whose CPU the report splits out.
var clusterServices = []string{"temporal-frontend", "temporal-history", "temporal-matching", "temporal-worker", "postgres"}

func startClusterServer(ctx context.Context, root, dir string) (*clusterServer, error) {
	c := &clusterServer{data: filepath.Join(dir, "cluster"), stack: filepath.Join(dir, "stack"), root: root}
	// PostgreSQL runs as the postgres user when the bench runs as root.
	if err := os.MkdirAll(c.data, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, c.data} {
		if err := os.Chmod(d, 0o755); err != nil {
			return nil, err
		}
	}
	c.env = append(os.Environ(), "STACK_ROOT="+root, "STACK_DATA_DIR="+c.data, "STACK_STOP_TIMEOUT=10")
	used := map[int]bool{}
	for _, v := range clusterPorts {
		p := 0
		for p == 0 || used[p] {
			var err error
			if p, err = testenv.FreePort(); err != nil {
				return nil, err
			}
		}
		used[p] = true
		c.env = append(c.env, fmt.Sprintf("STACK_%s_PORT=%d", v, p))
		if v == "TEMPORAL" {
			c.frontend = fmt.Sprintf("127.0.0.1:%d", p)
		}
	}
	cmd := exec.CommandContext(ctx, c.stack, "up", "--profile", "cluster-server")
	cmd.Env, cmd.Dir = c.env, root
	if out, err := cmd.CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("the local cluster did not start (go tool task cluster-setup builds its tools): %v: %s", err, lastLine(string(out)))
	}
	return c, nil
}

func (c *clusterServer) stop() {
	cmd := exec.Command(c.stack, "stop")
	cmd.Env, cmd.Dir = c.env, c.root
	_ = cmd.Run()
}

// cpu is the CPU time of each service so far, by service name: its process
// group and every descendant (PostgreSQL's backends each start a session
// of their own).
func (c *clusterServer) cpu() map[string]float64 {
	groups := map[int]string{}
	for _, name := range clusterServices {
		b, err := os.ReadFile(filepath.Join(c.data, "pids", name+".pid"))
		if pid, err2 := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && err2 == nil {
			groups[pid] = name
		}
	}
	stats := map[int]procStat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, err := readStat(pid); err == nil {
				stats[pid] = st
			}
		}
	}
	owner := func(pid int) (string, bool) {
		for range 64 { // up the parent chain to a service's group
			st, ok := stats[pid]
			if !ok {
				return "", false
			}
			if name, ok := groups[st.pgrp]; ok {
				return name, true
			}
			pid = st.ppid
		}
		return "", false
	}
	out := map[string]float64{}
	for pid, st := range stats {
		if name, ok := owner(pid); ok {
			out[name] += st.cpu
		}
	}
	return out
}

// scaleOut is the cluster's batches with one worker and with all of them.
type scaleOut struct {
	one, all []*batch
	workers  int
	started  time.Duration // how long the added workers took to poll
}
