package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Cluster is the production-shaped local stack (go tool task cluster,
// design/deploy.md): PostgreSQL, the Temporal frontend, history, matching
// and internal-worker services as separate processes from one
// configuration file (config/temporal/cluster.yaml), the Web UI server,
// and two workers and two intakes beside the dev stack's emulators.
const Cluster Profile = "cluster"

// ClusterServer is the cluster's Temporal server alone (PostgreSQL, the
// schema and the four services): what the bench's -cluster runs its own
// workers against (`stack up --profile cluster-server`).
const ClusterServer Profile = "cluster-server"

// The cluster's own entries. The shared ones (emulators, stand-in, codec
// server, workers, intakes) name Cluster in table.go.
var clusterTable = []Service{
	{
		// Debian's server, its data directory under .data/postgres. It
		// refuses to run as root: as root the stack runs it as the
		// postgres user.
		Name: "postgres", Title: "PostgreSQL", Profiles: []Profile{Cluster, ClusterServer},
		Ports:   []Port{{"POSTGRES", 5433}},
		Launch:  postgresLaunch,
		Ready:   postgresProbe{},
		Timeout: 60 * time.Second, TimeoutVar: "POSTGRES",
		Match: `postgres\b.* -D `,
		// Anything else on 5433 (Debian's second cluster's port) is not
		// taken over: its password is not the stack's.
		Reuse: ReuseOwn,
	},
	{
		// Creates the two databases where missing and brings both schemas
		// (default store, SQL advanced visibility) to the server's version:
		// on the first start and after an upgrade of the server.
		Name: "temporal-schema", Title: "Temporal schema", Profiles: []Profile{Cluster, ClusterServer},
		Needs: []string{"postgres"}, Job: true, Reuse: ReuseNever,
		Ready: LogLine{Text: "schema: "}, Match: "cluster-schema",
		Launch: func(s *Stack, _ int) (Launch, error) {
			self, err := os.Executable()
			if err != nil {
				return Launch{}, err
			}
			if !isExecutable(s.SQLTool) {
				return Launch{}, fmt.Errorf("Temporal's SQL tool not found at %s: run 'go tool task cluster-setup'", s.SQLTool)
			}
			return Launch{Argv: []string{self, "cluster-schema"}, Note: " (databases temporal and temporal_visibility)"}, nil
		},
		Timeout: 120 * time.Second, TimeoutVar: "SCHEMA",
	},
	// One after the other: the first start of a service on a fresh
	// database writes the cluster's metadata, and two at once collide.
	// Matching is ready in a moment, history once it owns its shards.
	temporalService("matching", "temporal.api.workflowservice.v1.MatchingService", "TEMPORAL_MATCHING", 7235, 6935, 9235,
		"temporal-schema", "postgres"),
	temporalService("history", "temporal.api.workflowservice.v1.HistoryService", "TEMPORAL_HISTORY", 7234, 6934, 9234,
		"temporal-schema", "postgres", "temporal-matching"),
	temporalService("frontend", "temporal.api.workflowservice.v1.WorkflowService", "TEMPORAL", 7233, 6933, 9233,
		"temporal-schema", "postgres", "temporal-history", "temporal-matching"),
	// The internal worker runs Temporal's own system workflows (namespace
	// deletion, batch operations, the Worker Deployment workflows).
	temporalService("worker", "", "TEMPORAL_WORKER", 7239, 6939, 9239,
		"temporal-schema", "postgres", "temporal-frontend"),
	{
		Name: "temporal-ui", Title: "Temporal Web UI", Profiles: []Profile{Cluster},
		Needs: []string{"temporal-frontend", "codec-server"},
		Ports: []Port{{"TEMPORAL_UI", 8233}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			if !isExecutable(s.UIServer) {
				return Launch{}, fmt.Errorf("Temporal Web UI server not found at %s: run 'go tool task cluster-setup'", s.UIServer)
			}
			env := []string{"TEMPORAL_ADDRESS=" + s.addr("TEMPORAL"), "TEMPORAL_UI_HOST=" + s.Host, "TEMPORAL_UI_PORT=" + strconv.Itoa(s.port("TEMPORAL_UI")),
				"TEMPORAL_CORS_ORIGINS=" + s.UIURL(), "TEMPORAL_CODEC_ENDPOINT="}
			if s.PayloadKeyFile != "" {
				env[len(env)-1] = "TEMPORAL_CODEC_ENDPOINT=" + s.CodecURL()
			}
			return Launch{Argv: []string{s.UIServer, "--root", s.Root, "--config", "config/temporal-ui", "--env", "cluster", "start"},
				Env: env, Note: ", pointed at the frontend " + s.addr("TEMPORAL")}, nil
		},
		Ready:   HTTP{Port: "TEMPORAL_UI", Path: "/api/v1/settings"},
		Timeout: 30 * time.Second, TimeoutVar: "TEMPORAL_UI",
		Match: "temporal-ui-server",
		Reuse: ReuseOwn, // not the dev server's UI on 8233
	},
}

func init() { table = append(table, clusterTable...) }

// temporalService is one of the server's four services: the same binary
// and configuration file, --service naming which. grpc is its port
// variable; health, when set, the gRPC service its health check reports
// (the internal worker has none: its membership port is probed).
func temporalService(service, health, grpc string, grpcPort, membershipPort, metricsPort int, needs ...string) Service {
	name := "temporal-" + service
	prefix := grpc
	if grpc == "TEMPORAL" {
		prefix = "TEMPORAL_FRONTEND"
	}
	svc := Service{
		Name: name, Title: "Temporal " + service + " service", Profiles: []Profile{Cluster, ClusterServer},
		Needs: needs,
		Ports: []Port{{grpc, grpcPort}, {prefix + "_MEMBERSHIP", membershipPort}, {prefix + "_METRICS", metricsPort}},
		Launch: func(s *Stack, _ int) (Launch, error) {
			if !isExecutable(s.TemporalServer) {
				return Launch{}, fmt.Errorf("Temporal server not found at %s: run 'go tool task cluster-setup'", s.TemporalServer)
			}
			pw, err := s.postgresPassword()
			if err != nil {
				return Launch{}, err
			}
			return Launch{
				Argv: []string{s.TemporalServer, "--root", s.Root, "--config", "config/temporal", "--env", "cluster",
					"--allow-no-auth", "start", "--service", service},
				// config/temporal/cluster.yaml reads the password from here.
				Env: append(s.temporalPorts(), "TEMPORAL_METRICS_PORT="+strconv.Itoa(s.port(prefix+"_METRICS")), "STACK_POSTGRES_PASSWORD="+pw),
			}, nil
		},
		Timeout: 60 * time.Second, TimeoutVar: "TEMPORAL",
		Match: `temporal-server .*--service ` + service + `\b`,
		// Not a dev server answering on 7233: the cluster's workflows
		// would land in its SQLite.
		Reuse: ReuseOwn,
	}
	if service == "frontend" {
		svc.Ports = append(svc.Ports, Port{"TEMPORAL_HTTP", 7243})
		svc.Setup = func(ctx context.Context, s *Stack) error {
			if err := s.ensureNamespace(ctx); err != nil {
				return err
			}
			return s.ensureSearchAttributes(ctx)
		}
	}
	if health != "" {
		svc.Ready = GRPCHealth{Port: grpc, Service: health}
	} else {
		svc.Ready = TCP{Port: prefix + "_MEMBERSHIP"}
	}
	return svc
}

// temporalPorts are the STACK_*_PORT settings config/temporal/cluster.yaml
// reads, for every service (each one dials the others).
func (s *Stack) temporalPorts() []string {
	var env []string
	for v, p := range s.ports {
		if strings.HasPrefix(v, "TEMPORAL") || v == "POSTGRES" {
			env = append(env, fmt.Sprintf("STACK_%s_PORT=%d", v, p))
		}
	}
	return env
}

// ensureNamespace registers the namespace on a fresh cluster (the dev
// server makes "default" by itself; a cluster does not). Its first
// listing may lag the registration by the frontend's namespace cache, so
// the search attributes that follow are retried.
func (s *Stack) ensureNamespace(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(s.addr("TEMPORAL"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ws := workflowservice.NewWorkflowServiceClient(conn)
	_, err = ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace})
	// A raw gRPC client: the error is a status, made typed here.
	var notFound *serviceerror.NamespaceNotFound
	if err == nil || !errors.As(serviceerror.FromStatus(grpcstatus.Convert(err)), &notFound) {
		return err
	}
	_, err = ws.RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: s.Namespace,
		Description: "the investigator's local cluster", WorkflowExecutionRetentionPeriod: durationpb.New(7 * 24 * time.Hour)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(serviceerror.FromStatus(grpcstatus.Convert(err)), &exists) {
		return fmt.Errorf("could not register the namespace %s: %v", s.Namespace, err)
	}
	s.log.info("registered the namespace %s (retention 7 days)", s.Namespace)
	for {
		_, err := ws.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace})
		if err == nil {
			// The frontend's namespace cache refreshes on its own clock.
			for ctx.Err() == nil {
				if err := s.ensureSearchAttributes(ctx); err == nil {
					return nil
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the namespace %s was registered but is not served yet: %v", s.Namespace, ctx.Err())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// postgresDir is the cluster's PostgreSQL data directory.
func (s *Stack) postgresDir() string { return filepath.Join(s.DataDir, "postgres") }

// postgresPasswordFile holds the password of the cluster's superuser
// temporal: random, the stack user's only (0600 under .data). It reaches
// PostgreSQL on initdb's standard input, the Temporal services and the
// SQL tool in their environments, never a command line (ps shows those).
func (s *Stack) postgresPasswordFile() string { return filepath.Join(s.DataDir, "postgres-password") }

func (s *Stack) postgresPassword() (string, error) {
	p, err := s.secretFile(s.postgresPasswordFile())
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	pw := strings.TrimSpace(string(b))
	if err == nil && pw == "" {
		err = fmt.Errorf("%s is empty: remove it, and the cluster's data with 'go tool task clean'", s.show(p))
	}
	return pw, err
}

// postgresInitTimeout bounds initdb and the one-time password setting.
const postgresInitTimeout = 2 * time.Minute

// postgresLaunch initialises the data directory the first time (initdb:
// superuser temporal with the stack's random password, scram-sha-256 on
// the socket and on 127.0.0.1 alike: any local user reaches the port,
// and a superuser runs programs through COPY ... TO PROGRAM), then starts
// the server on STACK_POSTGRES_PORT with its socket in the data directory.
func postgresLaunch(s *Stack, _ int) (Launch, error) {
	bin := s.PostgresBin
	if !isExecutable(filepath.Join(bin, "postgres")) {
		return Launch{}, fmt.Errorf("PostgreSQL's server not found in %s: install it (sudo apt-get install -y postgresql-15) or set STACK_POSTGRES_BIN", bin)
	}
	as, err := postgresUser()
	if err != nil {
		return Launch{}, err
	}
	dir := s.postgresDir()
	note := " (data in " + s.show(dir) + ")"
	pw, err := s.postgresPassword()
	if err != nil {
		return Launch{}, err
	}
	if isFile(filepath.Join(dir, "PG_VERSION")) {
		if err := s.postgresEndTrust(bin, dir, pw, as); err != nil {
			return Launch{}, err
		}
	} else {
		if err := s.mkdirPrivate(dir); err != nil {
			return Launch{}, err
		}
		if as != nil {
			if err := os.Chown(dir, int(as.Uid), int(as.Gid)); err != nil {
				return Launch{}, err
			}
			if err := os.Chmod(s.DataDir, s.dataDirMode()); err != nil {
				return Launch{}, err
			}
		}
		pwfile, cleanup, err := s.postgresPwfile(pw, as)
		if err != nil {
			return Launch{}, err
		}
		defer cleanup()
		ctx, cancel := context.WithTimeout(context.Background(), postgresInitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", dir, "-U", "temporal", "--auth=scram-sha-256",
			"--pwfile="+pwfile, "-E", "UTF8", "--no-instructions")
		cmd.Dir = "/"
		cmd.Env = withoutSecrets(s.env)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as, Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		if out, err := cmd.CombinedOutput(); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("it did not finish within %s", postgresInitTimeout)
			}
			return Launch{}, fmt.Errorf("initdb %s failed: %v\n%s", dir, err, out)
		}
		note = " (initialised " + s.show(dir) + ")"
	}
	return Launch{
		Argv: []string{filepath.Join(bin, "postgres"), "-D", dir, "-p", strconv.Itoa(s.port("POSTGRES")),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
			// Four Temporal processes keep up to 30 connections each.
			"-c", "max_connections=200"},
		Credential: as, Note: note,
	}, nil
}

// postgresPwfile is a copy of the password initdb (run as as) can read: a
// private directory of its own under .data; the password file itself is
// the stack user's. cleanup removes it.
func (s *Stack) postgresPwfile(pw string, as *syscall.Credential) (string, func(), error) {
	d, err := os.MkdirTemp(s.DataDir, ".initdb-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(d) }
	p := filepath.Join(d, "pw")
	err = os.WriteFile(p, []byte(pw+"\n"), 0o600)
	if err == nil && as != nil {
		if err = os.Chown(p, int(as.Uid), int(as.Gid)); err == nil {
			err = os.Chown(d, int(as.Uid), int(as.Gid))
		}
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return p, cleanup, nil
}

// postgresEndTrust moves a data directory an older stack initialised with
// trust authentication (no password checked, for any local user) to
// scram-sha-256: the server still stopped, single-user mode sets the
// password (from standard input), then pg_hba.conf trusts no one.
func (s *Stack) postgresEndTrust(bin, dir, pw string, as *syscall.Credential) error {
	hba := filepath.Join(dir, "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	trusting := false
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) > 0 && !strings.HasPrefix(f[0], "#") && f[len(f)-1] == "trust" {
			lines[i] = strings.TrimSuffix(strings.TrimRight(l, " \t"), "trust") + "scram-sha-256"
			trusting = true
		}
	}
	if !trusting {
		return nil
	}
	s.log.info("PostgreSQL: %s trusted every local connection; setting the password from %s and requiring it", s.show(dir), s.show(s.postgresPasswordFile()))
	ctx, cancel := context.WithTimeout(context.Background(), postgresInitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "postgres"), "--single", "-D", dir, "postgres")
	cmd.Dir = "/"
	cmd.Env = withoutSecrets(s.env)
	// The password is hex (secretFile): nothing to quote.
	cmd.Stdin = strings.NewReader("ALTER USER temporal PASSWORD '" + pw + "';\n")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("could not set the password of PostgreSQL's user temporal in %s (is a server still running on it?): %v\n%s", s.show(dir), err, out)
	}
	// Truncated in place: the file keeps its owner (the postgres user).
	return os.WriteFile(hba, []byte(strings.Join(lines, "\n")), 0o600)
}

// postgresUser is whom PostgreSQL runs as: the postgres system user when
// this runs as root (the server refuses root), nil (this user) otherwise.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root, but there is no 'postgres' user to run PostgreSQL as (it refuses root): create one, or run the stack as another user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// postgresProbe is ready when the server answers a startup message with
// an authentication request or success ('R'), not with "starting up".
type postgresProbe struct{}

func (postgresProbe) Check(ctx context.Context, s *Stack, _ string) error {
	d := net.Dialer{Timeout: probeTimeout}
	c, err := d.DialContext(ctx, "tcp", s.addr("POSTGRES"))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(probeTimeout))
	params := "user\x00temporal\x00database\x00postgres\x00\x00"
	msg := make([]byte, 8, 8+len(params))
	binary.BigEndian.PutUint32(msg[0:], uint32(8+len(params)))
	binary.BigEndian.PutUint32(msg[4:], 3<<16) // protocol 3.0
	msg = append(msg, params...)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(c, head); err != nil {
		return err
	}
	switch head[0] {
	case 'R':
		return nil
	case 'E':
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		body := make([]byte, min(max(n, 0), 1024))
		_, _ = io.ReadFull(c, body)
		return fmt.Errorf("PostgreSQL answered: %s", postgresError(body))
	}
	return fmt.Errorf("not PostgreSQL: it answered %q", head[0])
}

