package intel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/secops-agent/investigator/tools"
)

// URLScan.io tools: urlscan_search finds existing scans (GET /api/v1/search/),
// urlscan_result shapes one scan's result (GET /api/v1/result/{uuid}/). Neither
// submits new scans: the agent is read-only towards the outside world.

const (
	// usSearchBudget bounds the bytes of search entries returned; entries past
	// it are counted in "omitted" instead.
	usSearchBudget = 10 << 10
	// usListCap bounds each list (ips, domains, ...) of a result.
	usListCap = 15
	// usURLListCap bounds the longer lists (urls, hashes).
	usURLListCap = 10
	// usCertListCap bounds the certificates of a result.
	usCertListCap = 5
)

var usUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func newURLScanSearch(c *client) tools.Tool { return urlscanSearch{c} }

func newURLScanResult(c *client) tools.Tool { return urlscanResult{c} }

type urlscanSearch struct{ c *client }

func (urlscanSearch) Purpose() string {
	return "Find earlier URLScan.io scans of a domain, IP, URL or hash: what a site served and when."
}

func (urlscanSearch) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "urlscan_search",
		Description: "Search existing URLScan.io scans (it does not submit new scans) with an ElasticSearch query string. " +
			"Returns {query, total, has_more, results:[{uuid, time, url, domain, ip, country, status, title, asn_name, malicious}]} " +
			"(malicious only when URLScan gave a verdict); call urlscan_result with a uuid for the scan's verdicts, contacted IPs, domains and hashes. " +
			"Examples: \"domain:evil.example.com\", \"page.domain:example.com AND date:>now-7d\", \"page.ip:198.51.100.23\", " +
			"\"hash:<sha256 of a loaded resource>\", \"page.asn:AS13335\", \"task.url:\\\"https://example.com/login\\\"\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"query": {Type: genai.TypeString, Description: "ElasticSearch query string over scan fields such as domain, page.domain, page.ip, page.url, page.asn, hash, task.url, date; " +
					"e.g. \"domain:evil.example.com\" or \"page.ip:198.51.100.23\". Quote values containing ':' or '/'."},
				"size": {Type: genai.TypeInteger, Description: "Most scans to return, 1-100, default 10 (newest first)."},
			},
			Required: []string{"query"},
		},
	}
}

// usSearchResponse is the documented answer of GET /api/v1/search/.
type usSearchResponse struct {
	Results []struct {
		ID   string `json:"_id"`
		Task struct {
			UUID       string `json:"uuid"`
			Time       string `json:"time"`
			URL        string `json:"url"`
			Visibility string `json:"visibility"`
			Method     string `json:"method"`
		} `json:"task"`
		Page struct {
			URL     string          `json:"url"`
			Domain  string          `json:"domain"`
			IP      string          `json:"ip"`
			Country string          `json:"country"`
			Server  string          `json:"server"`
			Status  usvtLooseString `json:"status"`
			Title   string          `json:"title"`
			ASN     usvtLooseString `json:"asn"`
			ASNName string          `json:"asnname"`
		} `json:"page"`
		Stats struct {
			Malicious *float64 `json:"malicious"`
		} `json:"stats"`
		Verdicts *usVerdict `json:"verdicts"`
	} `json:"results"`
	Total   int  `json:"total"`
	HasMore bool `json:"has_more"`
}

// usVerdict covers both the flat verdict of search results ({malicious,
// score}) and the overall one of full results ({overall:{malicious, score}}).
type usVerdict struct {
	Malicious *bool    `json:"malicious"`
	Score     *float64 `json:"score"`
	Overall   *struct {
		Malicious *bool    `json:"malicious"`
		Score     *float64 `json:"score"`
	} `json:"overall"`
}

type usSearchEntry struct {
	UUID      string `json:"uuid"`
	Time      string `json:"time,omitempty"`
	URL       string `json:"url,omitempty"`
	Domain    string `json:"domain,omitempty"`
	IP        string `json:"ip,omitempty"`
	Country   string `json:"country,omitempty"`
	Status    string `json:"status,omitempty"`
	Title     string `json:"title,omitempty"`
	ASNName   string `json:"asn_name,omitempty"`
	Malicious *bool  `json:"malicious,omitempty"`
}

