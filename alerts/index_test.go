package alerts

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIndexKeysAreNormalised(t *testing.T) {
	found := Indicators(map[string]any{
		"a": "from ::ffff:198.51.100.23 and 2001:DB8:0:0::1 and fe80::1%eth0",
		"b": "Evil.Example.COM. served D41D8CD98F00B204E9800998ECF8427E to Alice@Corp.Example.com",
		"c": map[string]any{"userName": `CORP\Alice`, "host": "WS-FIN-07"},
		"d": "arn:aws:iam::123456789012:role/BreakGlass and XXX.xx.007.82 and https://x.example.net/a?token=s3cr3t",
	})
	keys := IndexKeys(found)
	for _, want := range []string{
		"ip:198.51.100.23", "ip:2001:db8::1", "ip:fe80::1",
		"domain:evil.example.com", "domain:corp.example.com", "domain:ws-fin-07", "domain:x.example.net",
		"hash:d41d8cd98f00b204e9800998ecf8427e", "email:alice@corp.example.com",
		`user:corp\alice`, "user:alice", "resource:arn:aws:iam::123456789012:role/BreakGlass", "ipmask:*.*.7.82",
	} {
		assert.Contains(t, keys, want)
	}
	for _, k := range keys {
		assert.NotContains(t, k, "token", "URLs (and the secrets in them) are not keys")
	}
	assert.Equal(t, keys, IndexKeys(found), "deterministic")

	var many []any
	for i := range 3000 {
		many = append(many, fmt.Sprintf("198.51.%d.%d", i/256, i%256))
	}
	assert.Len(t, IndexKeys(Indicators(map[string]any{"ips": many})), MaxKeys)
	assert.Empty(t, IndexKeys([]Indicator{{KindDomain, strings.Repeat("a", MaxIndicatorBytes+1), "x"}}), "too long to be found exactly")
}

func TestSearchKeys(t *testing.T) {
	for _, c := range []struct {
		typ, value string
		want       []string
	}{
		{"", "::ffff:203.0.113.9", nil}, // checked below: the IP and its masked forms
		{"", "2001:DB8::0:1", []string{"ip:2001:db8::1"}},
		{"", "XXX.XXX.7.82", []string{"ipmask:*.*.7.82"}},
		{"", "D41D8CD98F00B204E9800998ECF8427E", []string{"hash:d41d8cd98f00b204e9800998ecf8427e"}},
		{"", "Evil.Example.COM", []string{"domain:evil.example.com"}},
		{"", "alice@corp.example.com", []string{"email:alice@corp.example.com", "user:alice@corp.example.com"}},
		{"", `CORP\Alice`, []string{`user:corp\alice`, "user:alice"}},
		{"", "john.smith", []string{"user:john.smith"}},
		{"", "arn:aws:iam::123456789012:role/BreakGlass", []string{"resource:arn:aws:iam::123456789012:role/BreakGlass"}},
		{"", "i-0abc1234def567890", []string{"resource:i-0abc1234def567890"}},
		{KeyDomain, "ws-fin-07", []string{"domain:ws-fin-07"}},
		{KeyUser, "Deploy", []string{"user:deploy"}},
	} {
		got, err := SearchKeys(c.typ, c.value)
		require.NoError(t, err, c.value)
		if c.want != nil {
			assert.Equal(t, c.want, got, c.value)
		}
	}
	ip, err := SearchKeys("", "::ffff:203.0.113.9")
	require.NoError(t, err)
	assert.Len(t, ip, 15, "the address and its 14 masked forms fit one array-contains-any (30)")
	assert.Equal(t, "ip:203.0.113.9", ip[0])
	assert.Contains(t, ip, "ipmask:*.*.113.9")
	assert.Contains(t, ip, "ipmask:203.0.113.*")
	assert.NotContains(t, ip, "ipmask:*.*.*.*")

	for _, c := range []struct{ typ, value, err string }{
		{KeyIP, "999.1.1.1", `"999.1.1.1" is not an IP address`},
		{KeyHash, "abc", `"abc" is not an MD5, SHA-1 or SHA-256 hash`},
		{KeyIPMask, "1.2.3.4", "is not an anonymised IPv4 address"},
		{KeyDomain, "a b", "is not a domain"},
		{"url", "http://x", `unknown indicator type "url"`},
		{"", " ", "the indicator is empty"},
		{"", strings.Repeat("a", MaxIndicatorBytes+1), "longer than 1024 bytes"},
	} {
		_, err := SearchKeys(c.typ, c.value)
		require.ErrorContains(t, err, c.err, c.value)
	}
}