// postgresError is the message field ('M') of an ErrorResponse body.
func postgresError(body []byte) string {
	for _, f := range strings.Split(string(body), "\x00") {
		if strings.HasPrefix(f, "M") {
			return f[1:]
		}
	}
	return "an error"
}

// clusterSchema is `stack cluster-schema`, the temporal-schema job: for
// each database, create it where missing, set up the version tables, and
// update the schema to the newest version the tool embeds.
func clusterSchema(s *Stack, stdout, stderr io.Writer) error {
	pw, err := s.postgresPassword()
	if err != nil {
		return err
	}
	base := []string{"--plugin", "postgres12", "--ep", s.Host, "-p", strconv.Itoa(s.port("POSTGRES")), "-u", "temporal"}
	for _, db := range []struct{ name, schema string }{
		{"temporal", "postgresql/v12/temporal"},
		{"temporal_visibility", "postgresql/v12/visibility"},
	} {
		run := func(ignore string, args ...string) error {
			cmd := exec.Command(s.SQLTool, append(append(append([]string{}, base...), "--db", db.name), args...)...)
			cmd.Env = append(withoutSecrets(os.Environ()), "SQL_PASSWORD="+pw) // not --pw: ps shows arguments
			out, err := cmd.CombinedOutput()
			if err != nil && (ignore == "" || !strings.Contains(string(out), ignore)) {
				return fmt.Errorf("temporal-sql-tool %s on %s: %v\n%s", args[0], db.name, err, out)
			}
			return nil
		}
		if err := run("already exists", "create-database"); err != nil {
			return err
		}
		if err := run("", "setup-schema", "-v", "0.0"); err != nil {
			return err
		}
		if err := run("", "update-schema", "--schema-name", db.schema); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema: %s up to date (%s)\n", db.name, db.schema)
	}
	return nil
}