type usSearchResult struct {
	Query   string          `json:"query"`
	Total   int             `json:"total"`
	HasMore bool            `json:"has_more"`
	Results []usSearchEntry `json:"results"`
	Omitted int             `json:"omitted,omitempty"`
	Note    string          `json:"note"`
}

func (t urlscanSearch) Call(ctx context.Context, args map[string]any) (any, error) {
	q, err := tools.StringArg(args, "query", true, 1000)
	if err != nil {
		return nil, err
	}
	size, err := tools.IntArg(args, "size", 10, 1, 100)
	if err != nil {
		return nil, err
	}
	var resp usSearchResponse
	err = t.c.get(ctx, "/api/v1/search/", url.Values{"q": {q}, "size": {strconv.Itoa(size)}}, &resp)
	if errors.Is(err, errNotFound) {
		resp = usSearchResponse{} // no index hit is not an error for a search
	} else if err != nil {
		return nil, err
	}
	out := usSearchResult{Query: q, Total: resp.Total, HasMore: resp.HasMore, Results: []usSearchEntry{}}
	used := 0
	for i, r := range resp.Results {
		if i >= size {
			break
		}
		e := usSearchEntry{
			UUID:    r.Task.UUID,
			Time:    r.Task.Time,
			URL:     clip(r.Page.URL, 200),
			Domain:  r.Page.Domain,
			IP:      r.Page.IP,
			Country: r.Page.Country,
			Status:  string(r.Page.Status),
			Title:   clip(r.Page.Title, 100),
			ASNName: clip(r.Page.ASNName, 60),
		}
		if e.UUID == "" {
			e.UUID = r.ID
		}
		if e.URL == "" {
			e.URL = clip(r.Task.URL, 200)
		}
		if v := r.Verdicts; v != nil && v.Overall != nil && v.Overall.Malicious != nil {
			e.Malicious = v.Overall.Malicious
		} else if v != nil && v.Malicious != nil {
			e.Malicious = v.Malicious
		} else if r.Stats.Malicious != nil && *r.Stats.Malicious > 0 {
			// A count of malicious resources; zero is no verdict, not "benign".
			m := true
			e.Malicious = &m
		}
		b, _ := json.Marshal(e)
		if used+len(b) > usSearchBudget {
			out.Omitted = min(len(resp.Results), size) - i
			break
		}
		used += len(b)
		out.Results = append(out.Results, e)
	}
	switch {
	case len(out.Results) == 0:
		out.Note = "No URLScan.io scan matches this query. Check the field names (domain, page.ip, hash, ...) or widen the query."
	case out.Omitted > 0:
		out.Note = fmt.Sprintf("%d more matching scans were left out to keep the answer small; narrow the query or lower size. Use urlscan_result with a uuid for details.", out.Omitted)
	default:
		out.Note = "Use urlscan_result with a uuid for that scan's verdicts, contacted IPs, domains and hashes."
	}
	return out, nil
}

type urlscanResult struct{ c *client }

func (urlscanResult) Purpose() string {
	return "Read one URLScan.io scan in full (contacted hosts, verdicts, page details) by its uuid."
}

func (urlscanResult) Declaration() *genai.FunctionDeclaration {
	return &genai.FunctionDeclaration{
		Name: "urlscan_result",
		Description: "Fetch one URLScan.io scan result by its uuid (from urlscan_search). " +
			"Returns {uuid, found, scanned_at, submitted_url, report_url, page:{url, domain, ip, country, server, title, status, asn, asn_name}, " +
			"verdict:{malicious, score, categories, brands, tags}, urlscan_verdict, engines:{malicious_total, benign_total, engines_total, malicious}, " +
			"stats, lists:{ips, countries, domains, urls, hashes, certificates — each {total, items} with at most 15 items}}. " +
			"found is false when the scan does not exist or has not finished yet. Example: uuid \"0e37e828-a9d9-45c0-ac50-1ca579b86c72\".",
		Parameters: &genai.Schema{
			Type: genai.TypeObject,
			Properties: map[string]*genai.Schema{
				"uuid": {Type: genai.TypeString, Description: "The scan's uuid, e.g. \"0e37e828-a9d9-45c0-ac50-1ca579b86c72\"."},
			},
			Required: []string{"uuid"},
		},
	}
}

