package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"strings"
)

const (
	maxInventoryBytes = 4 << 20
	maxInventoryHosts = 10000
	maxHostQuery      = 253 // the longest DNS name
	maxFieldBytes     = 300
)

// Host is one inventory entry, returned as-is by lookup_host.
type Host struct {
	Hostname    string   `json:"hostname" jsonschema:"the host's name"`
	Aliases     []string `json:"aliases,omitempty" jsonschema:"other names: instance IDs, DNS names"`
	IPs         []string `json:"ips" jsonschema:"the host's addresses"`
	Owner       string   `json:"owner,omitempty" jsonschema:"the team or person responsible for the host"`
	Role        string   `json:"role,omitempty" jsonschema:"what the host does"`
	OS          string   `json:"os,omitempty" jsonschema:"operating system"`
	Criticality string   `json:"criticality,omitempty" jsonschema:"business criticality: low, medium, high or critical"`
	Environment string   `json:"environment,omitempty" jsonschema:"production, staging, ..."`
}

// inventory answers lookups by name or address; it is read once at start.
type inventory struct {
	hosts  []Host
	byName map[string]int     // lower-case hostname and aliases
	byAddr map[netip.Addr]int // unmapped addresses
}

// hostnamePattern is what a lookup may ask for when it is not an address:
// DNS names, short names and cloud instance IDs.
var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func loadInventory(path string) (*inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the inventory: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInventoryBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the inventory %s: %w", path, err)
	}
	if len(data) > maxInventoryBytes {
		return nil, fmt.Errorf("the inventory %s is larger than %d bytes", path, maxInventoryBytes)
	}
	inv, err := parseInventory(data)
	if err != nil {
		return nil, fmt.Errorf("the inventory %s is not valid: %w", path, err)
	}
	return inv, nil
}

func parseInventory(data []byte) (*inventory, error) {
	var doc struct {
		Hosts []Host `json:"hosts"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if len(doc.Hosts) > maxInventoryHosts {
		return nil, fmt.Errorf("it lists more than %d hosts", maxInventoryHosts)
	}
	inv := &inventory{hosts: doc.Hosts, byName: map[string]int{}, byAddr: map[netip.Addr]int{}}
	for i, h := range doc.Hosts {
		if !hostnamePattern.MatchString(h.Hostname) || len(h.Hostname) > maxHostQuery {
			return nil, fmt.Errorf("host %d has no valid hostname", i+1)
		}
		for _, name := range append([]string{h.Hostname}, h.Aliases...) {
			if !hostnamePattern.MatchString(name) || len(name) > maxHostQuery {
				return nil, fmt.Errorf("host %s has an invalid alias", h.Hostname)
			}
			key := strings.ToLower(name)
			if j, dup := inv.byName[key]; dup && j != i {
				return nil, fmt.Errorf("the name %s belongs to two hosts", name)
			}
			inv.byName[key] = i
		}
		for _, s := range h.IPs {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("host %s has an invalid IP address", h.Hostname)
			}
			a = a.Unmap()
			if j, dup := inv.byAddr[a]; dup && j != i {
				return nil, fmt.Errorf("the address %s belongs to two hosts", a)
			}
			inv.byAddr[a] = i
		}
		for _, v := range []string{h.Owner, h.Role, h.OS, h.Criticality, h.Environment} {
			if err := checkText(v, maxFieldBytes); err != nil {
				return nil, fmt.Errorf("host %s has a field that %w", h.Hostname, err)
			}
		}
	}
	return inv, nil
}

var errBadHost = errors.New("host must be a hostname, an instance ID or an IP address")

// lookup finds a host by address, name or alias, or by its short name when
// the query has no dot (web-server-prod-01 for web-server-prod-01.corp).
func (inv *inventory) lookup(query string) (*Host, error) {
	q := strings.TrimSpace(query)
	switch {
	case q == "":
		return nil, errors.New("host is required")
	case len(q) > maxHostQuery:
		return nil, fmt.Errorf("host is longer than %d bytes", maxHostQuery)
	}
	if a, err := netip.ParseAddr(q); err == nil {
		if i, ok := inv.byAddr[a.WithZone("").Unmap()]; ok {
			return &inv.hosts[i], nil
		}
		return nil, nil
	}
	if !hostnamePattern.MatchString(q) {
		return nil, errBadHost
	}
	key := strings.ToLower(strings.TrimSuffix(q, ".")) // web.example. is web.example
	if i, ok := inv.byName[key]; ok {
		return &inv.hosts[i], nil
	}
	if !strings.Contains(key, ".") {
		for i, h := range inv.hosts {
			if short, _, _ := strings.Cut(strings.ToLower(h.Hostname), "."); short == key {
				return &inv.hosts[i], nil
			}
		}
	}
	return nil, nil
}

// owner names the inventory host an address belongs to, or "".
func (inv *inventory) owner(a netip.Addr) string {
	if i, ok := inv.byAddr[a]; ok {
		return inv.hosts[i].Hostname
	}
	return ""
}