// profileFile records which profile the running stack was started with,
// so that investigate and status use the cluster while it runs.
func (s *Stack) profileFile() string { return filepath.Join(s.PidDir(), "profile") }

// activeProfile is STACK_PROFILE when set, otherwise the cluster when the
// recorded stack is the cluster and its frontend still runs, otherwise dev.
func activeProfile(s *Stack) Profile {
	if p := getenv("STACK_PROFILE"); p != "" {
		return Profile(p)
	}
	b, err := os.ReadFile(s.profileFile())
	if err == nil && strings.TrimSpace(string(b)) == string(Cluster) {
		if _, ok := s.recordedPid("temporal-frontend", `temporal-server .*--service frontend\b`); ok {
			return Cluster
		}
	}
	return Dev
}

// cluster is `go tool task cluster`: the cluster profile started, or what
// runs of it reused (a service killed is started again), left running.
func cluster(load loader, tbl []Service, log *logger, stdout io.Writer) int {
	s, err := load(false)
	if err != nil {
		log.error("%v", err)
		return 1
	}
	s.StopOnExit = false
	sg := catchSignals()
	sv := newSupervisor(s, tbl, Cluster)
	if err := sv.up(sg.ctx); err != nil {
		reportUpError(log, err)
		stopStarted(sv, stdout, log)
		return orCode(sg.code(), 1)
	}
	clusterBanner(s, stdout)
	return 0
}

func clusterBanner(s *Stack, w io.Writer) {
	fmt.Fprintf(w, `
  Local cluster is running (design/deploy.md).
    Temporal Web UI:    %s
    Temporal frontend:  %s (namespace %s); history %s, matching %s, internal worker %s
    PostgreSQL:         127.0.0.1:%d (data in %s, kept across restarts)
    Workers:            2 (logs %s/worker-1.log, worker-2.log)
    Intakes:            2 (webhooks http://%s/v1/alerts and http://%s/v1/alerts, token in %s)
    Logs:               %s/

  Investigate against it:   go tool task investigate
  Settings for bin/starter: . %s
  Stop it:                  go tool task cluster-stop

`, s.UIURL(), s.addr("TEMPORAL"), s.Namespace, s.addr("TEMPORAL_HISTORY"), s.addr("TEMPORAL_MATCHING"), s.addr("TEMPORAL_WORKER"),
		s.port("POSTGRES"), s.show(s.postgresDir()), s.show(s.LogDir()), s.intakeAddr(1), s.intakeAddr(2),
		s.show(s.intakeTokenPath()), s.show(s.LogDir()), shellQuote(s.show(s.EnvFile())))
}