// usResultResponse is the part of the documented GET /api/v1/result/{uuid}/
// answer that the tool reads (the large data/meta sections are skipped).
type usResultResponse struct {
	Task struct {
		UUID       string   `json:"uuid"`
		Time       string   `json:"time"`
		URL        string   `json:"url"`
		Visibility string   `json:"visibility"`
		ReportURL  string   `json:"reportURL"`
		Tags       []string `json:"tags"`
	} `json:"task"`
	Page struct {
		URL        string          `json:"url"`
		Domain     string          `json:"domain"`
		IP         string          `json:"ip"`
		Country    string          `json:"country"`
		Server     string          `json:"server"`
		Title      string          `json:"title"`
		Status     usvtLooseString `json:"status"`
		ASN        usvtLooseString `json:"asn"`
		ASNName    string          `json:"asnname"`
		Redirected string          `json:"redirected"`
	} `json:"page"`
	Verdicts struct {
		Overall usVerdictDetail `json:"overall"`
		URLScan usVerdictDetail `json:"urlscan"`
		Engines struct {
			Score          *float64          `json:"score"`
			Malicious      []json.RawMessage `json:"malicious"`
			MaliciousTotal int               `json:"maliciousTotal"`
			BenignTotal    int               `json:"benignTotal"`
			EnginesTotal   int               `json:"enginesTotal"`
			Categories     []json.RawMessage `json:"categories"`
		} `json:"engines"`
		Community struct {
			VotesTotal     int `json:"votesTotal"`
			VotesMalicious int `json:"votesMalicious"`
			VotesBenign    int `json:"votesBenign"`
		} `json:"community"`
	} `json:"verdicts"`
	Lists struct {
		IPs          []string `json:"ips"`
		Countries    []string `json:"countries"`
		Domains      []string `json:"domains"`
		URLs         []string `json:"urls"`
		Hashes       []string `json:"hashes"`
		Certificates []struct {
			SubjectName string  `json:"subjectName"`
			Issuer      string  `json:"issuer"`
			ValidFrom   float64 `json:"validFrom"`
			ValidTo     float64 `json:"validTo"`
		} `json:"certificates"`
	} `json:"lists"`
	Stats struct {
		Malicious        *int     `json:"malicious"`
		UniqCountries    *int     `json:"uniqCountries"`
		TotalLinks       *int     `json:"totalLinks"`
		SecureRequests   *int     `json:"secureRequests"`
		SecurePercentage *float64 `json:"securePercentage"`
		AdBlocked        *int     `json:"adBlocked"`
	} `json:"stats"`
}

type usVerdictDetail struct {
	Score      *float64          `json:"score"`
	Malicious  *bool             `json:"malicious"`
	Categories []json.RawMessage `json:"categories"`
	Brands     []json.RawMessage `json:"brands"`
	Tags       []json.RawMessage `json:"tags"`
}

type usVerdictOut struct {
	Malicious  *bool    `json:"malicious,omitempty"`
	Score      *float64 `json:"score,omitempty"`
	Categories []string `json:"categories,omitempty"`
	Brands     []string `json:"brands,omitempty"`
	Tags       []string `json:"tags,omitempty"`
}

func (v usVerdictDetail) shape() *usVerdictOut {
	o := usVerdictOut{
		Malicious:  v.Malicious,
		Score:      v.Score,
		Categories: usvtNames(v.Categories, 8),
		Brands:     usvtNames(v.Brands, 8),
		Tags:       usvtNames(v.Tags, 8),
	}
	if o.Malicious == nil && o.Score == nil && o.Categories == nil && o.Brands == nil && o.Tags == nil {
		return nil
	}
	return &o
}

type usCert struct {
	Subject   string `json:"subject"`
	Issuer    string `json:"issuer,omitempty"`
	ValidFrom string `json:"valid_from,omitempty"`
	ValidTo   string `json:"valid_to,omitempty"`
}

type usResultOut struct {
	UUID           string        `json:"uuid"`
	Found          bool          `json:"found"`
	Note           string        `json:"note,omitempty"`
	ScannedAt      string        `json:"scanned_at,omitempty"`
	SubmittedURL   string        `json:"submitted_url,omitempty"`
	ReportURL      string        `json:"report_url,omitempty"`
	Visibility     string        `json:"visibility,omitempty"`
	Page           *usPageOut    `json:"page,omitempty"`
	Verdict        *usVerdictOut `json:"verdict,omitempty"`
	URLScanVerdict *usVerdictOut `json:"urlscan_verdict,omitempty"`
	Engines        *usEnginesOut `json:"engines,omitempty"`
	Community      *usVotesOut   `json:"community,omitempty"`
	Stats          *usStatsOut   `json:"stats,omitempty"`
	Lists          *usListsOut   `json:"lists,omitempty"`
}

