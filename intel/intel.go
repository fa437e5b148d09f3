// Package intel holds the threat-intelligence tools (AlienVault OTX,
// URLScan.io, VirusTotal, AbuseIPDB). Each is enabled only when its API key is
// configured, talks to a configurable base URL, and shapes the provider's
// answer into the few fields an analyst needs. Provider failures are typed
// upstream errors; the activities decide what Temporal retries.
package intel

import (
	"net/http"

	"github.com/secops-agent/investigator/tools"
)

// Provider says how to reach one threat-intelligence service.
type Provider struct {
	APIKey  string
	BaseURL string
}

// Config holds every provider; a provider without an API key is disabled.
type Config struct {
	OTX        Provider
	URLScan    Provider
	VirusTotal Provider
	AbuseIPDB  Provider
}

// Rate groups: the tools of one provider share its quota, and so one task
// queue and its rate limit (tools.RateLimited).
const (
	GroupOTX        = "otx"
	GroupURLScan    = "urlscan"
	GroupVirusTotal = "virustotal"
	GroupAbuseIPDB  = "abuseipdb"
)

// Groups lists every rate group.
var Groups = []string{GroupAbuseIPDB, GroupOTX, GroupURLScan, GroupVirusTotal}

// DefaultRateLimits are the providers' published free-tier rates, in calls
// per second, applied to the public services unless configured otherwise:
// VirusTotal's public API allows 4 requests a minute. The others publish
// daily quotas (AbuseIPDB 1,000 checks a day) or none: a rate limit would
// only delay calls, not keep a daily count.
var DefaultRateLimits = map[string]float64{
	GroupVirusTotal: 4.0 / 60,
}

// Default base URLs.
const (
	DefaultOTXURL        = "https://otx.alienvault.com"
	DefaultURLScanURL    = "https://urlscan.io"
	DefaultVirusTotalURL = "https://www.virustotal.com"
	DefaultAbuseIPDBURL  = "https://api.abuseipdb.com"
)

// Tools returns the threat-intelligence tools whose API key is configured,
// and the others with the reason they are off. hc may be nil; it is copied,
// never changed.
func Tools(cfg Config, hc *http.Client) ([]tools.Tool, []tools.Disabled) {
	var on []tools.Tool
	var off []tools.Disabled
	add := func(p Provider, env string, ts ...tools.Tool) {
		if p.APIKey != "" {
			on = append(on, ts...)
			return
		}
		for _, t := range ts {
			off = append(off, tools.Disabled{Name: t.Declaration().Name, Reason: env + " is not set"})
		}
	}
	otx := newClient("AlienVault OTX", "X-OTX-API-KEY", cfg.OTX, DefaultOTXURL, hc)
	add(cfg.OTX, "OTX_API_KEY", newOTX(otx))
	us := newClient("URLScan.io", "API-Key", cfg.URLScan, DefaultURLScanURL, hc)
	add(cfg.URLScan, "URLSCAN_API_KEY", newURLScanSearch(us), newURLScanResult(us))
	vt := newClient("VirusTotal", "x-apikey", cfg.VirusTotal, DefaultVirusTotalURL, hc)
	add(cfg.VirusTotal, "VIRUSTOTAL_API_KEY", newVirusTotal(vt))
	ab := newClient("AbuseIPDB", "Key", cfg.AbuseIPDB, DefaultAbuseIPDBURL, hc)
	add(cfg.AbuseIPDB, "ABUSEIPDB_API_KEY", newAbuseIPDB(ab))
	return on, off
}
