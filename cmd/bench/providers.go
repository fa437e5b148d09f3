package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// providers is one local server answering like AlienVault OTX, VirusTotal
// and AbuseIPDB (the documented JSON shapes of intel's test fixtures), each
// answer after the provider latency. It keeps when each request arrived and
// was answered: the lookups run as local activities, whose history records
// no times.
type providers struct {
	*httptest.Server
	mu     sync.Mutex
	served []interval
}

const (
	otxGeneral = `{"indicator": "198.51.100.23", "type": "IPv4", "type_title": "IPv4", "reputation": 0,
  "pulse_info": {"count": 2, "pulses": [
    {"id": "62032cee271a7efce5929b01", "name": "Emotet epoch 5 campaign", "created": "2026-10-01T02:54:38.850000",
     "tags": ["emotet", "downloader"], "adversary": "TA542", "author": {"username": "analyst1"},
     "malware_families": [{"id": "Emotet", "display_name": "Emotet", "target": null}],
     "attack_ids": [{"id": "T1027", "name": "Obfuscated Files or Information", "display_name": "T1027 - Obfuscated Files or Information"}]},
    {"id": "62032cee271a7efce5929b02", "name": "SSH scanners", "created": "2026-10-02T02:54:38.850000",
     "tags": ["ssh", "bruteforce"], "adversary": "", "author": {"username": "analyst2"}, "malware_families": [], "attack_ids": []}],
   "related": {"other": {"adversary": ["Mummy Spider"], "malware_families": ["Emotet"]}}},
  "false_positive": [], "validation": [], "asn": "AS64500 Example Hosting B.V.", "country_code": "NL", "country_name": "Netherlands",
  "sections": ["general", "geo", "reputation", "url_list", "passive_dns", "malware"]}`

	vtIPJSON = `{"data": {"id": "198.51.100.23", "type": "ip_address",
  "attributes": {"as_owner": "EXAMPLE-HOSTING", "asn": 64500, "country": "NL", "network": "198.51.100.0/24",
    "reputation": -12, "tags": [], "total_votes": {"harmless": 0, "malicious": 3}, "last_analysis_date": 1763500000,
    "last_analysis_stats": {"harmless": 55, "malicious": 4, "suspicious": 1, "undetected": 32, "timeout": 0},
    "last_analysis_results": {"EngineA": {"engine_name": "EngineA", "category": "malicious", "result": "malware"},
      "EngineB": {"engine_name": "EngineB", "category": "harmless", "result": "clean"}}}}}`

	vtDomainJSON = `{"data": {"id": "evil.example.com", "type": "domain",
  "attributes": {"registrar": "Example Registrar", "reputation": -42, "last_analysis_date": 1763500000,
    "categories": {"Forcepoint ThreatSeeker": "phishing"},
    "last_analysis_stats": {"malicious": 9, "suspicious": 1, "undetected": 60, "harmless": 20, "timeout": 0},
    "last_analysis_results": {"EngineA": {"engine_name": "EngineA", "category": "malicious", "result": "phishing"},
      "EngineB": {"engine_name": "EngineB", "category": "harmless", "result": "clean"}}}}}`

	abuseCheck = `{"data": {"ipAddress": "198.51.100.23", "isPublic": true, "ipVersion": 4, "isWhitelisted": false,
  "abuseConfidenceScore": 100, "countryCode": "NL", "usageType": "Data Center/Web Hosting/Transit",
  "isp": "Example Hosting B.V.", "domain": "example-hosting.net", "hostnames": ["a.example-hosting.net"],
  "isTor": false, "totalReports": 1543, "numDistinctUsers": 212, "lastReportedAt": "2026-11-01T12:34:56+00:00"}}`
)

func newProviders(latency time.Duration) *providers {
	p := &providers{}
	mux := http.NewServeMux()
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			arrived := time.Now()
			time.Sleep(latency)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
			p.mu.Lock()
			p.served = append(p.served, interval{arrived, time.Now()})
			p.mu.Unlock()
		}
	}
	mux.HandleFunc("GET /api/v1/indicators/IPv4/{ip}/general", answer(otxGeneral))
	mux.HandleFunc("GET /api/v3/ip_addresses/{ip}", answer(vtIPJSON))
	mux.HandleFunc("GET /api/v3/domains/{domain}", answer(vtDomainJSON))
	mux.HandleFunc("GET /api/v2/check", answer(abuseCheck))
	p.Server = httptest.NewServer(mux)
	return p
}

// spans returns the requests answered between from and to.
func (p *providers) spans(from, to time.Time) []interval {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []interval
	for _, iv := range p.served {
		if !iv.start.Before(from) && !iv.end.After(to) {
			out = append(out, iv)
		}
	}
	return out
}

// env points the worker's intel tools at the server.
func (p *providers) env() []string {
	return []string{
		"OTX_API_KEY=bench-otx", "OTX_BASE_URL=" + p.URL,
		"VIRUSTOTAL_API_KEY=bench-vt", "VIRUSTOTAL_BASE_URL=" + p.URL,
		"ABUSEIPDB_API_KEY=bench-abuseipdb", "ABUSEIPDB_BASE_URL=" + p.URL,
		"URLSCAN_API_KEY=",
	}
}