type usPageOut struct {
	URL        string `json:"url,omitempty"`
	Domain     string `json:"domain,omitempty"`
	IP         string `json:"ip,omitempty"`
	Country    string `json:"country,omitempty"`
	Server     string `json:"server,omitempty"`
	Title      string `json:"title,omitempty"`
	Status     string `json:"status,omitempty"`
	ASN        string `json:"asn,omitempty"`
	ASNName    string `json:"asn_name,omitempty"`
	Redirected string `json:"redirected,omitempty"`
}

type usEnginesOut struct {
	MaliciousTotal int      `json:"malicious_total"`
	BenignTotal    int      `json:"benign_total"`
	EnginesTotal   int      `json:"engines_total"`
	Malicious      []string `json:"malicious,omitempty"`
	Categories     []string `json:"categories,omitempty"`
}

type usVotesOut struct {
	Total     int `json:"total"`
	Malicious int `json:"malicious"`
	Benign    int `json:"benign"`
}

type usStatsOut struct {
	MaliciousRequests *int     `json:"malicious_requests,omitempty"`
	UniqueCountries   *int     `json:"unique_countries,omitempty"`
	TotalLinks        *int     `json:"total_links,omitempty"`
	SecureRequests    *int     `json:"secure_requests,omitempty"`
	SecurePercentage  *float64 `json:"secure_percentage,omitempty"`
	AdBlocked         *int     `json:"ad_blocked,omitempty"`
}

type usListsOut struct {
	IPs          *usvtList[string] `json:"ips,omitempty"`
	Countries    *usvtList[string] `json:"countries,omitempty"`
	Domains      *usvtList[string] `json:"domains,omitempty"`
	URLs         *usvtList[string] `json:"urls,omitempty"`
	Hashes       *usvtList[string] `json:"hashes,omitempty"`
	Certificates *usvtList[usCert] `json:"certificates,omitempty"`
}

func (t urlscanResult) Call(ctx context.Context, args map[string]any) (any, error) {
	id, err := tools.StringArg(args, "uuid", true, 100)
	if err != nil {
		return nil, err
	}
	if !usUUID.MatchString(id) {
		return nil, tools.Reject("uuid %q is not a URLScan.io scan uuid (expected the form 0e37e828-a9d9-45c0-ac50-1ca579b86c72, as returned by urlscan_search)", clip(id, 80))
	}
	id = strings.ToLower(id)
	var r usResultResponse
	err = t.c.get(ctx, "/api/v1/result/"+id+"/", nil, &r)
	if errors.Is(err, errNotFound) {
		return usResultOut{UUID: id, Found: false,
			Note: "URLScan.io has no finished scan with this uuid: either it does not exist or the scan is still running (results usually appear 10-60 seconds after submission). Retry later, or find scans with urlscan_search."}, nil
	}
	if err != nil {
		return nil, err
	}
	out := usResultOut{
		UUID:         id,
		Found:        true,
		ScannedAt:    r.Task.Time,
		SubmittedURL: clip(r.Task.URL, 200),
		ReportURL:    r.Task.ReportURL,
		Visibility:   r.Task.Visibility,
		Page: &usPageOut{
			URL:        clip(r.Page.URL, 200),
			Domain:     r.Page.Domain,
			IP:         r.Page.IP,
			Country:    r.Page.Country,
			Server:     clip(r.Page.Server, 60),
			Title:      clip(r.Page.Title, 100),
			Status:     string(r.Page.Status),
			ASN:        string(r.Page.ASN),
			ASNName:    clip(r.Page.ASNName, 60),
			Redirected: r.Page.Redirected,
		},
		Verdict:        r.Verdicts.Overall.shape(),
		URLScanVerdict: r.Verdicts.URLScan.shape(),
	}
	if out.ReportURL == "" {
		out.ReportURL = "https://urlscan.io/result/" + id + "/"
	}
	if e := r.Verdicts.Engines; e.EnginesTotal > 0 || e.MaliciousTotal > 0 || len(e.Malicious) > 0 {
		out.Engines = &usEnginesOut{
			MaliciousTotal: e.MaliciousTotal, BenignTotal: e.BenignTotal, EnginesTotal: e.EnginesTotal,
			Malicious: usvtNames(e.Malicious, 10), Categories: usvtNames(e.Categories, 8),
		}
	}
	if c := r.Verdicts.Community; c.VotesTotal > 0 {
		out.Community = &usVotesOut{Total: c.VotesTotal, Malicious: c.VotesMalicious, Benign: c.VotesBenign}
	}
	s := r.Stats
	if s.Malicious != nil || s.UniqCountries != nil || s.TotalLinks != nil || s.SecureRequests != nil || s.SecurePercentage != nil || s.AdBlocked != nil {
		out.Stats = &usStatsOut{MaliciousRequests: s.Malicious, UniqueCountries: s.UniqCountries, TotalLinks: s.TotalLinks,
			SecureRequests: s.SecureRequests, SecurePercentage: s.SecurePercentage, AdBlocked: s.AdBlocked}
	}
	l := usListsOut{
		IPs:       usvtCap(r.Lists.IPs, usListCap, 60),
		Countries: usvtCap(r.Lists.Countries, usListCap, 10),
		Domains:   usvtCap(r.Lists.Domains, usListCap, 100),
		URLs:      usvtCap(r.Lists.URLs, usURLListCap, 120),
		Hashes:    usvtCap(r.Lists.Hashes, usURLListCap, 128),
	}
	if n := len(r.Lists.Certificates); n > 0 {
		certs := &usvtList[usCert]{Total: n}
		for _, c := range r.Lists.Certificates[:min(n, usCertListCap)] {
			certs.Items = append(certs.Items, usCert{Subject: clip(c.SubjectName, 100), Issuer: clip(c.Issuer, 100),
				ValidFrom: usvtUnix(int64(c.ValidFrom)), ValidTo: usvtUnix(int64(c.ValidTo))})
		}
		l.Certificates = certs
	}
	if l != (usListsOut{}) {
		out.Lists = &l
	}
	return out, nil
}

