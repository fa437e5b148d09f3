package agentclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/secops-agent/investigator/config"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-3 * time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate and its key, both PEM, for usage,
// valid until notAfter.
func (ca *testCA) issue(t *testing.T, usage x509.ExtKeyUsage, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	k, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
}

// TestDialClientCertificateRefused: a Temporal server that requires a
// client certificate (mTLS) and refuses the one given, or gets none, is
// said as such, not "nothing answered". The server is a TLS listener that
// trusts another authority than the one that issued the client's
// certificate. The client trusts the server's authority through
// SSL_CERT_FILE, as a user of a private CA would; the system roots are
// read once a process, so the dial runs in a child process of the test.
func TestDialClientCertificateRefused(t *testing.T) {
	if addr := os.Getenv("AGENTCLIENT_MTLS_ADDR"); addr != "" {
		_, err := Dial(Options{Temporal: config.Temporal{Address: addr, Namespace: "ns", TLS: true,
			CertPath: os.Getenv("AGENTCLIENT_MTLS_CERT"), KeyPath: os.Getenv("AGENTCLIENT_MTLS_KEY")}})
		fmt.Printf("unavailable=%t\nerror=%v\n", IsUnavailable(err), err)
		return
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	// forgedCA bears the client CA's name: the client offers its
	// certificate, which the server cannot verify.
	serverCA, clientCA, otherCA, forgedCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "another CA"), newTestCA(t, "client CA")
	valid := time.Now().Add(time.Hour)
	srvCert, srvKey := serverCA.issue(t, x509.ExtKeyUsageServerAuth, valid)
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	require.NoError(t, err)
	trusted := x509.NewCertPool()
	trusted.AddCert(clientCA.cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, NextProtos: []string{"h2"},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: trusted})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake() // refuses the client's certificate
			}()
		}
	}()
	addr := ln.Addr().String()
	issued := 0
	client := func(ca *testCA, notAfter time.Time) (string, string) {
		cert, key := ca.issue(t, x509.ExtKeyUsageClientAuth, notAfter)
		issued++
		name := fmt.Sprintf("client-%d", issued)
		return write(name+".pem", cert), write(name+".key", key)
	}
	refused := func(alert string) string {
		return "the Temporal server refused this client's certificate (tls: " + alert + "): check TEMPORAL_TLS_CLIENT_CERT_PATH and that the server trusts its issuer"
	}
	where := "cannot connect to Temporal at " + addr + " (namespace ns): "
	type tc struct{ cert, key, want string }
	cases := map[string]tc{"no certificate": {"", "",
		"the Temporal server requires a client certificate (mTLS) and none was given: set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"}}
	// Not issued by an authority the server names: crypto/tls sends none.
	cert, key := client(otherCA, valid)
	cases["another authority"] = tc{cert, key, refused("certificate required")}
	cert, key = client(forgedCA, valid)
	cases["forged authority"] = tc{cert, key, refused("unknown certificate authority")}
	cert, key = client(clientCA, time.Now().Add(-time.Hour))
	cases["expired"] = tc{cert, key, refused("expired certificate")}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDialClientCertificateRefused$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+write("ca.pem", serverCA.pem), "SSL_CERT_DIR="+dir,
				"AGENTCLIENT_MTLS_ADDR="+addr, "AGENTCLIENT_MTLS_CERT="+c.cert, "AGENTCLIENT_MTLS_KEY="+c.key)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "error="+where+c.want+"\n")
			require.Contains(t, string(out), "unavailable=true\n")
			require.False(t, strings.Contains(string(out), "nothing answered"))
		})
	}
}

// certAlert takes a certificate alert from a gRPC status's text too, and
// no other alert: a handshake failure says nothing about the certificate.
func TestCertAlertFromText(t *testing.T) {
	for text, want := range map[string]string{
		`connection error: desc = "error reading server preface: remote error: tls: bad certificate"`:                    "bad certificate",
		`connection error: desc = "transport: authentication handshake failed: remote error: tls: certificate required"`: "certificate required",
		`connection error: desc = "transport: authentication handshake failed: remote error: tls: handshake failure"`:    "",
		`connection error: desc = "transport: error while dialing: dial tcp: connection refused"`:                        "",
	} {
		require.Equal(t, want, certAlert(errors.New(text)), text)
	}
}
