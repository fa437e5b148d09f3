// Package payloadcodec encrypts Temporal payloads with AES-256-GCM, so that
// alerts, tool results, conclusions and analyst notes are never stored in
// Temporal history in clear text, and serves the remote codec HTTP API that
// lets the Temporal Web UI (and the CLI) show them to those who hold the key.
package payloadcodec

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/secops-agent/investigator/internal/smallfile"
)

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

// maxKeyFileBytes bounds what LoadKeyFile reads: a key file is a few lines.
const maxKeyFileBytes = 1 << 20

// keyIDPattern keeps key IDs printable and short: they are stored in clear in
// every payload's metadata and named in error messages.
var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Keys is a key ring read from a key file: the first key encrypts, every key
// decrypts, so a new key can be put first while payloads written under older
// keys stay readable.
type Keys struct {
	source  string
	order   []string
	aead    map[string]cipher.AEAD
	check   map[string]string // checkValue of each key, by ID
	warning string
}

// checkLabel is what a key's check value authenticates: a fixed string, so
// the value tells keys apart and, HMAC being a PRF, reveals nothing of the key.
const checkLabel = "investigator fingerprint"

// checkValue is the first 8 bytes of HMAC-SHA256(key, checkLabel), in hex.
func checkValue(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(checkLabel))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// LoadKeyFile reads a key file: one key per line as KEY_ID:BASE64_32_BYTES,
// blank lines and lines starting with # ignored. A file that other users may
// read is accepted (Kubernetes mounts secrets 0644 unless told otherwise),
// but Warning says so. Errors are one sentence and never quote key material.
func LoadKeyFile(path string) (*Keys, error) {
	// The mode checked below is the file's that was read, not the path's.
	raw, info, err := smallfile.ReadInfo(path, maxKeyFileBytes)
	switch {
	case errors.Is(err, smallfile.ErrTooLarge):
		return nil, fmt.Errorf("the payload key file %s is larger than 1 MiB; it should hold a few KEY_ID:BASE64_KEY lines", path)
	case err != nil:
		return nil, fmt.Errorf("cannot read the payload key file %s: %v", path, err)
	}
	k, err := ParseKeys(path, raw)
	if err != nil {
		return nil, err
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		k.warning = fmt.Sprintf("the payload key file %s can be read by other users (mode %04o); restrict it with chmod 600 %s", path, mode, path)
	}
	return k, nil
}

// ParseKeys reads key file content; source names it in errors.
func ParseKeys(source string, raw []byte) (*Keys, error) {
	k := &Keys{source: source, aead: map[string]cipher.AEAD{}, check: map[string]string{}}
	firstLine := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), maxKeyFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		at := fmt.Sprintf("payload key file %s, line %d", source, n)
		id, enc, ok := strings.Cut(line, ":")
		id, enc = strings.TrimSpace(id), strings.TrimSpace(enc)
		if !ok || id == "" || enc == "" {
			return nil, fmt.Errorf("%s: expected KEY_ID:BASE64_KEY (32 bytes, base64)", at)
		}
		if !keyIDPattern.MatchString(id) {
			return nil, fmt.Errorf("%s: a key ID may hold only letters, digits, '.', '_' and '-', at most 64 of them", at)
		}
		if first, dup := firstLine[id]; dup {
			return nil, fmt.Errorf("%s: key ID %q is already defined on line %d", at, id, first)
		}
		key, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("%s: the key of %q is not valid base64", at, id)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("%s: the key of %q is %d bytes, AES-256 needs %d (make one with: openssl rand -base64 32)", at, id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%s: the key of %q is unusable: %v", at, id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: the key of %q is unusable: %v", at, id, err)
		}
		firstLine[id] = n
		k.order = append(k.order, id)
		k.aead[id] = aead
		k.check[id] = checkValue(key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read the payload key file %s: %v", source, err)
	}
	if len(k.order) == 0 {
		return nil, fmt.Errorf("the payload key file %s holds no keys; add a line KEY_ID:BASE64_KEY (make a key with: openssl rand -base64 32)", source)
	}
	return k, nil
}

// EncryptKeyID is the ID of the key that encrypts: the file's first.
func (k *Keys) EncryptKeyID() string { return k.order[0] }

// IDs lists the key IDs in file order.
func (k *Keys) IDs() []string { return append([]string(nil), k.order...) }

// CheckValues lists the keys in file order as ID:CHECK, CHECK being 16 hex
// digits of HMAC-SHA256(key, "investigator fingerprint"): two rings with
// these equal hold the same keys, in the same order, while the list reveals
// nothing of any key (worker/fingerprint.go compares them across workers).
func (k *Keys) CheckValues() []string {
	out := make([]string, len(k.order))
	for i, id := range k.order {
		out[i] = id + ":" + k.check[id]
	}
	return out
}

// Source is the key file's path.
func (k *Keys) Source() string { return k.source }

// Warning is a sentence about the file's permissions, or "" (also for nil).
func (k *Keys) Warning() string {
	if k == nil {
		return ""
	}
	return k.warning
}