// Helpers shared by the URLScan.io and VirusTotal tools.

// usvtLooseString decodes a JSON string, number or boolean as text (providers
// are not consistent: an HTTP status may be "200" or 200).
type usvtLooseString string

func (s *usvtLooseString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = ""
		return nil
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		*s = usvtLooseString(str)
		return nil
	}
	*s = usvtLooseString(strings.Trim(string(b), `"`))
	return nil
}

// usvtList is a capped list with the full count.
type usvtList[T any] struct {
	Total int `json:"total"`
	Items []T `json:"items"`
}

// usvtCap keeps at most n items, each clipped to width bytes; nil when empty.
func usvtCap(items []string, n, width int) *usvtList[string] {
	if len(items) == 0 {
		return nil
	}
	l := &usvtList[string]{Total: len(items)}
	for _, s := range items[:min(n, len(items))] {
		l.Items = append(l.Items, clip(s, width))
	}
	return l
}

// usvtNames reads a list whose elements are strings or objects with a
// name-like field, returning at most n distinct, sorted-by-appearance names.
func usvtNames(raw []json.RawMessage, n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range raw {
		var name string
		if json.Unmarshal(r, &name) != nil {
			var o map[string]any
			if json.Unmarshal(r, &o) != nil {
				continue
			}
			for _, k := range []string{"name", "engine", "label", "key", "category"} {
				if v, ok := o[k].(string); ok && v != "" {
					name = v
					break
				}
			}
		}
		name = clip(strings.TrimSpace(name), 60)
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, name)
		if len(out) == n {
			break
		}
	}
	return out
}

// usvtUnix formats Unix seconds as RFC 3339 UTC; empty for zero.
func usvtUnix(sec int64) string {
	if sec <= 0 {
		return ""
	}
	return time.Unix(sec, 0).UTC().Format(time.RFC3339)
}

// usvtSortedValues returns the distinct values of m (ignoring case, in lower
// case), sorted, at most n, and the count of distinct values.
func usvtSortedValues(m map[string]string, n int) ([]string, int) {
	seen := map[string]bool{}
	var out []string
	for _, v := range m {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, clip(v, 60))
		}
	}
	sort.Strings(out)
	return out[:min(n, len(out))], len(out)
}
